"""Request records on NATS JetStream: ``NatsRecordStore``, the ``RecordStore`` of the ``nats``
backend (docs/scaling.md has the design and the names it creates).

- Every event is one message on ``<prefix>.req.<id>.ev.<role or _>`` in the events stream, its
  bytes exactly as the record file lays the event out (``codecs.records.format_event``), so
  tails, evidence, history sizes and ``load`` bytes equal the file backend's.
- The record's head (``codecs.record_heads``) is one KV value: the top-level fields and the
  stream sequences of the last events and of each role's newest evidence. A cold projection
  reads the head and ``max_events`` messages by sequence, whatever the history's length.
- An append publishes its events under optimistic concurrency (the request's expected last
  subject sequence over ``<prefix>.req.<id>.ev.*``, so one writer at a time gets past the
  head's ``tip``), then replaces the head with a revision-checked update: the head is the
  commit point. Events of an append that never committed (a writer died between the two
  steps) are ``void`` once older than ``ABANDONED_SECONDS``, and never read as events.
- Keys of keyed appends sit in the head with the count they left, for the last
  ``IDEMPOTENCY_WINDOW`` events: a retry from any host finds them.
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Hashable, Mapping
from typing import Any, TypeVar

import msgspec
import nats.errors
import nats.js.errors
from nats.js.api import DeliverPolicy
from nats.js.kv import KeyValue

from teams_runtime.actors.storage.nats_connection import (
    NatsConnection,
    id_of_token,
    token_of,
    wrong_last_sequence,
)
from teams_runtime.actors.storage.protocols import (
    IDEMPOTENCY_WINDOW,
    Appended,
    IndexedParts,
    ParsedRecord,
    RecordRead,
)
from teams_runtime.actors.storage.record_writes import checked_updates, field_holds
from teams_runtime.codecs.evidence import append_key_of, role_of_raw
from teams_runtime.codecs.record_heads import (
    HEAD_RECENT,
    HEAD_TAIL,
    RecordHead,
    decode_head,
    encode_head,
)
from teams_runtime.codecs.records import (
    EVENTS_KEY,
    RecordFields,
    decode_record,
    encode_field,
    encode_json,
    format_event,
    render_record,
)
from teams_runtime.codecs.request_ids import check_request_id
from teams_runtime.exceptions import RecordError, UnknownRequestError

__all__ = ["ABANDONED_SECONDS", "NatsRecordStore"]

_T = TypeVar("_T")

ABANDONED_SECONDS = 30.0  # an append's events not committed after this belong to a dead writer
_APPEND_SECONDS = 60.0  # how long an append keeps retrying against other writers
_CHAINED = 16  # events of an append published one by one, each expecting the one before
_PIPELINE = 1000  # events of a longer append (an import) in flight at once after those
_MAX_SEEN = 100_000  # head revisions a store remembers (every team update is seen)
_HEADER_APPEND = "Tr-Append"  # the id of the append that published an event
_HEADER_TIME = "Tr-Time"  # when (epoch seconds) it was published
_EXPECTED_SEQ = "Nats-Expected-Last-Subject-Sequence"
_EXPECTED_SUBJECT = "Nats-Expected-Last-Subject-Sequence-Subject"


class _Prepared(msgspec.Struct, frozen=True):
    """The events of one append, laid out once before any round trip."""

    formatted: list[bytes]
    roles: list[str | None]
    keys: list[str | None]


def _prepare(events: list[msgspec.Raw]) -> _Prepared:
    formatted = []
    for raw in events:
        try:
            formatted.append(format_event(raw))
        except (msgspec.DecodeError, RecursionError) as exc:
            raise RecordError(
                f"an appended event cannot be laid out again ({exc}); fix that event by hand."
            ) from exc
    return _Prepared(
        formatted, [role_of_raw(raw) for raw in events], [append_key_of(raw) for raw in events]
    )


class NatsRecordStore:
    """The ``RecordStore`` of a team's records on one NATS server or cluster."""

    def __init__(self, connection: NatsConnection) -> None:
        self.connection = connection
        self.names = connection.names
        self._kv: KeyValue = connection.call(lambda: connection.js.key_value(self.names.heads))
        # Newest head revision seen per request (kept by a KV watch, so `version` costs no
        # round trip): revisions only grow, so a late answer never moves one back.
        self._seen: dict[str, int] = {}
        self._seen_lock = threading.Lock()
        connection.call(self._watch_heads, what="a watch of record heads")
        connection.on_reconnect(self._forget_seen)

    # --- versions ----------------------------------------------------------------------------

    async def _watch_heads(self) -> None:
        bucket = self.names.heads

        async def seen(msg: Any) -> None:
            key = msg.subject[len(f"$KV.{bucket}.") :]
            self._note(key, msg.metadata.sequence.stream)

        await self.connection.js.subscribe(
            f"$KV.{bucket}.>",
            stream=f"KV_{bucket}",
            cb=seen,
            ordered_consumer=True,
            deliver_policy=DeliverPolicy.NEW,
            headers_only=True,
        )

    def _note(self, key: str, revision: int) -> None:
        with self._seen_lock:
            if revision > self._seen.get(key, 0):
                if len(self._seen) >= _MAX_SEEN:
                    self._seen.clear()  # forgetting is safe: `version` then asks the server
                self._seen[key] = revision

    def _forget_seen(self) -> None:
        with self._seen_lock:  # updates may have been missed while disconnected
            self._seen.clear()

    def version(self, request_id: str) -> Hashable | None:
        """The head's revision: from the watch when seen, else one KV read."""
        key = token_of(check_request_id(request_id))
        with self._seen_lock:
            revision = self._seen.get(key)
        if revision is not None:
            return revision
        found = self._call(lambda: self._get_head(key), "a record head read")
        if found is None:
            return None
        self._note(key, found[1])
        with self._seen_lock:  # a newer revision the watch brought meanwhile wins
            return self._seen.get(key, found[1])

    # --- reading -----------------------------------------------------------------------------

    def _source(self, request_id: str) -> str:
        return f"nats:{self.names.heads}/{token_of(request_id)}"

    def _unknown(self, request_id: str) -> UnknownRequestError:
        return UnknownRequestError(
            f"no request {request_id!r} on the NATS server {self.connection.settings.shown_url} "
            f"(bucket {self.names.heads}); check the id and backend.nats in team_runtime.yaml."
        )

    def _call(self, make: Callable[[], Awaitable[_T]], what: str) -> _T:
        return self.connection.call(make, what=what)

    async def _get_head(self, key: str) -> tuple[RecordHead, int] | None:
        try:
            entry = await self._kv.get(key)
        except nats.js.errors.KeyNotFoundError:
            return None
        if entry.value is None or entry.revision is None:
            return None
        try:
            return decode_head(entry.value), entry.revision
        except (msgspec.DecodeError, RecursionError) as exc:
            raise RecordError(
                f"nats:{self.names.heads}/{key}: the record head is not one teams-runtime "
                f"wrote ({exc}); restore it with `teams-runtime import`."
            ) from None

    async def _head(self, request_id: str) -> tuple[RecordHead, int]:
        found = await self._get_head(token_of(request_id))
        if found is None:
            raise self._unknown(request_id)
        return found

    async def _message(self, seq: int) -> bytes:
        msg = await self.connection.js.get_msg(self.names.events, seq=seq, direct=True)
        return msg.data or b""

    async def _parts(
        self, request_id: str, head: RecordHead, revision: int, tail: int
    ) -> IndexedParts:
        """The head and the messages it points at: the last ``tail`` events and evidence."""
        tail_seqs = head.tail[-tail:] if tail else []
        wanted = sorted(set(tail_seqs) | {seq for _, seq in head.evidence.values()})
        data = await asyncio.gather(*(self._message(seq) for seq in wanted))
        by_seq = dict(zip(wanted, data, strict=True))
        return IndexedParts(
            version=revision,
            fields=self._fields(request_id, head),
            count=head.count,
            history_bytes=head.history_bytes,
            tail=[msgspec.Raw(by_seq[seq]) for seq in tail_seqs],
            evidence={
                role: (position, msgspec.Raw(by_seq[seq]))
                for role, (position, seq) in head.evidence.items()
            },
            source=self._source(request_id),
        )

    def _fields(self, request_id: str, head: RecordHead) -> RecordFields:
        return decode_record(bytes(head.fields), self._source(request_id))

    async def _history(self, request_id: str, head: RecordHead) -> list[bytes]:
        """Every event the head counts, in order: one ordered pass over the request's
        messages up to ``last_seq``, skipping void ranges."""
        if not head.count:
            return []
        js = self.connection.js
        sub = await js.subscribe(
            self.names.request_events(request_id),
            stream=self.names.events,
            ordered_consumer=True,
            deliver_policy=DeliverPolicy.ALL,
        )
        events: list[bytes] = []
        try:
            while True:
                msg = await sub.next_msg(timeout=10)
                seq = msg.metadata.sequence.stream
                if seq > head.last_seq:
                    break
                if not any(first <= seq <= last for first, last in head.void):
                    events.append(msg.data)
                if seq == head.last_seq:
                    break
        finally:
            await sub.unsubscribe()
        if len(events) != head.count:
            raise RecordError(
                f"{self._source(request_id)}: the head counts {head.count} events but the "
                f"stream {self.names.events} holds {len(events)}; restore the request with "
                "`teams-runtime import`."
            )
        return events

    def reads_quickly(self, version: Hashable) -> bool:
        return False  # every read is a round trip to the server: a worker thread's job

    def read(self, request_id: str, *, tail: int | None) -> RecordRead:
        check_request_id(request_id)

        async def read() -> RecordRead:
            head, revision = await self._head(request_id)
            if tail is not None and tail <= HEAD_TAIL:
                return await self._parts(request_id, head, revision, tail)
            history = await self._history(request_id, head)
            fields = self._fields(request_id, head)
            fields[EVENTS_KEY] = [msgspec.Raw(event) for event in history]
            return ParsedRecord(revision, fields, self._source(request_id))

        read_: RecordRead = self._call(read, "a record read")
        self._note(token_of(request_id), int(read_.version))  # type: ignore[call-overload]
        return read_

    def load(self, request_id: str) -> bytes:
        """The bytes the file backend's record file holds for the same history."""
        check_request_id(request_id)

        async def load() -> bytes:
            head, _ = await self._head(request_id)
            history = await self._history(request_id, head)
            return render_record(self._fields(request_id, head), history).data

        data: bytes = self._call(load, "a record read")
        return data

    def exists(self, request_id: str) -> bool:
        key = token_of(check_request_id(request_id))
        return self._call(lambda: self._get_head(key), "a record head read") is not None

    def list_ids(self) -> list[str]:
        async def keys() -> list[str]:
            try:
                return await self._kv.keys()
            except nats.js.errors.NoKeysError:
                return []

        return sorted(id_of_token(key) for key in self._call(keys, "a listing of records"))

    # --- writing -----------------------------------------------------------------------------

    def create(self, request_id: str, record: Mapping[str, Any]) -> bool:
        """Store a new record: its head first (which claims the id), then its events."""
        check_request_id(request_id)
        fields = dict(record)
        events = fields.get(EVENTS_KEY, [])
        if not isinstance(events, list):
            raise RecordError("a new request record needs `events` to be a list.")
        fields[EVENTS_KEY] = []
        creation = uuid.uuid4().hex
        head = RecordHead(fields=msgspec.Raw(encode_json(fields)), append=creation)
        key = token_of(request_id)

        async def create() -> bool:
            try:
                await self._kv.create(key, encode_head(head))
            except nats.js.errors.KeyWrongLastSequenceError:
                # Exists: made by someone else, or by this very create whose answer was lost.
                found = await self._get_head(key)
                return found is not None and found[0].append == creation
            return True

        if not self._call(create, "a record create"):
            return False
        if events:
            self.append(request_id, [encode_field(event) for event in events], {})
        return True

    def append(
        self,
        request_id: str,
        events: list[msgspec.Raw],
        updates: Mapping[str, Any],
        *,
        key: str = "",
        unless: Mapping[str, Any] | None = None,
    ) -> Appended:
        check_request_id(request_id)
        changes = checked_updates(updates)
        prepared = _prepare(events)
        writer = _Append(self, request_id, prepared, changes, key, unless or {})
        appended: Appended = self._call(writer.run, "an append")
        if appended.parts is not None:
            self._note(token_of(request_id), int(appended.parts.version))  # type: ignore[call-overload]
        return appended


class _Retry(Exception):
    """Another writer got there first: read the head again."""


class _Append:
    """One append, run on the connection's loop; retried whole until it commits."""

    def __init__(
        self,
        store: NatsRecordStore,
        request_id: str,
        prepared: _Prepared,
        updates: dict[str, Any],
        key: str,
        refuse_if: Mapping[str, Any],
    ) -> None:
        self.store = store
        self.request_id = request_id
        self.prepared = prepared
        self.updates = updates
        self.key = key
        self.refuse_if = refuse_if
        self.id = uuid.uuid4().hex
        self.kv_key = token_of(request_id)
        self.names = store.names
        self.published: list[int] = []  # sequences of this attempt's events
        self.base = -1  # the tip they were published after

    async def run(self) -> Appended:
        deadline = time.monotonic() + _APPEND_SECONDS
        while time.monotonic() < deadline:
            head, revision = await self.store._head(self.request_id)
            try:
                return await self._attempt(head, revision)
            except _Retry:
                await asyncio.sleep(random.uniform(0.001, 0.01))  # let the winner commit
        raise RecordError(
            f"{self.store._source(self.request_id)}: other writers kept the request busy for "
            f"{_APPEND_SECONDS:g} s; nothing was appended (retry)."
        )

    def _answer_without_writing(self, head: RecordHead, revision: int) -> Appended | None:
        """A keyed append already stored, or a refusal: ``Appended`` with nothing written."""
        if self.key:
            for stored_key, count in reversed(head.keys):
                if stored_key == self.key:
                    return Appended(revision, None, count, applied=False)
        fields = decode_record(bytes(head.fields), self.store._source(self.request_id))
        if field_holds(fields, self.refuse_if):
            return Appended(revision, None, head.count, applied=False, refused=True)
        return None

    async def _attempt(self, head: RecordHead, revision: int) -> Appended:
        for append_id, count in head.recent:
            if append_id == self.id:  # this append committed, but its answer was lost
                parts = await self.store._parts(self.request_id, head, revision, HEAD_TAIL)
                return Appended(-1, parts, count)  # -1: no cached version ever matches
        answered = self._answer_without_writing(head, revision)
        if answered is not None:
            return answered
        if self.prepared.formatted and self.base != head.tip:
            await self._publish(head)
        while True:  # commit; a fields-only writer in between only costs a re-check
            new_head = self._advanced(head)
            try:
                new_revision = await self.store._kv.update(
                    self.kv_key, encode_head(new_head), last=revision
                )
            except nats.js.errors.KeyWrongLastSequenceError:
                head, revision = await self.store._head(self.request_id)
                if self.published and head.tip != self.base:
                    raise _Retry from None  # our events were set aside: publish them again
                answered = self._answer_without_writing(head, revision)
                if answered is not None:
                    await self._abandon(self.published)
                    return answered
                continue
            parts = await self._parts_after(new_head, new_revision)
            return Appended(revision, parts, new_head.count)

    async def _publish(self, head: RecordHead) -> None:
        """Publish the events after ``head.tip``. The first expects the tip, so one writer at
        a time gets past it; the next few each expect the one before. A long batch (an
        import) is pipelined after the first: the tip it won is its own until it commits."""
        js = self.store.connection.js
        wildcard = self.names.request_events(self.request_id)
        expected = head.tip
        published: list[int] = []
        pending = list(zip(self.prepared.formatted, self.prepared.roles, strict=True))
        for formatted, role in pending[:_CHAINED]:
            headers = {**self._headers(), _EXPECTED_SEQ: str(expected), _EXPECTED_SUBJECT: wildcard}
            subject = self.names.event_subject(self.request_id, role)
            try:
                ack = await js.publish(subject, formatted, headers=headers)
            except nats.js.errors.APIError as exc:
                if not wrong_last_sequence(exc):
                    raise
                if published:  # cut off after our first event: someone voided us
                    raise _Retry from None
                await self._clear_abandoned(head)
                raise _Retry from None
            published.append(ack.seq)
            expected = ack.seq
        for start in range(_CHAINED, len(pending), _PIPELINE):
            futures = [
                await js.publish_async(
                    self.names.event_subject(self.request_id, role),
                    formatted,
                    headers=self._headers(),
                )
                for formatted, role in pending[start : start + _PIPELINE]
            ]
            published += [(await future).seq for future in futures]
        self.published = published
        self.base = head.tip

    def _headers(self) -> dict[str, str]:
        return {_HEADER_APPEND: self.id, _HEADER_TIME: f"{time.time():.3f}"}

    async def _clear_abandoned(self, head: RecordHead) -> None:
        """If the request's newest message is past the tip and old, its writer died between
        publishing and committing: void those messages so appends can go on."""
        js = self.store.connection.js
        try:
            last = await js.get_msg(
                self.names.events, subject=self.names.request_events(self.request_id)
            )
        except nats.js.errors.NotFoundError:
            return
        if last.seq is None or last.seq <= head.tip:
            return
        published = float((last.headers or {}).get(_HEADER_TIME, "0") or 0)
        if time.time() - published > ABANDONED_SECONDS:
            await self._void(last.seq)

    async def _abandon(self, sequences: list[int]) -> None:
        if sequences:
            await self._void(sequences[-1])

    async def _void(self, upto: int) -> None:
        """Move the tip past ``upto``: the messages between are never events."""
        while True:
            head, revision = await self.store._head(self.request_id)
            if head.tip >= upto:
                return
            head.void = [*head.void, (head.tip + 1, upto)]
            head.tip = upto
            try:
                await self.store._kv.update(self.kv_key, encode_head(head), last=revision)
                return
            except nats.js.errors.KeyWrongLastSequenceError:
                continue

    def _advanced(self, head: RecordHead) -> RecordHead:
        """The head after this append: fields updated, events counted."""
        fields = decode_record(bytes(head.fields), self.store._source(self.request_id))
        fields.update(self.updates)
        count = head.count
        new_count = count + len(self.published)
        evidence = dict(head.evidence)
        keys = list(head.keys)
        prepared = self.prepared
        for offset, seq in enumerate(self.published):
            role = prepared.roles[offset]
            if role is not None:
                evidence[role] = (count + offset, seq)
            event_key = prepared.keys[offset]
            if event_key is not None:
                keys.append((event_key, count + offset + 1))
        oldest = new_count - IDEMPOTENCY_WINDOW  # keys of events older than the window go
        return RecordHead(
            fields=msgspec.Raw(encode_json(fields)),
            count=new_count,
            history_bytes=head.history_bytes + sum(len(f) for f in prepared.formatted),
            last_seq=self.published[-1] if self.published else head.last_seq,
            tip=self.published[-1] if self.published else head.tip,
            tail=[*head.tail, *self.published][-HEAD_TAIL:],
            evidence=evidence,
            keys=[(k, after) for k, after in keys if after - 1 >= oldest],
            void=head.void,
            append=self.id,
            recent=[*head.recent, (self.id, new_count)][-HEAD_RECENT:],
        )

    async def _parts_after(self, head: RecordHead, revision: int) -> IndexedParts:
        """What is stored now, from the bytes in hand plus the evidence messages of roles this
        append did not touch."""
        new = dict(zip(self.published, self.prepared.formatted, strict=True))
        missing = sorted({seq for _, seq in head.evidence.values()} - set(new))
        fetched = await asyncio.gather(*(self.store._message(seq) for seq in missing))
        by_seq = {**new, **dict(zip(missing, fetched, strict=True))}
        return IndexedParts(
            version=revision,
            fields=self.store._fields(self.request_id, head),
            count=head.count,
            history_bytes=head.history_bytes,
            tail=[msgspec.Raw(new[seq]) for seq in self.published],
            evidence={
                role: (position, msgspec.Raw(by_seq[seq]))
                for role, (position, seq) in head.evidence.items()
            },
            source=self.store._source(self.request_id),
        )
