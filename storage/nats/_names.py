"""The names of one team on a NATS server: its streams, KV buckets, consumers and subjects,
all starting with the team's ``prefix`` (the table in docs/scaling.md, "Names it creates"), and
ids written as subject tokens and KV keys, reversibly.

A request id, role or worker id may hold ``.``, ``:`` and letters of any script; a subject token
cannot hold ``.``, ``*``, ``>`` or whitespace, and a KV key allows only ``[-/_=.A-Za-z0-9]``.
Keys and tokens come back from the server, where anyone may have written one: reading them back
is strict (``id_of_token`` answers ``None`` for any token ``token_of`` never makes).
"""

from __future__ import annotations

import msgspec

from teams_runtime.codecs.request_ids import check_request_id
from teams_runtime.exceptions import UnsafeRequestIdError

__all__ = ["REASON_HEADER", "NatsNames", "id_of_token", "request_id_of_token", "token_of"]

REASON_HEADER = "Tr-Reason"  # a rejected envelope's reason (one content-free line)


class NatsNames(msgspec.Struct, frozen=True):
    """The streams, buckets, consumers and subjects of one team on the server (by prefix).

    Envelopes stand on ``<prefix>.<kind>.<role token>.<request token>`` (kind ``q``: waiting,
    ``deferred``, ``rejected``): the builders take the role's name (written as a ``token_of``
    token: a built-in role's name is its own token) and a request's ``token_of`` token, ``*``
    (the default) for any (no role name is ``*``: it starts with a letter or digit);
    ``place_of`` reads the role's name and the request token back from a subject."""

    prefix: str

    @property
    def events(self) -> str:
        return f"{self.prefix}_events"

    @property
    def heads(self) -> str:
        return f"{self.prefix}_records"

    @property
    def queue(self) -> str:
        return f"{self.prefix}_queue"

    @property
    def rejected(self) -> str:
        return f"{self.prefix}_rejected"

    @property
    def workers(self) -> str:
        return f"{self.prefix}_workers"

    @property
    def inbox(self) -> str:
        return f"{self.prefix}_inbox"

    @property
    def queued(self) -> str:
        return f"{self.prefix}_queued"

    def event_subject(self, request_id: str, role: str | None) -> str:
        return f"{self.prefix}.req.{token_of(request_id)}.ev.{token_of(role) if role else '_'}"

    def request_events(self, request_id: str) -> str:
        return f"{self.prefix}.req.{token_of(request_id)}.ev.*"

    @property
    def every_event(self) -> str:
        return f"{self.prefix}.req.*.ev.*"

    def waiting_subject(self, role: str = "*", token: str = "*") -> str:
        return f"{self.prefix}.q.{_role_token(role)}.{token}"

    def deferred_subject(self, role: str = "*", token: str = "*") -> str:
        return f"{self.prefix}.deferred.{_role_token(role)}.{token}"

    def rejected_subject(self, role: str = "*", token: str = "*") -> str:
        return f"{self.prefix}.rejected.{_role_token(role)}.{token}"

    @property
    def every_waiting(self) -> str:
        return f"{self.prefix}.q.>"

    @property
    def every_deferred(self) -> str:
        return f"{self.prefix}.deferred.>"

    @property
    def every_rejected(self) -> str:
        return f"{self.prefix}.rejected.>"

    def place_of(self, subject: str) -> tuple[str, str] | None:
        """The role and request token of an envelope's subject (``waiting``, ``deferred``,
        ``rejected``); ``None`` for a subject of any other shape (not one the runtime
        writes: another program may publish anything under the queue's subjects)."""
        parts = subject.split(".")
        if len(parts) != 4 or parts[0] != self.prefix or not parts[2] or not parts[3]:
            return None
        role = id_of_token(parts[2])
        return None if role is None else (role, parts[3])

    def set_aside_subject(self, subject: str) -> str:
        """Where an envelope on the queue's ``subject`` is set aside: the rejected subject with
        the same tokens after the kind (``<prefix>.rejected._`` if there are none, or one is
        empty)."""
        rest = subject.split(".")[2:]
        return f"{self.prefix}.rejected.{'.'.join(rest) if rest and all(rest) else '_'}"

    def role_consumer(self, role: str) -> str:
        return f"{self.prefix}_q_{token_of(role)}"

    @property
    def deferred_consumer(self) -> str:
        return f"{self.prefix}_deferred"


def _role_token(role: str) -> str:
    return role if role == "*" else token_of(role)


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
