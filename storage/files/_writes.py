"""Writing request record files: created once, appended to under a lock, replaced atomically.

Every writer (the ContextActor, ``teams-runtime append``, other processes) goes through
``append_to_record``, so that:

- an advisory lock on a sidecar ``<id>.json.lock`` is held across read-modify-write, so
  concurrent appends from several processes never lose an event; right before the rename the
  writer checks the lock and the record are still as it found them (else it reads again);
- the new bytes replace the file atomically (``files.write_atomic``): a crash leaves the old
  file or the new one, never a torn one;
- the record's index (``index``) is rewritten after it, and checked before any use;
- an append with a key already among the last events is not written again.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

import msgspec

from teams_runtime.codecs.evidence import append_key_of, role_of_raw
from teams_runtime.codecs.request_records import (
    EVENT_SEPARATOR,
    EVENTS_CLOSE,
    EVENTS_KEY,
    EVENTS_OPEN,
    RecordFields,
    RenderedRecord,
    decode_record,
    encode_field,
    render_record,
)
from teams_runtime.exceptions import RecordError
from teams_runtime.storage._append_checks import (
    checked_updates,
    condition_fields,
    field_holds,
    fields_are,
    format_history,
)
from teams_runtime.storage.files._index import (
    RecordIndex,
    Span,
    evidence_spans,
    history_bytes,
    index_for,
    load_index,
    write_index,
)
from teams_runtime.storage.files._indexed_reads import parts_from_index
from teams_runtime.storage.files._reads import read_bytes, unknown_request
from teams_runtime.storage.local_files import (
    FileVersion,
    FolderKeepsVanishing,
    Raced,
    ensure_folder,
    file_version,
    locked,
    remove_stale_temps,
    write_atomic,
)
from teams_runtime.storage.protocols import IDEMPOTENCY_WINDOW, AppendOutcome, IndexedParts
from teams_runtime.storage.workspace import RecordPaths

__all__ = [
    "append_to_record",
    "create_record",
]

_RACE_RETRIES = 20  # read-modify-write rounds before giving up on a record others keep replacing


def _commit(
    paths: RecordPaths,
    rendered: RenderedRecord,
    fields: RecordFields,
    count: int,
    tail: list[Span],
    evidence: dict[str, tuple[int, Span]],
    unless: Callable[[], bool],
) -> IndexedParts:
    """Write the record (if ``unless()`` still holds right before: else ``Raced``), then its
    index; return the parts of what was written."""
    # Made (and a linked one refused) before the record is written, and only then: an append
    # refused for a record it cannot read leaves no folder behind. The index is a cache: a
    # folder someone keeps removing costs the record its index (the next read derives one),
    # never the append.
    with contextlib.suppress(FolderKeepsVanishing):
        ensure_folder(paths.index.parent, paths.runtime)
    with contextlib.suppress(OSError):
        paths.index.unlink()  # never leave an index that could outlive its record version
    remove_stale_temps(paths.record, paths.runtime)
    version = write_atomic(paths.record, rendered.data, runtime=paths.runtime, unless=unless)
    index = index_for(paths, rendered, version, count, tail, evidence)
    write_index(paths, index)
    data = rendered.data

    def raw(span: Span) -> msgspec.Raw:
        offset, length = span
        return msgspec.Raw(data[offset : offset + length])

    return IndexedParts(
        version=version,
        fields={**fields, EVENTS_KEY: []},
        count=count,
        history_bytes=history_bytes(index),
        tail=[raw(span) for span in index.tail],
        evidence={role: (position, raw(span)) for role, (position, span) in evidence.items()},
        source=str(paths.record),
    )


def _commit_all(
    paths: RecordPaths,
    fields: RecordFields,
    history: list[msgspec.Raw],
    unless: Callable[[], bool],
) -> IndexedParts:
    """Lay out every event afresh (no usable index) and commit the record with a new index."""
    formatted = format_history(history, str(paths.record))
    rendered = render_record(fields, formatted)
    roles = [role_of_raw(raw) for raw in history]
    evidence = evidence_spans(roles, rendered.spans)
    return _commit(paths, rendered, fields, len(history), rendered.spans, evidence, unless)


def _keyed_count(last: list[msgspec.Raw], first_position: int, key: str) -> int | None:
    """The event count just after the newest event of ``last`` carrying ``key``, if any."""
    for offset in range(len(last) - 1, -1, -1):
        if append_key_of(last[offset]) == key:
            return first_position + offset + 1
    return None


def _append_indexed(
    paths: RecordPaths,
    data: bytes,
    index: RecordIndex,
    fields: RecordFields,
    events: list[msgspec.Raw],
    unless: Callable[[], bool],
) -> IndexedParts:
    """Append using a checked index: old events are copied as bytes, never re-formatted."""
    view = memoryview(data)
    body_end = index.events_end - len(EVENTS_CLOSE)  # where the old last event ends
    layout = render_record(fields, [])  # the other fields, laid out around an empty list
    new_header = layout.data[: layout.events_start]
    new = format_history(events, "an appended event")
    # One join copies the old events' bytes once: [ old events , new events ] around them.
    opening: bytes | memoryview = b""
    if index.count:
        opening = view[index.events_start : body_end]
    elif new:
        opening = EVENTS_OPEN[:1]
    pieces: list[bytes | memoryview] = [new_header, opening]
    offset = len(new_header) + len(opening)
    spans = []
    for number, event in enumerate(new):
        separator = EVENT_SEPARATOR if index.count or number else EVENTS_OPEN[1:]
        offset += len(separator)
        spans.append((offset, len(event)))
        offset += len(event)
        pieces += (separator, event)
    pieces.append(EVENTS_CLOSE if index.count or new else b"[]")
    events_end = offset + len(pieces[-1])
    pieces.append(layout.data[layout.events_end :])
    rendered = RenderedRecord(b"".join(pieces), len(new_header), events_end, spans)
    shift = len(new_header) - index.events_start
    old_tail = [(offset + shift, length) for offset, length in index.tail]
    evidence = {
        role: (position, (offset + shift, length))
        for role, (position, (offset, length)) in index.evidence.items()
    }
    roles = [role_of_raw(raw) for raw in events]
    evidence.update(evidence_spans(roles, spans, start=index.count))
    count = index.count + len(events)
    return _commit(paths, rendered, fields, count, old_tail + spans, evidence, unless)


def _count_fits(data: bytes, index: RecordIndex) -> bool:
    """Whether the index's event count is the file's: an append has every byte in hand, so it
    counts the separators between events (a deeper `,` newline is indented further) rather
    than carry a wrong count forward."""
    if not index.count:
        return True
    start, end = index.events_start, index.events_end
    separators = data.count(EVENT_SEPARATOR, start, end) - data.count(
        EVENT_SEPARATOR + b" ", start, end
    )
    return separators + 1 == index.count


def _history_of(fields: RecordFields, source: str) -> list[msgspec.Raw]:
    existing = fields.get(EVENTS_KEY, [])
    if not isinstance(existing, list):
        raise RecordError(
            f"{source}: `events` is a {type(existing).__name__}, not a list; cannot "
            "append without losing it (fix the record by hand)."
        )
    return existing


def append_to_record(
    paths: RecordPaths,
    events: list[msgspec.Raw],
    updates: Mapping[str, Any],
    *,
    key: str = "",
    unless: Mapping[str, Any] | None = None,
    expect: Mapping[str, Any] | None = None,
) -> AppendOutcome:
    """Append ``events`` and set ``updates`` (top-level fields) in one locked write.

    Events other processes appended before the lock was taken are kept: the file is always
    re-read under the lock. Untouched events are written from their original bytes. With a
    ``key``, an append already stored with that key is not written again; with ``unless``,
    nothing is written if one of those top-level fields holds that value now; with ``expect``,
    nothing is written unless each of those fields holds exactly that value now (absent:
    ``None``). Both are decided on the bytes read under the lock, and the rename happens only
    if the record is still those bytes: a compare-and-set.
    """
    updates = checked_updates(updates)
    # Before any folder is made: an append to a request that does not exist changes nothing
    # on disk (no lock file, no index folder).
    if not paths.record.exists():
        raise unknown_request(paths)
    # `locked` opens the record's folder (refusing a link); the index folder is made only
    # when writing (`_commit`).
    source = str(paths.record)
    for _ in range(_RACE_RETRIES):
        with locked(paths.lock, paths.runtime) as held:
            data, read_version = read_bytes(paths)
            unchanged = partial(_still_ours, paths, held, read_version)
            condition = _Condition(unless or {}, expect or {})
            try:
                return _append_locked(
                    paths, data, read_version, events, updates, key, condition, unchanged
                )
            except Raced:
                continue  # someone else wrote (a lock file was removed while held): read again
    raise RecordError(f"{source}: other writers kept replacing it; nothing was appended (retry).")


def _still_ours(paths: RecordPaths, held: Callable[[], bool], read: FileVersion) -> bool:
    """Right before the rename: the lock is still ours and the record the one we read."""
    return held() and file_version(paths.record) == read


class _Condition:
    """What an append is conditional on: fields that must not hold (``unless``) or must hold
    (``expect``) a value."""

    def __init__(self, unless: Mapping[str, Any], expect: Mapping[str, Any]) -> None:
        self.unless = unless
        self.expect = expect

    def refusal(
        self, fields: Mapping[str, Any], version: FileVersion, count: int
    ) -> AppendOutcome | None:
        """The answer of a refused append, ``None`` if the condition holds on ``fields``."""
        if not field_holds(fields, self.unless) and fields_are(fields, self.expect):
            return None
        held = condition_fields(fields, [*self.unless, *self.expect])
        return AppendOutcome(version, None, count, applied=False, refused=True, fields=held)


def _append_locked(
    paths: RecordPaths,
    data: bytes,
    read_version: FileVersion,
    events: list[msgspec.Raw],
    updates: RecordFields,
    key: str,
    condition: _Condition,
    unless: Callable[[], bool],
) -> AppendOutcome:
    source = str(paths.record)
    index = load_index(paths, read_version)
    current = None
    # Only an index the writer laid down: one derived from another program's file does not
    # vouch for the layout of every event, and copying them would keep a foreign layout.
    if index is not None and index.canonical and _count_fits(data, index):
        current = parts_from_index(lambda o, n: data[o : o + n], index, source)
    if index is not None and current is not None:
        done = _keyed_count(current.tail, current.count - len(current.tail), key) if key else None
        if done is not None:
            return AppendOutcome(read_version, None, done, applied=False)
        refused = condition.refusal(current.fields, read_version, current.count)
        if refused is not None:
            return refused
        parts = _append_indexed(paths, data, index, {**current.fields, **updates}, events, unless)
        return AppendOutcome(read_version, parts, parts.count)
    fields = decode_record(data, source)
    history = _history_of(fields, source)
    if key:
        last = history[-IDEMPOTENCY_WINDOW:]
        done = _keyed_count(last, len(history) - len(last), key)
        if done is not None:
            return AppendOutcome(read_version, None, done, applied=False)
    refused = condition.refusal(fields, read_version, len(history))
    if refused is not None:
        return refused
    fields.update(updates)
    fields[EVENTS_KEY] = []
    parts = _commit_all(paths, fields, history + events, unless)
    return AppendOutcome(read_version, parts, parts.count, relaid=True)


def create_record(paths: RecordPaths, record: Mapping[str, Any]) -> IndexedParts | None:
    """Write a new record file (and its index) unless one exists; ``None`` if it existed.

    A linked folder is refused before anything is written through it: the record's by
    ``locked``, the index's by ``_commit`` before the record is written."""
    fields = dict(record)
    events = fields.get(EVENTS_KEY, [])
    if not isinstance(events, list):
        raise RecordError("a new request record needs `events` to be a list.")
    fields[EVENTS_KEY] = []
    raws = [encode_field(event) for event in events]
    for _ in range(_RACE_RETRIES):
        with locked(paths.lock, paths.runtime) as held:
            if os.path.lexists(paths.record):
                return None
            try:
                return _commit_all(
                    paths, fields, raws, lambda: held() and not os.path.lexists(paths.record)
                )
            except Raced:
                continue
    return None  # another writer kept creating it: it exists
