"""Reading a team's records on NATS: heads from the KV bucket, the values they point at by
sequence, whole histories in one ordered pass (docs/scaling.md, "Events and the record head").

A ``RecordReader`` is the part of a ``NatsRecordStore`` that its appends share: it also notes
the newest head revision it sees of each request (for ``version``) and when it first saw each
message past a head's tip (an append's judge of abandoned messages).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Collection, Mapping

import msgspec
import nats.js.errors
from nats.js.api import DeliverPolicy
from nats.js.kv import KeyValue

from teams_runtime.codecs.record_heads import RecordHead, decode_head, join_fields
from teams_runtime.codecs.request_records import RecordFields, decode_record
from teams_runtime.exceptions import RecordError, UnknownRequestError
from teams_runtime.storage.nats._names import token_of
from teams_runtime.storage.nats._values import HEADER_FIELD, HistoryParts, message_room, read_value
from teams_runtime.storage.nats.connection import GONE_AFTER_SECONDS, NatsConnection
from teams_runtime.storage.protocols import IndexedParts

__all__ = ["RecordReader"]

_MAX_SEEN = 100_000  # head revisions a store remembers (every team update is seen)
_MAX_STRAYS = 10_000  # messages past a tip this process remembers first seeing


class RecordReader:
    """Reads the records of ``connection``'s team through the heads bucket ``kv``."""

    def __init__(self, connection: NatsConnection, kv: KeyValue) -> None:
        self.connection = connection
        self.names = connection.names
        self.kv = kv
        # Newest head revision seen per request (kept by a KV watch and by every head this
        # store reads or writes, so `version` costs no round trip): revisions only grow, so a
        # late answer never moves one back.
        self._seen: dict[str, int] = {}
        self._seen_lock = threading.Lock()
        # (request token, sequence) of messages found past a head's tip -> when first found
        # (monotonic): however wrong a clock is, one is set aside ABANDONED_SECONDS after that.
        self._strays: dict[tuple[str, int], float] = {}

    # --- what this process has seen ----------------------------------------------------------

    def note(self, key: str, revision: int) -> None:
        """Remember the newest head revision seen of ``key`` (0: looked for, none found)."""
        with self._seen_lock:
            if key not in self._seen or revision > self._seen[key]:
                if len(self._seen) >= _MAX_SEEN:
                    self._seen.clear()  # forgetting is safe: `version` then says UNSEEN
                self._seen[key] = revision

    def forget_seen(self) -> None:
        with self._seen_lock:  # updates may have been missed while disconnected
            self._seen.clear()

    def revision_seen(self, key: str) -> int | None:
        """The newest head revision seen of ``key`` (0: looked for, none found; ``None``: not
        seen)."""
        with self._seen_lock:
            return self._seen.get(key)

    def stray_age(self, key: str, seq: int) -> float:
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

    # --- reading -----------------------------------------------------------------------------

    def source(self, request_id: str) -> str:
        return f"nats:{self.names.heads}/{token_of(request_id)}"

    def unknown(self, request_id: str) -> UnknownRequestError:
        return UnknownRequestError(
            f"no request {request_id!r} on the NATS server {self.connection.settings.shown_url} "
            f"(bucket {self.names.heads}); check the id and backend.nats in team_runtime.yaml."
        )

    def room(self) -> int:
        """Bytes of data one message may carry now (the connected server's max_payload)."""
        return message_room(self.connection.client.max_payload)

    async def get_head(self, key: str) -> tuple[RecordHead, int] | None:
        """The head of ``key`` and its revision (``None``: there is none); noted for
        ``version``."""
        try:
            entry = await self.kv.get(key)
        except nats.js.errors.KeyNotFoundError:
            entry = None
        if entry is None or entry.revision is None:
            self.note(key, 0)
            return None
        self.note(key, entry.revision)
        if not entry.value:  # a key put with no value (another program's): it is there
            raise RecordError(
                f"nats:{self.names.heads}/{key}: the record head is empty, not one "
                "teams-runtime wrote; restore it with `teams-runtime import`, or remove the key "
                "with `nats kv del`."
            )
        try:
            return decode_head(entry.value), entry.revision
        except (msgspec.DecodeError, RecursionError) as exc:
            raise RecordError(
                f"nats:{self.names.heads}/{key}: the record head is not one teams-runtime "
                f"wrote ({exc}); restore it with `teams-runtime import`."
            ) from None

    async def head(self, request_id: str) -> tuple[RecordHead, int]:
        found = await self.get_head(token_of(request_id))
        if found is None:
            raise self.unknown(request_id)
        return found

    async def value(self, seq: int) -> bytes:
        return await read_value(self.connection.js, self.names.events, seq)

    async def fields(
        self,
        request_id: str,
        head: RecordHead,
        *,
        names: Collection[str] | None = None,
        known: Mapping[int, bytes] | None = None,
    ) -> RecordFields:
        """The head's fields, with the values of spilled ones read back (only of ``names``
        when given; ``known`` holds values by sequence already in hand)."""
        source = self.source(request_id)
        wanted = {name: seq for name, seq in head.spilled.items() if names is None or name in names}
        if not wanted:
            return decode_record(bytes(head.fields), source)
        by_seq = dict(known or {})
        missing = sorted(set(wanted.values()) - set(by_seq))
        fetched = await asyncio.gather(*(self.value(seq) for seq in missing))
        by_seq.update(zip(missing, fetched, strict=True))
        joined = join_fields(head.fields, {name: by_seq[seq] for name, seq in wanted.items()})
        return decode_record(joined, source)

    async def parts(
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
            asyncio.gather(*(self.value(seq) for seq in wanted)),
            self.fields(request_id, head, known=by_seq),
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
            source=self.source(request_id),
        )

    async def history(self, request_id: str, head: RecordHead) -> list[bytes]:
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
            inactive_threshold=GONE_AFTER_SECONDS,
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
                f"{self.source(request_id)}: the head counts {head.count} events but the "
                f"stream {self.names.events} holds {len(events)}; restore the request with "
                "`teams-runtime import`."
            )
        return events

    async def whole(self, request_id: str, head: RecordHead) -> tuple[list[bytes], RecordFields]:
        """Every event and every field of the record at ``head`` (read at once)."""
        history, fields = await asyncio.gather(
            self.history(request_id, head), self.fields(request_id, head)
        )
        return history, fields
