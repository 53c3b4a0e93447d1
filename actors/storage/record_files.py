"""Request records as files: versioned reads, locked read-modify-write, atomic replace.

``FileRecordStore`` is the ``RecordStore`` of the file backend (the embedded default): one
JSON file per request under ``.teams_runtime/requests/``. Every writer (the ContextActor,
``teams-runtime append``, other processes) goes through ``append_to_record``, so that:

- an advisory lock on a sidecar ``<id>.json.lock`` is held across read-modify-write, so
  concurrent appends from several processes never lose an event;
- the new bytes replace the file atomically (``files.write_atomic``): a crash leaves the old
  file or the new one, never a torn one;
- the record's index (``record_index``) is rewritten after it, and checked before any use.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Hashable, Mapping
from typing import Any

import msgspec

from teams_runtime.actors.storage.files import (
    FileVersion,
    file_version,
    locked,
    remove_stale_temps,
    version_of,
    write_atomic,
)
from teams_runtime.actors.storage.protocols import Appended, IndexedParts, ParsedRecord, RecordRead
from teams_runtime.actors.storage.record_index import (
    INDEX_TAIL,
    RecordIndex,
    Span,
    evidence_spans,
    index_for,
    load_index,
    parts_from_index,
    write_index,
)
from teams_runtime.actors.storage.workspace import RecordPaths, Workspace
from teams_runtime.codecs.evidence import role_of_raw
from teams_runtime.codecs.records import (
    EVENT_SEPARATOR,
    EVENTS_CLOSE,
    EVENTS_KEY,
    EVENTS_OPEN,
    RecordFields,
    RenderedRecord,
    decode_record,
    encode_field,
    format_event,
    render_record,
)
from teams_runtime.exceptions import RecordError, UnknownRequestError

__all__ = [
    "FileRecordStore",
    "append_to_record",
    "create_record",
    "read_indexed_parts",
    "read_record",
    "unknown_request",
]


def unknown_request(paths: RecordPaths) -> UnknownRequestError:
    """The error for a request whose record file does not exist."""
    return UnknownRequestError(
        f"no request {paths.request_id!r}: {paths.record} does not exist; "
        "check the id and the workspace."
    )


def _read_bytes(paths: RecordPaths) -> tuple[bytes, FileVersion]:
    try:
        with open(paths.record, "rb") as handle:
            version = version_of(os.fstat(handle.fileno()))
            return handle.read(), version
    except FileNotFoundError:
        raise unknown_request(paths) from None
    except OSError as exc:
        raise RecordError(f"{paths.record}: cannot be read ({exc.strerror}).") from exc


def read_record(paths: RecordPaths) -> tuple[RecordFields, FileVersion]:
    """Read and decode a whole record file once; the version is the one of the bytes read."""
    data, version = _read_bytes(paths)
    return decode_record(data, str(paths.record)), version


def read_indexed_parts(paths: RecordPaths) -> IndexedParts | None:
    """Read a record through its index: a few small reads, no parse of the history.

    ``None`` when there is no index for the file as it is now (then parse it instead).
    """
    try:
        fd = os.open(paths.record, os.O_RDONLY)
    except FileNotFoundError:
        raise unknown_request(paths) from None
    except OSError as exc:
        raise RecordError(f"{paths.record}: cannot be read ({exc.strerror}).") from exc
    try:
        version = version_of(os.fstat(fd))
        index = load_index(paths, version)
        if index is None:
            return None
        return parts_from_index(
            lambda offset, length: os.pread(fd, length, offset), index, str(paths.record)
        )
    finally:
        os.close(fd)


def _commit(
    paths: RecordPaths,
    rendered: RenderedRecord,
    count: int,
    history_bytes: int,
    tail: list[Span],
    evidence: dict[str, tuple[int, Span]],
) -> IndexedParts:
    """Write the record, then its index; return the parts as the index describes them."""
    with contextlib.suppress(OSError):
        paths.index.unlink()  # never leave an index that could outlive its record version
    remove_stale_temps(paths.record)
    version = write_atomic(paths.record, rendered.data)
    index = index_for(rendered, version, count, history_bytes, tail, evidence)
    write_index(paths, index)
    data = rendered.data
    parts = parts_from_index(
        lambda offset, length: data[offset : offset + length], index, str(paths.record)
    )
    assert parts is not None  # we just laid these bytes out ourselves
    return parts


def _commit_all(
    paths: RecordPaths, fields: Mapping[str, Any], history: list[msgspec.Raw]
) -> IndexedParts:
    """Lay out every event afresh (no usable index) and commit the record with a new index."""
    formatted = [format_event(raw) for raw in history]
    rendered = render_record(fields, formatted)
    roles = [role_of_raw(raw) for raw in history]
    evidence = evidence_spans(roles, rendered.spans)
    history_bytes = sum(len(event) for event in formatted)
    return _commit(paths, rendered, len(history), history_bytes, rendered.spans, evidence)


def _checked_updates(updates: Mapping[str, Any]) -> dict[str, Any]:
    if EVENTS_KEY in updates:
        raise RecordError("`events` cannot be set directly; append events instead.")
    return dict(updates)


def _append_indexed(
    paths: RecordPaths,
    data: bytes,
    index: RecordIndex,
    events: list[msgspec.Raw],
    updates: Mapping[str, Any],
) -> IndexedParts | None:
    """Append using the index: old events are copied as bytes, never decoded or re-formatted."""
    view = memoryview(data)
    body_end = index.events_end - len(EVENTS_CLOSE)  # where the old last event ends
    if index.count and view[body_end : index.events_end] != EVENTS_CLOSE:
        return None
    header = data[: index.events_start]
    trailer = data[index.events_end :]
    try:
        fields = decode_record(header + b"[]" + trailer, str(paths.record))
    except RecordError:
        return None
    fields.update(updates)
    layout = render_record(fields, [])  # the other fields, laid out around an empty list
    new_header = layout.data[: layout.events_start]
    new = [format_event(raw) for raw in events]
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
    history_bytes = index.history_bytes + sum(len(event) for event in new)
    return _commit(
        paths, rendered, index.count + len(events), history_bytes, old_tail + spans, evidence
    )


def _append_parsed(
    paths: RecordPaths, data: bytes, events: list[msgspec.Raw], updates: Mapping[str, Any]
) -> IndexedParts:
    """Append by parsing the whole record (no usable index): builds a fresh index."""
    fields = decode_record(data, str(paths.record))
    existing = fields.get(EVENTS_KEY, [])
    if not isinstance(existing, list):
        raise RecordError(
            f"{paths.record}: `events` is a {type(existing).__name__}, not a list; cannot "
            "append without losing it (fix the record by hand)."
        )
    fields.update(updates)
    history = existing + events
    fields[EVENTS_KEY] = []
    return _commit_all(paths, fields, history)


def append_to_record(
    paths: RecordPaths, events: list[msgspec.Raw], updates: Mapping[str, Any]
) -> Appended:
    """Append ``events`` and set ``updates`` (top-level fields) in one locked write.

    Events other processes appended before the lock was taken are kept: the file is always
    re-read under the lock. Untouched events are written from their original bytes.
    """
    updates = _checked_updates(updates)
    if not paths.record.exists():  # no lock file for a request that does not exist
        raise unknown_request(paths)
    with locked(paths.lock):
        data, read_version = _read_bytes(paths)
        index = load_index(paths, read_version)
        parts = _append_indexed(paths, data, index, events, updates) if index else None
        if parts is None:
            parts = _append_parsed(paths, data, events, updates)
    return Appended(read_version, parts)


def create_record(paths: RecordPaths, record: Mapping[str, Any]) -> IndexedParts | None:
    """Write a new record file (and its index) unless one exists; ``None`` if it existed."""
    paths.record.parent.mkdir(parents=True, exist_ok=True)
    fields = dict(record)
    events = fields.get(EVENTS_KEY, [])
    if not isinstance(events, list):
        raise RecordError("a new request record needs `events` to be a list.")
    fields[EVENTS_KEY] = []
    raws = [encode_field(event) for event in events]
    with locked(paths.lock):
        if paths.record.exists():
            return None
        return _commit_all(paths, fields, raws)


class FileRecordStore:
    """The ``RecordStore`` of one workspace folder."""

    def __init__(self, workspace: Workspace, *, max_cached_paths: int = 1024) -> None:
        self.workspace = workspace
        self._paths: dict[str, RecordPaths] = {}  # building paths costs more than a warm ask
        self._max_cached_paths = max_cached_paths

    def paths(self, request_id: str) -> RecordPaths:
        """The files of ``request_id`` (checked to be a safe id)."""
        paths = self._paths.get(request_id)
        if paths is None:
            if len(self._paths) >= self._max_cached_paths:
                self._paths.clear()
            paths = self._paths[request_id] = self.workspace.record_paths(request_id)
        return paths

    def version(self, request_id: str) -> Hashable | None:
        """One ``stat``: about a microsecond, answered from the inode cache."""
        return file_version(self.paths(request_id).record)

    def read(self, request_id: str, *, tail: int | None) -> RecordRead:
        paths = self.paths(request_id)
        if tail is not None and tail <= INDEX_TAIL:
            parts = read_indexed_parts(paths)
            if parts is not None:
                return parts
        fields, version = read_record(paths)
        return ParsedRecord(version, fields)

    def load(self, request_id: str) -> bytes:
        """The record file's bytes, checked to be a record."""
        paths = self.paths(request_id)
        data, _ = _read_bytes(paths)
        decode_record(data, str(paths.record))
        return data

    def create(self, request_id: str, record: Mapping[str, Any]) -> bool:
        return create_record(self.paths(request_id), record) is not None

    def append(
        self, request_id: str, events: list[msgspec.Raw], updates: Mapping[str, Any]
    ) -> Appended:
        return append_to_record(self.paths(request_id), events, updates)

    def exists(self, request_id: str) -> bool:
        return self.paths(request_id).record.is_file()

    def list_ids(self) -> list[str]:
        try:
            names = os.listdir(self.workspace.requests_dir)
        except FileNotFoundError:
            return []
        return sorted(name[: -len(".json")] for name in names
                      if name.endswith(".json") and not name.startswith("."))  # fmt: skip
