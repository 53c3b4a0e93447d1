"""Ids as NATS subject tokens and KV keys, reversibly (docs/scaling.md, "Names it creates").

A request id, role or worker id may hold ``.``, ``:`` and letters of any script; a subject token
cannot hold ``.``, ``*``, ``>`` or whitespace, and a KV key allows only ``[-/_=.A-Za-z0-9]``.
Keys and tokens come back from the server, where anyone may have written one: reading them back
is strict (``id_of_token`` answers ``None`` for any token ``token_of`` never makes).
"""

from __future__ import annotations

from teams_runtime.codecs.request_ids import check_request_id
from teams_runtime.exceptions import UnsafeRequestIdError

__all__ = ["id_of_token", "request_id_of_token", "token_of"]

_TOKEN_SAFE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
_HEX = frozenset("0123456789ABCDEF")


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


def id_of_token(token: str) -> str | None:
    """The id a ``token_of`` token stands for; ``None`` if ``token_of`` never makes ``token``
    (an escape that is no two upper-case hex digits, bytes that are not UTF-8, a character
    written escaped that it keeps as it is, or one kept that it escapes: ``=ZZ``, ``a.b``)."""
    parts = token.split("=")
    data = bytearray(parts[0].encode())
    for part in parts[1:]:
        if len(part) < 2 or part[0] not in _HEX or part[1] not in _HEX:
            return None
        data.append(int(part[:2], 16))
        data += part[2:].encode()
    try:
        value = data.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:
        return None
    return value if value and token_of(value) == token else None


def request_id_of_token(token: str) -> str | None:
    """The request id a token stands for; ``None`` unless it is one ``token_of`` makes of a
    safe request id in its NFC form (the only ones the runtime writes)."""
    value = id_of_token(token)
    if value is None:
        return None
    try:
        return value if check_request_id(value) == value else None
    except UnsafeRequestIdError:
        return None
