"""The record index: where things are in one version of a record file (a checked cache).

Next to each record a writer keeps an index (``.teams_runtime/index/<id>.idx``, msgpack): where
the events array, the last events and the newest evidence of every role are. It is a cache,
never the truth: it names the exact file version it describes, and what it points at is checked
before it is believed; a reader or writer that finds it missing, stale or inconsistent parses
the record instead. With it, a cold projection reads a few kilobytes instead of parsing the
whole history, and an append copies the old events' bytes instead of re-formatting them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

import msgspec

from teams_runtime.actors.storage.files import FileVersion, write_atomic
from teams_runtime.actors.storage.protocols import IndexedParts
from teams_runtime.actors.storage.workspace import RecordPaths
from teams_runtime.codecs.evidence import role_of_raw
from teams_runtime.codecs.records import RenderedRecord, decode_record, split_raw_list
from teams_runtime.exceptions import RecordError

__all__ = [
    "INDEX_TAIL",
    "RecordIndex",
    "Span",
    "evidence_spans",
    "index_for",
    "load_index",
    "parts_from_index",
    "write_index",
]

INDEX_SCHEMA = 1
INDEX_TAIL = 256  # spans of the last events an index keeps: enough for max_events <= 256

Span = tuple[int, int]  # (offset, length) of an event in the record file


class RecordIndex(msgspec.Struct, frozen=True, kw_only=True):
    """Where things are in one version of a record file written by teams-runtime."""

    schema: int = INDEX_SCHEMA
    record: FileVersion
    count: int
    events_start: int
    events_end: int
    history_bytes: int  # the sum of every event's length
    tail: list[Span]  # the last min(count, INDEX_TAIL) events, oldest first
    evidence: dict[str, tuple[int, Span]]  # role -> (event position, span) of its newest evidence


_INDEX_ENCODER = msgspec.msgpack.Encoder()
_INDEX_DECODER = msgspec.msgpack.Decoder(RecordIndex)


def load_index(paths: RecordPaths, version: FileVersion) -> RecordIndex | None:
    """The index if it describes exactly ``version`` of the record, else ``None``."""
    try:
        index = _INDEX_DECODER.decode(paths.index.read_bytes())
    except (OSError, msgspec.DecodeError):
        return None
    if index.schema != INDEX_SCHEMA or index.record != version:
        return None
    return index


def parts_from_index(
    read: Callable[[int, int], bytes], index: RecordIndex, source: str
) -> IndexedParts | None:
    """Read what the index points at; ``None`` if the bytes do not match what it says."""
    header = read(0, index.events_start)
    trailer = read(index.events_end, index.record.size - index.events_end)
    try:
        fields = decode_record(header + b"[]" + trailer, source)
    except RecordError:
        return None
    if not index.tail:
        tail: list[msgspec.Raw] = []
    else:
        first, (last, last_length) = index.tail[0][0], index.tail[-1]
        block = read(first, last + last_length - first)
        # The last events are contiguous: one check that they split where the index says.
        try:
            if len(split_raw_list(b"[" + block + b"]")) != len(index.tail):
                return None
        except (msgspec.DecodeError, RecursionError):
            return None
        tail = [msgspec.Raw(block[o - first : o - first + n]) for o, n in index.tail]
    evidence = {}
    for role, (position, (offset, length)) in index.evidence.items():
        raw = msgspec.Raw(read(offset, length))
        try:
            if role_of_raw(raw) != role:
                return None
        except (msgspec.DecodeError, RecursionError):
            return None
        evidence[role] = (position, raw)
    return IndexedParts(index.record, fields, index.count, index.history_bytes, tail, evidence)


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
    rendered: RenderedRecord,
    version: FileVersion,
    count: int,
    history_bytes: int,
    tail: list[Span],
    evidence: dict[str, tuple[int, Span]],
) -> RecordIndex:
    """The index of a record file just written from ``rendered``."""
    return RecordIndex(
        record=version,
        count=count,
        history_bytes=history_bytes,
        events_start=rendered.events_start,
        events_end=rendered.events_end,
        tail=tail[-INDEX_TAIL:],
        evidence=evidence,
    )


def write_index(paths: RecordPaths, index: RecordIndex) -> None:
    """Write the index; a cache, so not fsynced, and a failure only costs a later parse."""
    with contextlib.suppress(OSError, RecordError):
        paths.index.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(paths.index, _INDEX_ENCODER.encode(index), durable=False)
