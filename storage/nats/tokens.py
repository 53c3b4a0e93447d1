"""Ids as NATS subject tokens and KV keys, reversibly (docs/scaling.md, "Names it creates").

A request id, role or worker id may hold ``.``, ``:`` and letters of any script; a subject token
cannot hold ``.``, ``*``, ``>`` or whitespace, and a KV key allows only ``[-/_=.A-Za-z0-9]``.
"""

from __future__ import annotations

__all__ = ["id_of_token", "token_of"]

_TOKEN_SAFE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")


def token_of(value: str) -> str:
    """A request id, role or worker id as one subject token and KV key, reversibly: ASCII
    letters, digits, ``_`` and ``-`` stay as they are; every other character becomes ``=`` and
    two hex digits per byte of its UTF-8 (``.`` is ``=2E``, ``요`` is ``=EC=9A=94``). KV keys
    allow only ``[-/_=.A-Za-z0-9]`` and subject tokens no ``.``, ``*``, ``>`` or whitespace."""
    return "".join(
        char
        if char in _TOKEN_SAFE
        else "".join(f"={byte:02X}" for byte in char.encode("utf-8", "surrogatepass"))
        for char in value
    )


def id_of_token(token: str) -> str:
    """The id a ``token_of`` token stands for."""
    parts = token.split("=")
    data = bytearray(parts[0].encode())
    for part in parts[1:]:
        data.append(int(part[:2], 16))
        data += part[2:].encode()
    return data.decode("utf-8", "surrogatepass")
