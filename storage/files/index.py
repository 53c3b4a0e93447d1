"""The record index: where things are in one version of a record file (a checked cache).

An index says where, in one version of a record, the events array, the last events and the
newest evidence of every role are. A writer lays one down next to each record it writes
(``.teams_runtime/index/<id>.idx``); a read of a record that has none usable derives one from
the file's bytes in one pass (``index_from_bytes``) and keeps it there when the record is large.
It is a cache, never the truth, and what it says is checked before it is used:

- the file starts with a BLAKE2b digest of the rest, so a changed, truncated or random index
  is refused;
- it names its request and the exact file version it describes (size, mtime, ctime, inode);
- every offset must lie inside the file and land on the layout a writer produces (the events
  array's brackets, the separators between events), and the events it points at must split and
  classify as it says.

Whatever fails a check is never a wrong answer or a crash: the index is derived from the
bytes again, or the record parsed whole when it is not laid out as teams-runtime writes it, and
the next write lays a correct index down. With an index, a cold projection reads a few
kilobytes instead of parsing the whole history, and an append copies the old events' bytes
instead of re-formatting them.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Callable

import msgspec

from teams_runtime.codecs.evidence import history_evidence, role_of_raw
from teams_runtime.codecs.request_records import (
    EVENT_SEPARATOR,
    EVENTS_CLOSE,
    EVENTS_HEAD,
    EVENTS_KEY,
    EVENTS_OPEN,
    RenderedRecord,
    decode_record,
    split_raw_list,
)
from teams_runtime.exceptions import RecordError
from teams_runtime.storage.local_files import FileVersion, open_regular, write_atomic
from teams_runtime.storage.protocols import IndexedParts
from teams_runtime.storage.workspace import RecordPaths

__all__ = [
    "INDEX_TAIL",
    "RecordIndex",
    "Span",
    "encode_index",
    "evidence_spans",
    "history_bytes",
    "index_for",
    "index_from_bytes",
    "load_index",
    "parts_from_bytes",
    "parts_from_index",
    "write_index",
]

INDEX_SCHEMA = 2
INDEX_TAIL = 256  # spans of the last events an index keeps: enough for max_events <= 256
_DIGEST_SIZE = 16

Span = tuple[int, int]  # (offset, length) of an event in the record file


class RecordIndex(msgspec.Struct, frozen=True, kw_only=True):
    """Where things are in one version of a record file written by teams-runtime."""

    schema: int = INDEX_SCHEMA
    request_id: str
    record: FileVersion
    count: int
    events_start: int  # offset of the events array's `[`
    events_end: int  # offset just after its `]`
    tail: list[Span]  # the last min(count, INDEX_TAIL) events, oldest first
    evidence: dict[str, tuple[int, Span]]  # role -> (event position, span) of its newest evidence
    # The writer laid out every event (an append may copy them all as bytes); an index derived
    # from another program's file vouches only for the events it points at.
    canonical: bool = True


_INDEX_ENCODER = msgspec.msgpack.Encoder()
_INDEX_DECODER = msgspec.msgpack.Decoder(RecordIndex)


def _digest(payload: bytes) -> bytes:
    return hashlib.blake2b(payload, digest_size=_DIGEST_SIZE).digest()


def encode_index(index: RecordIndex) -> bytes:
    """The bytes of an index file: a digest of the payload, then the payload (msgpack)."""
    payload = _INDEX_ENCODER.encode(index)
    return _digest(payload) + payload


def load_index(paths: RecordPaths, version: FileVersion) -> RecordIndex | None:
    """The index if it is intact and describes exactly ``version`` of this record, else
    ``None``. What it points at is checked by ``parts_from_index``."""
    try:
        fd = open_regular(paths.index)  # never blocks on a FIFO planted in its place
        with open(fd, "rb") as handle:
            data = handle.read()
    except OSError:
        return None
    digest, payload = data[:_DIGEST_SIZE], data[_DIGEST_SIZE:]
    if len(digest) != _DIGEST_SIZE or _digest(payload) != digest:
        return None
    try:
        index = _INDEX_DECODER.decode(payload)
    except (msgspec.DecodeError, RecursionError):
        return None
    if (
        index.schema != INDEX_SCHEMA
        or index.request_id != paths.request_id
        or index.record != version
    ):
        return None
    return index


def history_bytes(index: RecordIndex) -> int:
    """The summed length of every event, derived from the layout (nothing to trust)."""
    if not index.count:
        return 0
    inner = index.events_end - index.events_start - len(EVENTS_OPEN) - len(EVENTS_CLOSE)
    return inner - (index.count - 1) * len(EVENT_SEPARATOR)


def _spans_fit(index: RecordIndex) -> bool:
    """Offsets inside the file, in order, tail spans contiguous and separated as laid out."""
    size = index.record.size
    if not 0 < index.events_start < index.events_end <= size or index.count < 0:
        return False
    if len(index.tail) != min(index.count, INDEX_TAIL):
        return False
    if not index.count:
        return index.events_end - index.events_start == 2 and not index.evidence
    first_event = index.events_start + len(EVENTS_OPEN)
    last_end = index.events_end - len(EVENTS_CLOSE)
    if history_bytes(index) < index.count:  # every event is at least one byte
        return False
    expected_end = last_end
    for offset, length in reversed(index.tail):
        if length < 1 or offset + length != expected_end or offset < first_event:
            return False
        expected_end = offset - len(EVENT_SEPARATOR)
    if index.count == len(index.tail) and index.tail[0][0] != first_event:
        return False
    for position, (offset, length) in index.evidence.values():
        if not (0 <= position < index.count and length >= 1):
            return False
        if offset < first_event or offset + length > last_end:
            return False
        tail_position = position - (index.count - len(index.tail))
        if tail_position >= 0 and index.tail[tail_position] != (offset, length):
            return False
    return True


def _bounded(read: Callable[[int, int], bytes], offset: int, length: int) -> bytes | None:
    data = read(offset, length)
    return data if len(data) == length else None  # a short read: the file is not as it says


def _event_at(read: Callable[[int, int], bytes], span: Span, index: RecordIndex) -> bytes | None:
    """The event's bytes, if a separator (or the array's bracket) stands on each side of it."""
    offset, length = span
    first_event = index.events_start + len(EVENTS_OPEN)
    last_end = index.events_end - len(EVENTS_CLOSE)
    before = EVENTS_OPEN if offset == first_event else EVENT_SEPARATOR
    after = EVENTS_CLOSE if offset + length == last_end else EVENT_SEPARATOR
    if _bounded(read, offset - len(before), len(before)) != before:
        return None
    if _bounded(read, offset + length, len(after)) != after:
        return None
    return _bounded(read, offset, length)


def parts_from_index(
    read: Callable[[int, int], bytes], index: RecordIndex, source: str
) -> IndexedParts | None:
    """Read what the index points at; ``None`` if the bytes are not as it says."""
    if not _spans_fit(index):
        return None
    header = _bounded(read, 0, index.events_start)
    trailer = _bounded(read, index.events_end, index.record.size - index.events_end)
    if header is None or trailer is None or not header.endswith(EVENTS_HEAD):
        return None
    opening = _bounded(read, index.events_start, len(EVENTS_OPEN) if index.count else 2)
    closing = _bounded(read, index.events_end - len(EVENTS_CLOSE), len(EVENTS_CLOSE))
    if index.count and (opening != EVENTS_OPEN or closing != EVENTS_CLOSE):
        return None
    if not index.count and opening != b"[]":
        return None
    try:
        fields = decode_record(header + b"[]" + trailer, source)
    except RecordError:
        return None
    if fields.get(EVENTS_KEY) != []:
        return None
    tail = _tail(read, index)
    evidence = _evidence(read, index)
    if tail is None or evidence is None:
        return None
    return IndexedParts(
        index.record, fields, index.count, history_bytes(index), tail, evidence, source
    )


def _tail(read: Callable[[int, int], bytes], index: RecordIndex) -> list[msgspec.Raw] | None:
    if not index.tail:
        return []
    first, (last, last_length) = index.tail[0][0], index.tail[-1]
    block = _bounded(read, first, last + last_length - first)
    if block is None:
        return None
    # The last events are contiguous: one check that they split where the index says.
    try:
        if len(split_raw_list(b"[" + block + b"]")) != len(index.tail):
            return None
    except (msgspec.DecodeError, RecursionError):
        return None
    return [msgspec.Raw(block[o - first : o - first + n]) for o, n in index.tail]


def _evidence(
    read: Callable[[int, int], bytes], index: RecordIndex
) -> dict[str, tuple[int, msgspec.Raw]] | None:
    evidence = {}
    for role, (position, span) in index.evidence.items():
        event = _event_at(read, span, index)
        if event is None:
            return None
        raw = msgspec.Raw(event)
        try:
            if role_of_raw(raw) != role:
                return None
        except (msgspec.DecodeError, RecursionError, RecordError):
            return None
        evidence[role] = (position, raw)
    return evidence


def evidence_spans(
    roles: list[str | None], spans: list[Span], start: int = 0
) -> dict[str, tuple[int, Span]]:
    """Each role's newest evidence among events classified as ``roles``, at their ``spans``."""
    evidence: dict[str, tuple[int, Span]] = {}
    for position, role in enumerate(roles):
        if role is not None:
            evidence[role] = (start + position, spans[position])
    return evidence


def index_for(
    paths: RecordPaths,
    rendered: RenderedRecord,
    version: FileVersion,
    count: int,
    tail: list[Span],
    evidence: dict[str, tuple[int, Span]],
) -> RecordIndex:
    """The index of a record file just written from ``rendered``."""
    return RecordIndex(
        request_id=paths.request_id,
        record=version,
        count=count,
        events_start=rendered.events_start,
        events_end=rendered.events_end,
        tail=tail[-INDEX_TAIL:],
        evidence=evidence,
    )


def write_index(paths: RecordPaths, index: RecordIndex) -> None:
    """Write the index; a cache, so not fsynced, and a failure only costs a later parse.

    A linked index folder is refused before the record is written (``ensure_folder``)."""
    with contextlib.suppress(RecordError):
        write_atomic(paths.index, encode_index(index), runtime=paths.runtime, durable=False)


# Where the events array stands in a file laid out by teams-runtime: a top-level key's line.
_EVENTS_LINE = b"\n" + EVENTS_HEAD
_SUFFIX_TRIES = 3  # guesses at where the needed events start, then the whole array is split


def index_from_bytes(
    paths: RecordPaths, data: bytes, version: FileVersion, *, tail: int = INDEX_TAIL
) -> RecordIndex | None:
    """An index of a record file derived from its bytes: for a record with no usable index
    (another program wrote it, or the index is lost or fails its checks), and for every record
    under 128 KiB, which ``FileRecordStore.read`` reads this way without opening its index.

    One C pass classifies every event (``history_evidence``); only the last ``tail``
    events and each role's newest evidence are split out, from a suffix of the array, and
    every span is checked to hold exactly its event. ``None`` when the file is not laid out as
    teams-runtime writes it (then the caller parses it). Only an index with the full
    ``INDEX_TAIL`` may be written; a shorter one serves a single read (``parts_from_bytes``).
    """
    line = data.find(_EVENTS_LINE)
    if line < 0:
        return None
    start = line + len(_EVENTS_LINE)
    newest: dict[str, int] = {}
    count = 0  # an empty events array, unless it opens with an event
    if data.startswith(b"[]", start):
        end = start + 2
    elif data.startswith(EVENTS_OPEN, start):
        found = _events_array(data, start)
        if found is None:
            return None
        end, count, newest = found
    else:
        return None
    tail_start = count - min(count, tail)
    spans = _spans_from(data, start, end, count, min([tail_start, *newest.values()]))
    if spans is None:
        return None
    return RecordIndex(
        request_id=paths.request_id,
        record=version,
        count=count,
        events_start=start,
        events_end=end,
        tail=[spans[position] for position in range(tail_start, count)],
        evidence={role: (position, spans[position]) for role, position in newest.items()},
        canonical=False,
    )


def parts_from_bytes(data: bytes, index: RecordIndex, source: str) -> IndexedParts | None:
    """The parts an index derived from ``data`` points at (its spans were checked deriving it).

    The other fields decode from the file with the events array cut out; a placeholder put in
    its place must come back as the top-level ``events`` value, twice over with two different
    placeholders, which proves the array was that value and not one nested deeper.
    """
    header, trailer = data[: index.events_start], data[index.events_end :]
    try:
        fields = decode_record(header + b"[]" + trailer, source)
        if fields.get(EVENTS_KEY) != [] or (
            decode_record(header + b"{}" + trailer, source).get(EVENTS_KEY) != {}
        ):
            return None
    except RecordError:
        return None
    tail = [msgspec.Raw(data[offset : offset + length]) for offset, length in index.tail]
    evidence = {
        role: (position, msgspec.Raw(data[offset : offset + length]))
        for role, (position, (offset, length)) in index.evidence.items()
    }
    return IndexedParts(
        index.record, fields, index.count, history_bytes(index), tail, evidence, source
    )


def _events_array(data: bytes, start: int) -> tuple[int, int, dict[str, int]] | None:
    """Where the events array that opens at ``start`` ends, its events' count and each role's
    newest evidence position.

    In the writer's layout deeper lines are indented further, so the array closes at the
    first close at depth one after it; decoding the slice proves it is one whole array. The
    last such close in the file is tried first: ``events`` is usually the last list, and a
    search from the end finds it at once where one from the start would read the whole history.
    """
    last = data.rfind(EVENTS_CLOSE)
    found = _classified_until(data, start, last)
    if found is None:  # another list follows `events`: search forward (reads the history)
        found = _classified_until(data, start, data.find(EVENTS_CLOSE, start, last))
    return found


def _classified_until(
    data: bytes, start: int, close: int
) -> tuple[int, int, dict[str, int]] | None:
    if close <= start:
        return None
    end = close + len(EVENTS_CLOSE)
    try:
        count, newest = history_evidence(memoryview(data)[start:end])
    except (msgspec.DecodeError, RecursionError):
        return None
    return (end, count, newest) if count else None


def _spans_from(
    data: bytes, start: int, end: int, count: int, first_needed: int
) -> dict[int, Span] | None:
    """The spans of the events from ``first_needed`` to the last, by position.

    Splits a suffix of the array that starts at a separator a little before where the event
    ``first_needed`` should be (by average event size), so the cost follows how far back the
    needed events are, not the history's length.
    """
    if not count:
        return {}
    first_event = start + len(EVENTS_OPEN)
    inner = end - len(EVENTS_CLOSE) - first_event
    guess = first_needed
    for _ in range(_SUFFIX_TRIES):
        comma = _separator_before(data, first_event, first_event + inner * guess // count)
        if guess <= 0 or comma is None:
            break
        raws = _split_after(data, comma, end)
        if raws is None:
            return None
        if count - len(raws) <= first_needed:
            return _checked_spans(data, comma + len(EVENT_SEPARATOR), raws, count, end)
        guess = guess * 3 // 4  # the events before the guess were longer than average
    try:
        raws = split_raw_list(memoryview(data)[start:end])
    except (msgspec.DecodeError, RecursionError):
        return None
    return _checked_spans(data, first_event, raws, count, end)


def _separator_before(data: bytes, floor: int, position: int) -> int | None:
    """The last separator between events at or before ``position`` (in the writer's layout,
    a deeper line is indented by more than four spaces)."""
    at = data.rfind(EVENT_SEPARATOR, floor, position + len(EVENT_SEPARATOR))
    while at >= 0 and data[at + len(EVENT_SEPARATOR)] == ord(" "):
        at = data.rfind(EVENT_SEPARATOR, floor, at)
    return at if at >= 0 else None


def _split_after(data: bytes, comma: int, end: int) -> list[msgspec.Raw] | None:
    """The events after the comma at ``comma``. It only decodes as one array if the comma
    stands between events: after a comma inside an event, brackets would not balance."""
    try:
        return split_raw_list(b"[" + data[comma + 1 : end])
    except (msgspec.DecodeError, RecursionError):
        return None


def _checked_spans(
    data: bytes, offset: int, raws: list[msgspec.Raw], count: int, end: int
) -> dict[int, Span] | None:
    """Place the last ``len(raws)`` events from ``offset`` on, one separator apart, if the file
    holds exactly that there (one comparison); a file laid out otherwise gives ``None``."""
    if data[offset : end - len(EVENTS_CLOSE)] != EVENT_SEPARATOR.join(raws):
        return None
    spans: dict[int, Span] = {}
    position = count - len(raws)
    for number, raw in enumerate(raws):
        spans[position + number] = (offset, len(raw))
        offset += len(raw) + len(EVENT_SEPARATOR)
    return spans
