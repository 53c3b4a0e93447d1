"""One envelope per id in the NATS queue: a key per queued envelope in the team's
``<prefix>_queued`` bucket (a digest of its role and id, which name an outcome), so a second
put of an id whose first envelope may still exist is refused (docs/scaling.md, "The queue").

A put creates the key (create-only: of racing puts one makes it) naming where its envelope goes
(role and request token), then publishes. A put that finds the key looks for that envelope:
waiting, held, deferred or set aside; found, the put is refused; not found (a put killed
between the two steps, a done killed before removing the key), it takes the key over
(compare-and-set) and publishes. A put in flight between the two steps is not seen by such a
look, but its publish and the taker's carry the same ``Nats-Msg-Id`` (the envelope id) within
the server's de-duplication window, so the server keeps one. ``done`` and ``drop`` purge the
key; the purge marker expires a second later (as the workers bucket's do).
"""

from __future__ import annotations

import base64
import hashlib

import msgspec
import nats.js.errors
from nats.js.kv import KeyValue

from teams_runtime.storage.nats._server_errors import NO_MESSAGE_FOUND, TTL_DISABLED
from teams_runtime.storage.nats.connection import NatsConnection

__all__ = ["QueuedIds"]

_LOOKS = 3  # a look missed by a move (published there, then acked here) is repeated
_PURGE = {"KV-Operation": "PURGE", "Nats-Rollup": "sub"}
_MARKER_TTL = "1s"


class _EnvelopeId(msgspec.Struct):
    envelope_id: str = ""
    target: str = ""


def _key(envelope_id: str, role: str) -> str:
    # An outcome is keyed by its role and envelope id: so is an envelope's one place.
    return hashlib.blake2b(f"{role}\0{envelope_id}".encode(), digest_size=16).hexdigest()


class QueuedIds:
    """The queued-id keys of one team, as one worker sees them."""

    def __init__(self, connection: NatsConnection) -> None:
        self.connection = connection
        self.names = connection.names
        self._kv: KeyValue | None = None
        self._with_ttl = True  # until the bucket says it keeps no per-message TTL

    async def _bucket(self) -> KeyValue:
        if self._kv is None:
            self._kv = await self.connection.js.key_value(self.names.queued)
        return self._kv

    async def first(self, envelope_id: str, role: str, token: str) -> str | None:
        """Mark ``envelope_id`` queued for ``role`` on request ``token``; where its first
        envelope is when one may still exist (the put is refused), else ``None``."""
        kv = await self._bucket()
        key, value = _key(envelope_id, role), f"{role} {token}".encode()
        while True:
            try:
                await kv.create(key, value)
                return None
            except nats.js.errors.KeyWrongLastSequenceError:
                pass
            try:
                entry = await kv.get(key)
            except (nats.js.errors.KeyNotFoundError, nats.js.errors.KeyDeletedError):
                continue  # purged meanwhile: make it again
            first_role, _, first_token = (
                (entry.value or b"").decode(errors="replace").partition(" ")
            )
            found = await self._existing(envelope_id, first_role, first_token)
            if found is not None:
                return found
            try:
                await kv.update(key, value, last=entry.revision)
                return None
            except nats.js.errors.KeyWrongLastSequenceError:
                continue  # another put took it over first: look again

    async def forget(self, envelope_id: str, role: str) -> None:
        """Purge the key of ``role``'s ``envelope_id`` (its envelope was removed)."""
        subject = f"$KV.{self.names.queued}.{_key(envelope_id, role)}"
        js = self.connection.js
        if self._with_ttl:
            try:
                await js.publish(subject, b"", headers={**_PURGE, "Nats-TTL": _MARKER_TTL})
                return
            except nats.js.errors.APIError as exc:
                if exc.err_code != TTL_DISABLED:
                    raise
                self._with_ttl = False  # then each removed id keeps a purge marker
        await js.publish(subject, b"", headers=_PURGE)

    async def forget_in(self, data: bytes) -> None:
        """Purge the key of the envelope ``data`` (one removed), if it has an id."""
        envelope = _id_in(data)
        if envelope.envelope_id:
            await self.forget(envelope.envelope_id, envelope.target)

    async def _existing(self, envelope_id: str, role: str, token: str) -> str | None:
        """Where an envelope ``envelope_id`` for ``role`` on request ``token`` is now (a stream
        and sequence); ``None`` when it is nowhere."""
        names = self.names
        if role not in self.connection.roles or not token:
            return None  # not what a put writes
        places = (
            (names.rejected, names.rejected_subject(role, token)),
            (names.queue, names.deferred_subject(role, token)),
            (names.queue, names.waiting_subject(role, token)),
        )
        for _ in range(_LOOKS):
            for stream, subject in places:
                seq = await self._find(stream, subject, envelope_id)
                if seq is not None:
                    return f"{stream}/{seq}"
        return None

    async def _find(self, stream: str, subject: str, envelope_id: str) -> int | None:
        seq = 1
        while True:
            try:
                answer = await self.connection.api(
                    f"STREAM.MSG.GET.{stream}", {"seq": seq, "next_by_subj": subject}
                )
            except nats.js.errors.APIError as exc:
                if exc.err_code == NO_MESSAGE_FOUND:
                    return None
                raise
            message = answer["message"]
            seq = int(message["seq"])
            data = _decoded(message.get("data", ""))
            if _id_in(data).envelope_id == envelope_id:
                return seq
            seq += 1


def _decoded(data: str) -> bytes:
    return base64.b64decode(data) if data else b""


def _id_in(data: bytes) -> _EnvelopeId:
    try:
        return msgspec.json.decode(data, type=_EnvelopeId)
    except msgspec.DecodeError:
        return _EnvelopeId()
