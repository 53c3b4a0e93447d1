"""The names of one team on a NATS server: its streams, KV buckets, consumers and subjects,
all starting with the team's ``prefix`` (the table in docs/scaling.md, "Names it creates")."""

from __future__ import annotations

import msgspec

from teams_runtime.storage.nats.tokens import id_of_token, token_of

__all__ = ["NatsNames"]


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
