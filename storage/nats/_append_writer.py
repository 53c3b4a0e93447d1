"""One append (or create) of a record on NATS, run on the connection's loop and retried whole
until it commits (docs/scaling.md, "Appends: optimistic concurrency, never a lost event").

An append publishes its messages under optimistic concurrency (the request's expected last
subject sequence over ``<prefix>.req.<id>.ev.*``, so one writer at a time gets past the head's
``tip``), then replaces the head with a revision-checked update: the head is the commit point.
A create does the same and makes the head last. Messages of an append that never committed (a
writer died between the two steps) are ``void`` once this process has seen the newest of them
stay the newest for ``ABANDONED_SECONDS`` (its own monotonic clock: no host's clock matters),
and never read as events.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Mapping
from typing import Any

import msgspec
import nats.js.errors

from teams_runtime.codecs.record_heads import (
    HEAD_TAIL,
    RecordHead,
    encode_head,
    field_values,
    key_digest,
)
from teams_runtime.codecs.request_records import EVENTS_KEY, RecordFields, encode_json
from teams_runtime.exceptions import RecordError, StorageError
from teams_runtime.policy.backoff import backoff_delay
from teams_runtime.storage._append_checks import condition_fields, field_holds, fields_are
from teams_runtime.storage.nats._head_changes import Prepared, advanced_head
from teams_runtime.storage.nats._names import token_of
from teams_runtime.storage.nats._record_reader import RecordReader
from teams_runtime.storage.nats._server_errors import busy, wrong_last_sequence
from teams_runtime.storage.nats._values import (
    HEADER_APPEND,
    HEADER_FIELD,
    HEADER_PART,
    HEADER_PARTS,
    split_value,
)
from teams_runtime.storage.protocols import AppendOutcome, IndexedParts

__all__ = ["ABANDONED_SECONDS", "APPEND_SECONDS", "AppendWriter"]

ABANDONED_SECONDS = 30.0  # an append's messages not committed after this belong to a dead writer
APPEND_SECONDS = 60.0  # how long an append keeps retrying against other writers
_CHAINED = 16  # messages of an append published one by one, each expecting the one before
_PIPELINE = 1000  # messages of a longer append (an import) in flight at once after those
_BUSY_DELAY = 0.002  # first wait after losing to another writer; doubles with each loss...
_MAX_DELAY = 0.5  # ...up to this (half-done appends of live writers are waited for too)
_EXPECTED_SEQ = "Nats-Expected-Last-Subject-Sequence"
_EXPECTED_SUBJECT = "Nats-Expected-Last-Subject-Sequence-Subject"


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


class AppendWriter:
    """One append (or create), run on the connection's loop; retried whole until it commits."""

    def __init__(
        self,
        reader: RecordReader,
        request_id: str,
        prepared: Prepared,
        updates: RecordFields,
        key: str,
        refuse_if: Mapping[str, Any],
        expect: Mapping[str, Any] | None = None,
        *,
        creating: bool = False,
    ) -> None:
        self.reader = reader
        self.request_id = request_id
        self.source = reader.source(request_id)
        self.prepared = prepared
        # Encoded now: a value that cannot be is an error before anything is published.
        self.updates = {name: msgspec.Raw(encode_json(value)) for name, value in updates.items()}
        self.key = key_digest(key) if key else ""
        self.refuse_if = refuse_if
        self.expect = expect or {}
        self.creating = creating
        self.id = uuid.uuid4().hex
        self.kv_key = token_of(request_id)
        self.names = reader.names
        # What this attempt has standing after the head's tip `base` (-1: nothing, start over).
        self.base = -1
        self.end = -1  # the request's last sequence: ours, or `base`
        self.messages: list[int] = []  # every message published after `base`
        self.published: list[int] = []  # the (last) message of each event
        self.spills: dict[tuple[str, bytes], int] = {}  # spilled values published after `base`
        self.virtual_tip = 0  # creating: messages up to here are abandoned ones, never events

    async def run(self) -> AppendOutcome:
        deadline = time.monotonic() + APPEND_SECONDS
        losses = 0
        while True:
            head, revision = await self._read()
            try:
                return await self._attempt(head, revision)
            except _Retry as retry:
                losses += 1
                delay = retry.delay
                if delay is None:  # jittered: writers that lost together spread out
                    delay = backoff_delay(losses, first=_BUSY_DELAY, cap=_MAX_DELAY, jitter=0.5)
            left = deadline - time.monotonic()
            if left <= 0:
                raise RecordError(
                    f"{self.source}: other writers kept the request busy for "
                    f"{APPEND_SECONDS:g} s; nothing was appended (retry)."
                )
            await asyncio.sleep(min(delay, left))

    async def _read(self) -> tuple[RecordHead, int]:
        """The head and its revision; creating, a new head (revision 0) while there is none."""
        found = await self.reader.get_head(self.kv_key)
        if found is not None:
            return found
        if not self.creating:
            raise self.reader.unknown(self.request_id)
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
        # Checked against the head whose revision the commit expects: a compare-and-set.
        names = [*self.refuse_if, *self.expect]
        if names:
            fields = await self.reader.fields(self.request_id, head, names=names)
            if field_holds(fields, self.refuse_if) or not fields_are(fields, self.expect):
                held = condition_fields(fields, names)
                return AppendOutcome(
                    revision, None, head.count, applied=False, refused=True, fields=held
                )
        return None

    async def _attempt(self, head: RecordHead, revision: int) -> AppendOutcome:
        for append_id, count in head.recent:
            if append_id == self.id:  # this append committed, but its answer was lost
                parts = await self.reader.parts(self.request_id, head, revision, HEAD_TAIL)
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
                    new_revision = await self.reader.kv.create(self.kv_key, data)
                else:
                    new_revision = await self.reader.kv.update(self.kv_key, data, last=revision)
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
            self.reader.note(self.kv_key, new_revision)
            parts = await self._parts_after(new_head, new_revision)
            return AppendOutcome(revision, parts, new_head.count)

    async def _parts_after(self, head: RecordHead, revision: int) -> IndexedParts:
        """What is stored now: this append's events (the last ``HEAD_TAIL`` of them) and
        spilled values from the bytes in hand, the rest read."""
        known = dict(zip(self.published, self.prepared.formatted, strict=True))
        known.update((seq, data) for (_, data), seq in self.spills.items())
        tail = min(len(self.published), HEAD_TAIL)
        return await self.reader.parts(self.request_id, head, revision, tail, known=known)

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
                raise StorageError(
                    f"{self.source}: the NATS server at {self.reader.connection.settings.shown_url}"
                    f" refused a message of this write ({exc.description or 'no reason given'},"
                    f" err_code {exc.err_code}); nothing was written to the record. Check the "
                    f"limits of the stream {self.names.events}."
                ) from None
            raise

    async def _publish_all(self, values: list[_Value]) -> list[int]:
        js = self.reader.connection.js
        wildcard = self.names.request_events(self.request_id)
        room = self.reader.room()
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
        js = self.reader.connection.js
        try:
            last = await js.get_msg(
                self.names.events, subject=self.names.request_events(self.request_id)
            )
        except nats.js.errors.NotFoundError:
            return False
        if last.seq is None or last.seq <= head.tip:
            return False
        ours = (last.headers or {}).get(HEADER_APPEND) == self.id
        age = self.reader.stray_age(self.kv_key, last.seq)
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
            head, revision = await self.reader.head(self.request_id)
            if head.tip >= upto:
                return
            head.void = [*head.void, (head.tip + 1, upto)]
            head.tip = upto
            try:
                await self.reader.kv.update(self.kv_key, encode_head(head), last=revision)
                return
            except nats.js.errors.KeyWrongLastSequenceError:
                continue

    async def _advanced(self, head: RecordHead) -> tuple[RecordHead, bytes]:
        """The head after this append, and its KV value: fields updated, events counted;
        fields too large for the head spilled (published after the events)."""
        new_head = advanced_head(
            head,
            updates=self.updates,
            prepared=self.prepared,
            published=self.published,
            tip=self.end,
            append_id=self.id,
        )
        return new_head, await self._fit(new_head, head)

    async def _fit(self, new_head: RecordHead, head: RecordHead) -> bytes:
        """Spill the largest fields until the head fits in one message; its KV value."""
        room = self.reader.room()
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
