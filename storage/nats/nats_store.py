"""Request records on NATS JetStream: ``NatsRecordStore``, the ``RecordStore`` of the ``nats``
backend (docs/scaling.md has the design and the names it creates).

- Every event is a value on ``<prefix>.req.<id>.ev.<role or _>`` in the events stream, its
  bytes exactly as the record file lays the event out (``codecs.records.format_event``), so
  tails, evidence, history sizes and ``load`` bytes equal the file backend's. A value is one
  message, or several when it is larger than the server's ``max_payload`` (``values``).
- The record's head (``codecs.record_heads``) is one KV value: the top-level fields and the
  stream sequences of the last events and of each role's newest evidence. A cold projection
  reads the head and ``max_events`` values by sequence, whatever the history's length. A
  field too large for the head is spilled: a value of its own on the request's subjects.
- An append publishes its messages under optimistic concurrency (the request's expected last
  subject sequence over ``<prefix>.req.<id>.ev.*``, so one writer at a time gets past the
  head's ``tip``), then replaces the head with a revision-checked update: the head is the
  commit point. A create does the same and makes the head last. Messages of an append that
  never committed (a writer died between the two steps) are ``void`` once this process has
  seen the newest of them stay the newest for ``ABANDONED_SECONDS`` (its own monotonic clock:
  no host's clock matters), and never read as events.
- Digests of the keys of keyed appends sit in the head with the count they left, for the last
  ``IDEMPOTENCY_WINDOW`` events: a retry from any host finds them.
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
import uuid
from collections.abc import Collection, Hashable, Mapping
from typing import Any

import msgspec
import nats.js.errors
from nats.js.api import DeliverPolicy
from nats.js.kv import KeyValue

from teams_runtime.codecs.evidence import append_key_of, role_of_raw
from teams_runtime.codecs.record_heads import (
    HEAD_RECENT,
    HEAD_TAIL,
    RecordHead,
    decode_head,
    encode_head,
    field_values,
    join_fields,
    key_digest,
)
from teams_runtime.codecs.request_ids import check_request_id
from teams_runtime.codecs.request_records import (
    EVENTS_KEY,
    RecordFields,
    decode_record,
    encode_field,
    encode_json,
    render_record,
)
from teams_runtime.exceptions import BackendError, RecordError, UnknownRequestError
from teams_runtime.storage.append_checks import (
    checked_updates,
    field_holds,
    format_history,
)
from teams_runtime.storage.nats.connection import (
    NatsConnection,
    busy,
    id_of_token,
    token_of,
    wrong_last_sequence,
)
from teams_runtime.storage.nats.values import (
    HEADER_APPEND,
    HEADER_FIELD,
    HEADER_PART,
    HEADER_PARTS,
    HistoryParts,
    message_room,
    read_value,
    split_value,
)
from teams_runtime.storage.protocols import (
    IDEMPOTENCY_WINDOW,
    AppendOutcome,
    IndexedParts,
    ParsedRecord,
    RecordRead,
)

__all__ = ["ABANDONED_SECONDS", "UNSEEN", "NatsRecordStore"]


ABANDONED_SECONDS = 30.0  # an append's messages not committed after this belong to a dead writer
_APPEND_SECONDS = 60.0  # how long an append keeps retrying against other writers
_CHAINED = 16  # messages of an append published one by one, each expecting the one before
_PIPELINE = 1000  # messages of a longer append (an import) in flight at once after those
_MAX_SEEN = 100_000  # head revisions a store remembers (every team update is seen)
_MAX_STRAYS = 10_000  # messages past a tip this process remembers first seeing
_BUSY_DELAY = 0.002  # first wait after losing to another writer; doubles with each loss...
_MAX_DELAY = 0.5  # ...up to this (half-done appends of live writers are waited for too)
_EXPECTED_SEQ = "Nats-Expected-Last-Subject-Sequence"
_EXPECTED_SUBJECT = "Nats-Expected-Last-Subject-Sequence-Subject"


class _Unseen:
    """The version of a request whose head this store has not seen: equal to no other."""

    def __repr__(self) -> str:
        return "UNSEEN"


UNSEEN: Hashable = _Unseen()


class _Prepared(msgspec.Struct, frozen=True):
    """The events of one append, laid out once before any round trip."""

    formatted: list[bytes]
    roles: list[str | None]
    keys: list[str | None]


def _prepare(events: list[msgspec.Raw], source: str) -> _Prepared:
    """Lay ``events`` out as the record file does (``RecordError`` naming ``source`` for one
    that cannot be), with the role and append key of each."""
    return _Prepared(
        format_history(events, source),
        [role_of_raw(raw) for raw in events],
        [append_key_of(raw) for raw in events],
    )


class NatsRecordStore:
    """The ``RecordStore`` of a team's records on one NATS server or cluster."""

    def __init__(self, connection: NatsConnection) -> None:
        self.connection = connection
        self.names = connection.names
        self._kv: KeyValue = connection.call(lambda: connection.js.key_value(self.names.heads))
        # Newest head revision seen per request (kept by a KV watch and by every head this
        # store reads or writes, so `version` costs no round trip): revisions only grow, so a
        # late answer never moves one back.
        self._seen: dict[str, int] = {}
        self._seen_lock = threading.Lock()
        # (request token, sequence) of messages found past a head's tip -> when first found
        # (monotonic): however wrong a clock is, one is set aside ABANDONED_SECONDS after that.
        self._strays: dict[tuple[str, int], float] = {}
        connection.call(self._watch_heads, what="a watch of record heads")
        connection.on_reconnect(self._forget_seen)

    @property
    def append_seconds(self) -> float:
        """Other writers may hold a request for ``_APPEND_SECONDS`` (then ``RecordError``);
        the server may be away for ``retry_seconds`` (then ``BackendError``)."""
        return _APPEND_SECONDS + self.connection.settings.retry_seconds

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
        """Remember the newest head revision seen of ``key`` (0: looked for, none found)."""
        with self._seen_lock:
            if key not in self._seen or revision > self._seen[key]:
                if len(self._seen) >= _MAX_SEEN:
                    self._seen.clear()  # forgetting is safe: `version` then says UNSEEN
                self._seen[key] = revision

    def _forget_seen(self) -> None:
        with self._seen_lock:  # updates may have been missed while disconnected
            self._seen.clear()

    def version(self, request_id: str) -> Hashable | None:
        """The head's revision the watch (or this store's own reads and writes) last saw;
        ``None`` once the store found no head. Never a round trip (the protocol's rule: the
        ContextActor's published answers are checked against it per warm ask; a KV read
        there would hold every ask up, for up to ``retry_seconds`` with the server away). A
        request not seen yet answers ``UNSEEN``, which equals no version the actor holds, so
        its ask reads it (that read records the revision, or raises
        ``UnknownRequestError``)."""
        key = token_of(check_request_id(request_id))
        with self._seen_lock:
            revision = self._seen.get(key)
        if revision is None:
            return UNSEEN
        return revision or None  # 0: looked for and not found

    # --- reading -----------------------------------------------------------------------------

    def _source(self, request_id: str) -> str:
        return f"nats:{self.names.heads}/{token_of(request_id)}"

    def _unknown(self, request_id: str) -> UnknownRequestError:
        return UnknownRequestError(
            f"no request {request_id!r} on the NATS server {self.connection.settings.shown_url} "
            f"(bucket {self.names.heads}); check the id and backend.nats in team_runtime.yaml."
        )

    def _room(self) -> int:
        """Bytes of data one message may carry now (the connected server's max_payload)."""
        return message_room(self.connection.client.max_payload)

    async def _get_head(self, key: str) -> tuple[RecordHead, int] | None:
        """The head of ``key`` and its revision (``None``: there is none); noted for
        ``version``."""
        try:
            entry = await self._kv.get(key)
        except nats.js.errors.KeyNotFoundError:
            entry = None
        if entry is None or entry.value is None or entry.revision is None:
            self._note(key, 0)
            return None
        self._note(key, entry.revision)
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

    async def _value(self, seq: int) -> bytes:
        return await read_value(self.connection.js, self.names.events, seq)

    async def _fields(
        self,
        request_id: str,
        head: RecordHead,
        *,
        names: Collection[str] | None = None,
        known: Mapping[int, bytes] | None = None,
    ) -> RecordFields:
        """The head's fields, with the values of spilled ones read back (only of ``names``
        when given; ``known`` holds values by sequence already in hand)."""
        source = self._source(request_id)
        wanted = {name: seq for name, seq in head.spilled.items() if names is None or name in names}
        if not wanted:
            return decode_record(bytes(head.fields), source)
        by_seq = dict(known or {})
        missing = sorted(set(wanted.values()) - set(by_seq))
        fetched = await asyncio.gather(*(self._value(seq) for seq in missing))
        by_seq.update(zip(missing, fetched, strict=True))
        joined = join_fields(head.fields, {name: by_seq[seq] for name, seq in wanted.items()})
        return decode_record(joined, source)

    async def _parts(
        self,
        request_id: str,
        head: RecordHead,
        revision: int,
        tail: int,
        *,
        known: Mapping[int, bytes] | None = None,
    ) -> IndexedParts:
        """The head and the values it points at: the last ``tail`` events (at most
        ``HEAD_TAIL``), each role's newest evidence and the spilled fields; only those not in
        ``known`` (values by sequence already in hand: an append's own) are read."""
        tail_seqs = head.tail[-tail:] if tail else []
        by_seq = dict(known or {})
        wanted = sorted((set(tail_seqs) | {seq for _, seq in head.evidence.values()}) - set(by_seq))
        data, fields = await asyncio.gather(
            asyncio.gather(*(self._value(seq) for seq in wanted)),
            self._fields(request_id, head, known=by_seq),
        )
        by_seq.update(zip(wanted, data, strict=True))
        return IndexedParts(
            version=revision,
            fields=fields,
            count=head.count,
            history_bytes=head.history_bytes,
            tail=[msgspec.Raw(by_seq[seq]) for seq in tail_seqs],
            evidence={
                role: (position, msgspec.Raw(by_seq[seq]))
                for role, (position, seq) in head.evidence.items()
            },
            source=self._source(request_id),
        )

    async def _history(self, request_id: str, head: RecordHead) -> list[bytes]:
        """Every event the head counts, in order: one ordered pass over the request's
        messages up to ``last_seq``, skipping void ranges and spilled fields, joining parts."""
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
        parts = HistoryParts()
        try:
            while True:
                msg = await sub.next_msg(timeout=10)
                seq = msg.metadata.sequence.stream
                if seq > head.last_seq:
                    break
                headers = msg.headers
                void = any(first <= seq <= last for first, last in head.void)
                if not void and not (headers and HEADER_FIELD in headers):
                    event = parts.value(seq, headers, msg.data)
                    if event is not None:
                        events.append(event)
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

    async def _whole(self, request_id: str, head: RecordHead) -> tuple[list[bytes], RecordFields]:
        """Every event and every field of the record at ``head`` (read at once)."""
        history, fields = await asyncio.gather(
            self._history(request_id, head), self._fields(request_id, head)
        )
        return history, fields

    def read_nowait(self, request_id: str, *, tail: int | None) -> RecordRead | None:
        return None  # every read is a round trip to the server: a worker thread's job

    def read(self, request_id: str, *, tail: int | None) -> RecordRead:
        request_id = check_request_id(request_id)

        async def read() -> RecordRead:
            head, revision = await self._head(request_id)
            if tail is not None and tail <= HEAD_TAIL:
                return await self._parts(request_id, head, revision, tail)
            history, fields = await self._whole(request_id, head)
            fields[EVENTS_KEY] = [msgspec.Raw(event) for event in history]
            return ParsedRecord(revision, fields, self._source(request_id))

        read_: RecordRead = self.connection.call(read, what="a record read")
        return read_

    def load(self, request_id: str) -> bytes:
        """The bytes the file backend's record file holds for the same history."""
        request_id = check_request_id(request_id)

        async def load() -> bytes:
            head, _ = await self._head(request_id)
            history, fields = await self._whole(request_id, head)
            return render_record(fields, history).data

        data: bytes = self.connection.call(load, what="a record read")
        return data

    def exists(self, request_id: str) -> bool:
        key = token_of(check_request_id(request_id))
        return (
            self.connection.call(lambda: self._get_head(key), what="a record head read") is not None
        )

    def list_ids(self) -> list[str]:
        async def keys() -> list[str]:
            return await self.connection.bucket_keys(self._kv, self.names.heads)

        return sorted(
            id_of_token(key) for key in self.connection.call(keys, what="a listing of records")
        )

    # --- writing -----------------------------------------------------------------------------

    def create(self, request_id: str, record: Mapping[str, Any]) -> bool:
        """Store a new record: its events (and spilled fields) first, then its head, which
        claims the id; a create that fails half way leaves no head."""
        request_id = check_request_id(request_id)
        fields = dict(record)
        events = fields.get(EVENTS_KEY, [])
        if not isinstance(events, list):
            raise RecordError("a new request record needs `events` to be a list.")
        fields[EVENTS_KEY] = []
        prepared = _prepare([encode_field(event) for event in events], self._source(request_id))
        writer = _Append(self, request_id, prepared, fields, "", {}, creating=True)
        created: AppendOutcome = self.connection.call(writer.run, what="a record create")
        return created.applied

    def append(
        self,
        request_id: str,
        events: list[msgspec.Raw],
        updates: Mapping[str, Any],
        *,
        key: str = "",
        unless: Mapping[str, Any] | None = None,
    ) -> AppendOutcome:
        request_id = check_request_id(request_id)
        changes = checked_updates(updates)
        prepared = _prepare(events, "an appended event")  # as the file store says
        writer = _Append(self, request_id, prepared, changes, key, unless or {})
        appended: AppendOutcome = self.connection.call(writer.run, what="an append")
        return appended

    def _stray_age(self, key: str, seq: int) -> float:
        """How old a message past a head's tip is: how long this process has known of it, on
        its own monotonic clock. Never a timestamp against this host's clock: a host whose
        clock runs ahead would take a live writer's fresh messages for a dead one's and set
        them aside while it still writes (an outside attack interleaved two long appends so)."""
        now = time.monotonic()
        with self._seen_lock:
            if len(self._strays) >= _MAX_STRAYS:
                self._strays.clear()
            first = self._strays.setdefault((key, seq), now)
        return now - first


class _Retry(Exception):
    """Another writer got there first: read the head again, after ``delay`` seconds (``None``:
    the append's own back-off)."""

    def __init__(self, delay: float | None = None) -> None:
        super().__init__()
        self.delay = delay


class _Blocked(Exception):
    """The request's first message was refused: another writer's messages stand after the
    head's tip (it has not committed yet, or died first)."""


class _Value(msgspec.Struct, frozen=True):
    """One value to publish: an event, or a spilled field."""

    subject: str
    data: bytes
    field: bool = False


class _Append:
    """One append (or create), run on the connection's loop; retried whole until it commits."""

    def __init__(
        self,
        store: NatsRecordStore,
        request_id: str,
        prepared: _Prepared,
        updates: dict[str, Any],
        key: str,
        refuse_if: Mapping[str, Any],
        *,
        creating: bool = False,
    ) -> None:
        self.store = store
        self.request_id = request_id
        self.source = store._source(request_id)
        self.prepared = prepared
        # Encoded now: a value that cannot be is an error before anything is published.
        self.updates = {name: msgspec.Raw(encode_json(value)) for name, value in updates.items()}
        self.key = key_digest(key) if key else ""
        self.refuse_if = refuse_if
        self.creating = creating
        self.id = uuid.uuid4().hex
        self.kv_key = token_of(request_id)
        self.names = store.names
        # What this attempt has standing after the head's tip `base` (-1: nothing, start over).
        self.base = -1
        self.end = -1  # the request's last sequence: ours, or `base`
        self.messages: list[int] = []  # every message published after `base`
        self.published: list[int] = []  # the (last) message of each event
        self.spills: dict[tuple[str, bytes], int] = {}  # spilled values published after `base`
        self.virtual_tip = 0  # creating: messages up to here are abandoned ones, never events

    async def run(self) -> AppendOutcome:
        deadline = time.monotonic() + _APPEND_SECONDS
        losses = 0
        while True:
            head, revision = await self._read()
            try:
                return await self._attempt(head, revision)
            except _Retry as retry:
                losses += 1
                delay = retry.delay
                if delay is None:
                    delay = min(_MAX_DELAY, _BUSY_DELAY * 2 ** min(losses, 16))
                    delay *= random.uniform(0.5, 1.0)  # writers that lost together spread out
            left = deadline - time.monotonic()
            if left <= 0:
                raise RecordError(
                    f"{self.source}: other writers kept the request busy for "
                    f"{_APPEND_SECONDS:g} s; nothing was appended (retry)."
                )
            await asyncio.sleep(min(delay, left))

    async def _read(self) -> tuple[RecordHead, int]:
        """The head and its revision; creating, a new head (revision 0) while there is none."""
        found = await self.store._get_head(self.kv_key)
        if found is not None:
            return found
        if not self.creating:
            raise self.store._unknown(self.request_id)
        tip = self.virtual_tip
        return RecordHead(fields=msgspec.Raw(b"{}"), tip=tip, void=[(1, tip)] if tip else []), 0

    async def _answer_without_writing(
        self, head: RecordHead, revision: int
    ) -> AppendOutcome | None:
        """A keyed append already stored, or a refusal: ``AppendOutcome`` with nothing written."""
        if self.key:
            for stored_key, count in reversed(head.keys):
                if stored_key == self.key:
                    return AppendOutcome(revision, None, count, applied=False)
        if self.refuse_if:
            fields = await self.store._fields(self.request_id, head, names=self.refuse_if)
            if field_holds(fields, self.refuse_if):
                return AppendOutcome(revision, None, head.count, applied=False, refused=True)
        return None

    async def _attempt(self, head: RecordHead, revision: int) -> AppendOutcome:
        for append_id, count in head.recent:
            if append_id == self.id:  # this append committed, but its answer was lost
                parts = await self.store._parts(self.request_id, head, revision, HEAD_TAIL)
                return AppendOutcome(-1, parts, count)  # -1: no cached version ever matches
        if self.creating and revision:  # someone else made it
            return AppendOutcome(revision, None, head.count, applied=False)
        answered = await self._answer_without_writing(head, revision)
        if answered is not None:
            return answered
        if self.base != head.tip:  # nothing of ours stands after this tip: publish afresh
            self.base = self.end = head.tip
            self.messages, self.published, self.spills = [], [], {}
            if self.prepared.formatted:
                self.published = await self._publish_or_clear(
                    [
                        _Value(self.names.event_subject(self.request_id, role), formatted)
                        for formatted, role in zip(
                            self.prepared.formatted, self.prepared.roles, strict=True
                        )
                    ],
                    head,
                )
        while True:  # commit; a fields-only writer in between only costs a re-check
            new_head, data = await self._advanced(head)
            try:
                if self.creating:
                    new_revision = await self.store._kv.create(self.kv_key, data)
                else:
                    new_revision = await self.store._kv.update(self.kv_key, data, last=revision)
            except nats.js.errors.KeyWrongLastSequenceError:
                head, revision = await self._read()
                if self.creating:  # someone else made it meanwhile
                    await self._abandon()
                    return AppendOutcome(revision, None, head.count, applied=False)
                if head.tip != self.base:
                    raise _Retry(0) from None  # ours were set aside (or none): start again
                answered = await self._answer_without_writing(head, revision)
                if answered is not None:
                    await self._abandon()
                    return answered
                continue
            self.store._note(self.kv_key, new_revision)
            parts = await self._parts_after(new_head, new_revision)
            return AppendOutcome(revision, parts, new_head.count)

    async def _parts_after(self, head: RecordHead, revision: int) -> IndexedParts:
        """What is stored now: this append's events (the last ``HEAD_TAIL`` of them) and
        spilled values from the bytes in hand, the rest read."""
        known = dict(zip(self.published, self.prepared.formatted, strict=True))
        known.update((seq, data) for (_, data), seq in self.spills.items())
        tail = min(len(self.published), HEAD_TAIL)
        return await self.store._parts(self.request_id, head, revision, tail, known=known)

    def _headers(self, value: _Value) -> dict[str, str]:
        headers = {HEADER_APPEND: self.id}
        if value.field:
            headers[HEADER_FIELD] = "1"
        return headers

    async def _publish(self, values: list[_Value]) -> list[int]:
        """Publish ``values`` after ``end``; returns the sequence of each one's last message.
        The first message expects ``end``, so one writer at a time gets past a tip; the next
        few each expect the one before, as does every part of a split value. A long batch (an
        import) is pipelined after those: the tip it won is its own until it commits."""
        try:
            return await self._publish_all(values)
        except BaseException as exc:
            self.base = -1  # what stands after the tip is no whole append: start again
            if isinstance(exc, nats.js.errors.APIError) and not busy(exc):
                raise BackendError(
                    f"{self.source}: the NATS server at {self.store.connection.settings.shown_url}"
                    f" refused a message of this write ({exc.description or 'no reason given'},"
                    f" err_code {exc.err_code}); nothing was written to the record. Check the "
                    f"limits of the stream {self.names.events}."
                ) from None
            raise

    async def _publish_all(self, values: list[_Value]) -> list[int]:
        js = self.store.connection.js
        wildcard = self.names.request_events(self.request_id)
        room = self.store._room()
        finals = [0] * len(values)
        batch: list[tuple[int, _Value]] = []

        async def flush() -> None:
            futures = [
                (
                    index,
                    await js.publish_async(value.subject, value.data, headers=self._headers(value)),
                )
                for index, value in batch
            ]
            batch.clear()
            for index, future in futures:
                seq = (await future).seq
                finals[index] = seq
                self.messages.append(seq)
                self.end = max(self.end, seq)

        for index, value in enumerate(values):
            parts = split_value(value.data, room)
            if len(parts) == 1 and len(self.messages) + len(batch) >= _CHAINED:
                batch.append((index, value))
                if len(batch) >= _PIPELINE:
                    await flush()
                continue
            await flush()
            earlier: list[int] = []
            for number, part in enumerate(parts, start=1):
                headers = self._headers(value)
                if len(parts) > 1:
                    headers[HEADER_PART] = f"{number}/{len(parts)}"
                if earlier and number == len(parts):
                    headers[HEADER_PARTS] = ",".join(map(str, earlier))
                headers[_EXPECTED_SEQ] = str(self.end)
                headers[_EXPECTED_SUBJECT] = wildcard
                try:
                    ack = await js.publish(value.subject, part, headers=headers)
                except nats.js.errors.APIError as exc:
                    if not wrong_last_sequence(exc):
                        raise
                    if self.messages:  # cut off after our first message: someone voided us
                        raise _Retry(0) from None
                    raise _Blocked from None
                earlier.append(ack.seq)
                self.messages.append(ack.seq)
                self.end = ack.seq
            finals[index] = self.end
        await flush()
        return finals

    async def _publish_or_clear(self, values: list[_Value], head: RecordHead) -> list[int]:
        try:
            return await self._publish(values)
        except _Blocked:
            cleared = await self._clear_abandoned(head)
            raise _Retry(0 if cleared else None) from None

    async def _clear_abandoned(self, head: RecordHead) -> bool:
        """The request's newest message stands past the tip: if its writer died between
        publishing and committing (it is old), or it is one of ours, set it aside so appends
        can go on (``True``); else raise ``_Retry`` to wait for that writer. ``False``: nothing
        stands past the tip any more (another writer committed meanwhile)."""
        js = self.store.connection.js
        try:
            last = await js.get_msg(
                self.names.events, subject=self.names.request_events(self.request_id)
            )
        except nats.js.errors.NotFoundError:
            return False
        if last.seq is None or last.seq <= head.tip:
            return False
        ours = (last.headers or {}).get(HEADER_APPEND) == self.id
        age = self.store._stray_age(self.kv_key, last.seq)
        if not ours and age < ABANDONED_SECONDS:
            raise _Retry(None if age + _MAX_DELAY < ABANDONED_SECONDS else ABANDONED_SECONDS - age)
        if self.creating:  # no head yet to mark them in: the new one will
            self.virtual_tip = last.seq
        else:
            await self._void(last.seq)
        return True

    async def _abandon(self) -> None:
        if self.messages:
            await self._void(max(self.messages))

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

    async def _advanced(self, head: RecordHead) -> tuple[RecordHead, bytes]:
        """The head after this append, and its KV value: fields updated, events counted;
        fields too large for the head spilled (published after the events)."""
        fields, spilled = head.fields, dict(head.spilled)
        if self.updates:  # else the fields stay as they are, bytes and all
            values = field_values(head.fields)
            for name, value in self.updates.items():
                values[name] = value
                spilled.pop(name, None)
            fields = msgspec.Raw(encode_json(values))
        count = head.count
        new_count = count + len(self.published)
        evidence = dict(head.evidence)
        latest = dict(head.keys)  # a key's newest event is the one a retry is answered from
        prepared = self.prepared
        for offset, seq in enumerate(self.published):
            role = prepared.roles[offset]
            if role is not None:
                evidence[role] = (count + offset, seq)
            event_key = prepared.keys[offset]
            if event_key is not None:
                digest = key_digest(event_key)
                latest.pop(digest, None)
                latest[digest] = count + offset + 1
        oldest = new_count - IDEMPOTENCY_WINDOW  # keys of events older than the window go
        new_head = RecordHead(
            fields=fields,
            count=new_count,
            history_bytes=head.history_bytes + sum(len(f) for f in prepared.formatted),
            last_seq=self.published[-1] if self.published else head.last_seq,
            tip=self.end,
            tail=[*head.tail, *self.published][-HEAD_TAIL:],
            evidence=evidence,
            keys=[(digest, after) for digest, after in latest.items() if after - 1 >= oldest],
            void=head.void,
            recent=[*head.recent, (self.id, new_count)][-HEAD_RECENT:],
            spilled=spilled,
        )
        return new_head, await self._fit(new_head, head)

    async def _fit(self, new_head: RecordHead, head: RecordHead) -> bytes:
        """Spill the largest fields until the head fits in one message; its KV value."""
        room = self.store._room()
        encoded = encode_head(new_head)
        if len(encoded) <= room:
            return encoded
        values = field_values(new_head.fields)
        largest = sorted(
            (name for name in values if name != EVENTS_KEY and name not in new_head.spilled),
            key=lambda name: len(values[name]),
            reverse=True,
        )
        for name in largest:
            value = bytes(values[name])
            if len(value) <= len(b"null"):
                break
            seq = self.spills.get((name, value))
            if seq is None:
                subject = self.names.event_subject(self.request_id, None)
                [seq] = await self._publish_or_clear([_Value(subject, value, field=True)], head)
                self.spills[(name, value)] = seq
            values[name] = msgspec.Raw(b"null")
            new_head.spilled[name] = seq
            new_head.fields = msgspec.Raw(encode_json(values))
            new_head.tip = self.end
            encoded = encode_head(new_head)
            if len(encoded) <= room:
                return encoded
        raise RecordError(
            f"{self.source}: the record head would be {len(encoded)} bytes even "
            f"with its large fields apart, more than the NATS server's max_payload leaves for "
            f"it ({room} bytes); shorten the names of the record's top-level fields."
        )
