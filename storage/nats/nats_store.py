"""Request records on NATS JetStream: ``NatsRecordStore``, the ``RecordStore`` of the ``nats``
backend (docs/scaling.md has the design and the names it creates).

- Every event is a value on ``<prefix>.req.<id>.ev.<role or _>`` in the events stream, its
  bytes exactly as the record file lays the event out (``codecs.records.format_event``), so
  tails, evidence, history sizes and ``load`` bytes equal the file storage's. A value is one
  message, or several when it is larger than the server's ``max_payload`` (``values``).
- The record's head (``codecs.record_heads``) is one KV value: the top-level fields and the
  stream sequences of the last events and of each role's newest evidence. A cold projection
  reads the head and ``max_events`` values by sequence, whatever the history's length. A
  field too large for the head is spilled: a value of its own on the request's subjects.
  Reading is ``record_reader``'s job.
- An append publishes its messages under optimistic concurrency, then replaces the head with
  a revision-checked update: the head is the commit point (``append_writer``).
- Digests of the keys of keyed appends sit in the head with the count they left, for the last
  ``IDEMPOTENCY_WINDOW`` events: a retry from any host finds them.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any

import msgspec
import nats.js.errors
from nats.js.api import DeliverPolicy
from nats.js.kv import KeyValue

from teams_runtime.codecs.record_heads import HEAD_TAIL
from teams_runtime.codecs.request_ids import check_request_id
from teams_runtime.codecs.request_records import (
    EVENTS_KEY,
    encode_field,
    render_record,
)
from teams_runtime.exceptions import RecordError
from teams_runtime.storage._append_checks import checked_updates
from teams_runtime.storage.nats._append_writer import APPEND_SECONDS, AppendWriter
from teams_runtime.storage.nats._head_changes import prepare
from teams_runtime.storage.nats._names import request_id_of_token, token_of
from teams_runtime.storage.nats._record_reader import RecordReader
from teams_runtime.storage.nats.connection import GONE_AFTER_SECONDS, NatsConnection
from teams_runtime.storage.protocols import AppendOutcome, ParsedRecord, RecordRead, Stray

__all__ = ["UNSEEN", "NatsRecordStore"]


class _Unseen:
    """The version of a request whose head this store has not seen: equal to no other."""

    def __repr__(self) -> str:
        return "UNSEEN"


UNSEEN: Hashable = _Unseen()


class NatsRecordStore:
    """The ``RecordStore`` of a team's records on one NATS server or cluster."""

    def __init__(self, connection: NatsConnection, kv: KeyValue) -> None:
        """Use ``open``: it finds the heads bucket and starts the watch of its heads."""
        self.connection = connection
        self.names = connection.names
        self.reader = RecordReader(connection, kv)

    @classmethod
    async def open(cls, connection: NatsConnection) -> NatsRecordStore:
        """The store of ``connection``'s team, its watch of record heads started."""
        heads = connection.names.heads
        kv: KeyValue = await connection.run(lambda: connection.js.key_value(heads))
        store = cls(connection, kv)
        await connection.run(store._watch_heads, what="a watch of record heads")
        connection.on_reconnect(store.reader.forget_seen)
        return store

    @property
    def append_seconds(self) -> float:
        """Other writers may hold a request for ``APPEND_SECONDS`` (then ``RecordError``);
        the server may be away for ``retry_seconds`` (then ``StorageError``)."""
        return APPEND_SECONDS + self.connection.settings.retry_seconds

    # --- versions ----------------------------------------------------------------------------

    async def _watch_heads(self) -> None:
        bucket = self.names.heads

        async def seen(msg: Any) -> None:
            key = msg.subject[len(f"$KV.{bucket}.") :]
            self.reader.note(key, msg.metadata.sequence.stream)

        watch = await self.connection.js.subscribe(
            f"$KV.{bucket}.>",
            stream=f"KV_{bucket}",
            cb=seen,
            ordered_consumer=True,
            deliver_policy=DeliverPolicy.NEW,
            headers_only=True,
            inactive_threshold=GONE_AFTER_SECONDS,
        )
        self.connection.keep(watch)  # it ends with the connection, and its helper tasks too

    def version(self, request_id: str) -> Hashable | None:
        """The head's revision the watch (or this store's own reads and writes) last saw;
        ``None`` once the store found no head. Never a round trip (the protocol's rule: the
        ContextActor's published projections are checked against it per warm ask; a KV read
        there would hold every ask up, for up to ``retry_seconds`` with the server away). A
        request not seen yet answers ``UNSEEN``, which equals no version the actor holds, so
        its ask reads it (that read records the revision, or raises
        ``UnknownRequestError``)."""
        key = token_of(check_request_id(request_id))
        revision = self.reader.revision_seen(key)
        if revision is None:
            return UNSEEN
        return revision or None  # 0: looked for and not found

    # --- reading -----------------------------------------------------------------------------

    def read_nowait(self, request_id: str, *, tail: int | None) -> RecordRead | None:
        return None  # every read is a round trip to the server: awaited

    async def read(self, request_id: str, *, tail: int | None) -> RecordRead:
        request_id = check_request_id(request_id)
        reader = self.reader

        async def read() -> RecordRead:
            head, revision = await reader.head(request_id)
            if tail is not None and tail <= HEAD_TAIL:
                return await reader.parts(request_id, head, revision, tail)
            history, fields = await reader.whole(request_id, head)
            fields[EVENTS_KEY] = [msgspec.Raw(event) for event in history]
            return ParsedRecord(revision, fields, reader.source(request_id))

        read_: RecordRead = await self.connection.run(read, what="a record read")
        return read_

    async def load(self, request_id: str) -> bytes:
        """The bytes the file storage's record file holds for the same history."""
        request_id = check_request_id(request_id)

        async def load() -> bytes:
            head, _ = await self.reader.head(request_id)
            history, fields = await self.reader.whole(request_id, head)
            return render_record(fields, history).data

        data: bytes = await self.connection.run(load, what="a record read")
        return data

    async def exists(self, request_id: str) -> bool:
        key = token_of(check_request_id(request_id))
        found = await self.connection.run(
            lambda: self.reader.get_head(key), what="a record head read"
        )
        return found is not None

    async def list_ids(self) -> list[str]:
        async def keys() -> list[str]:
            return await self.connection.bucket_keys(self.reader.kv, self.names.heads)

        listed: list[str] = await self.connection.run(keys, what="a listing of records")
        ids = (request_id_of_token(key) for key in listed)
        return sorted(request_id for request_id in ids if request_id is not None)

    async def strays(self) -> list[Stray]:
        """Keys of the heads bucket no request id reads back from (another program's)."""
        reason = "not a key teams-runtime writes (no request id reads back from it); skipped"
        keys: list[str] = await self.connection.run(self._stray_keys, what="a look for strays")
        return [Stray(where=f"nats:{self.names.heads}/{key}", reason=reason) for key in keys]

    async def _stray_keys(self) -> list[str]:
        # The stream's subjects are one answer (a key listing streams every head's headers);
        # the few that name no request are looked up, as one may have been deleted since.
        prefix = f"$KV.{self.names.heads}."
        subjects = await self.connection.stream_subjects(f"KV_{self.names.heads}", f"{prefix}>")
        keys = []
        for key in sorted(subject.removeprefix(prefix) for subject in subjects):
            if request_id_of_token(key) is None and await self._holds_value(key):
                keys.append(key)
        return keys

    async def _holds_value(self, key: str) -> bool:
        try:
            await self.reader.kv.get(key)
        except nats.js.errors.KeyNotFoundError:  # deleted or purged too
            return False
        return True

    # --- writing -----------------------------------------------------------------------------

    async def create(self, request_id: str, record: Mapping[str, Any]) -> bool:
        """Store a new record: its events (and spilled fields) first, then its head, which
        claims the id; a create that fails half way leaves no head."""
        request_id = check_request_id(request_id)
        fields = dict(record)
        events = fields.get(EVENTS_KEY, [])
        if not isinstance(events, list):
            raise RecordError("a new request record needs `events` to be a list.")
        fields[EVENTS_KEY] = []
        source = self.reader.source(request_id)
        prepared = prepare([encode_field(event) for event in events], source)
        writer = AppendWriter(self.reader, request_id, prepared, fields, "", {}, creating=True)
        created: AppendOutcome = await self.connection.run(writer.run, what="a record create")
        return created.applied

    async def append(
        self,
        request_id: str,
        events: list[msgspec.Raw],
        updates: Mapping[str, Any],
        *,
        key: str = "",
        unless: Mapping[str, Any] | None = None,
        expect: Mapping[str, Any] | None = None,
    ) -> AppendOutcome:
        request_id = check_request_id(request_id)
        changes = checked_updates(updates)
        prepared = prepare(events, "an appended event")  # as the file store says
        writer = AppendWriter(
            self.reader, request_id, prepared, changes, key, unless or {}, expect or {}
        )
        appended: AppendOutcome = await self.connection.run(writer.run, what="an append")
        return appended
