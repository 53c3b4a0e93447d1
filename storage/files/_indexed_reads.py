"""A read through a kept index: the parts it points at, each checked against the file's bytes.

What the index says is believed only once the bytes agree: every offset inside the file and on
the writer's layout, the other fields decoding around an empty events array, the tail
splitting into exactly its events, every evidence event classifying as its role.
"""

from __future__ import annotations

from collections.abc import Callable

import msgspec

from teams_runtime.codecs.evidence import role_of_raw
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
from teams_runtime.storage.protocols import IndexedParts

__all__ = ["parts_from_index"]


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
