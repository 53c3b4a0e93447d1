"""An index derived from a record's bytes, for a record with no usable index and for small ones.

One C pass classifies every event; only the last events and each role's newest evidence are
split out, from a suffix of the events array, so the cost follows how far back the needed
events are, not the history's length.
"""

from __future__ import annotations

import msgspec

from teams_runtime.codecs.evidence import history_evidence
from teams_runtime.codecs.request_records import (
    EVENT_SEPARATOR,
    EVENTS_CLOSE,
    EVENTS_HEAD,
    EVENTS_KEY,
    EVENTS_OPEN,
    decode_record,
    split_raw_list,
)
from teams_runtime.exceptions import RecordError
from teams_runtime.storage.files._index import (
    INDEX_TAIL,
    RecordIndex,
    Span,
    history_bytes,
)
from teams_runtime.storage.local_files import FileVersion
from teams_runtime.storage.protocols import IndexedParts
from teams_runtime.storage.workspace import RecordPaths

__all__ = ["index_from_bytes", "parts_from_bytes"]

# Where the events array stands in a file laid out by teams-runtime: a top-level key's line.
_EVENTS_LINE = b"\n" + EVENTS_HEAD
_SUFFIX_TRIES = 3  # guesses at where the needed events start, then the whole array is split
# The second placeholder's check only needs the top-level values undecoded: a quarter of the
# cost of a record's decode (the first decode has refused a key written twice already).
_TOP_LEVEL_RAW = msgspec.json.Decoder(dict[str, msgspec.Raw])
_OBJECT_PLACEHOLDER = msgspec.Raw(b"{}")


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
            _TOP_LEVEL_RAW.decode(header + b"{}" + trailer).get(EVENTS_KEY) != _OBJECT_PLACEHOLDER
        ):
            return None
    except (RecordError, msgspec.DecodeError, RecursionError):
        return None
    tail = [msgspec.Raw(data[offset : offset + length]) for offset, length in index.tail]
    # Evidence in the tail is the tail's own event (the same span): shared, not copied again.
    first = index.count - len(tail)
    evidence = {
        role: (
            position,
            tail[position - first]
            if position >= first
            else msgspec.Raw(data[offset : offset + length]),
        )
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
        found = history_evidence(memoryview(data)[start:end])
    except (msgspec.DecodeError, RecursionError):
        return None
    return (end, found.count, found.newest) if found.count else None


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
    joined = EVENT_SEPARATOR.join(raws)
    if offset + len(joined) != end - len(EVENTS_CLOSE) or not data.startswith(joined, offset):
        return None  # (compared in place: no copy of the file's part)
    spans: dict[int, Span] = {}
    position = count - len(raws)
    for number, raw in enumerate(raws):
        spans[position + number] = (offset, len(raw))
        offset += len(raw) + len(EVENT_SEPARATOR)
    return spans
