"""Request record files on disk: versioned reads, locked read-modify-write, atomic replace.

Blocking functions: the ContextActor runs them in worker threads. Every writer (the actor,
``teams-runtime append``, other processes) goes through ``append_to_record`` so that:

- an advisory ``fcntl`` lock on a sidecar ``<id>.json.lock`` is held across read-modify-write,
  so concurrent appends from several processes never lose an event;
- the new bytes go to a temporary file in the same folder, are flushed and fsynced, then
  ``os.replace``d over the record: a crash leaves the old file or the new one, never a torn one.

Next to each record a writer keeps an **index** (``.teams_runtime/index/<id>.idx``): where in
the file the events array, the last events and the newest evidence of every role are. It is a
cache, never the truth: it names the exact file version (size, mtime, ctime, inode) it
describes, and a reader or writer that finds it missing, stale or inconsistent parses the record
instead. With it, a cold projection reads a few kilobytes instead of parsing the whole history,
and an append copies the old events' bytes instead of re-formatting them.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import secrets
import stat
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import msgspec

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
    split_raw_list,
)
from teams_runtime.exceptions import RecordError, UnknownRequestError
from teams_runtime.projection import role_of_raw
from teams_runtime.workspace import RecordPaths

__all__ = [
    "INDEX_TAIL",
    "TEMP_SUFFIX",
    "Appended",
    "FileVersion",
    "IndexedParts",
    "RecordIndex",
    "append_to_record",
    "create_record",
    "file_version",
    "read_indexed_parts",
    "read_record",
    "unknown_request",
]

TEMP_SUFFIX = ".tmp"
INDEX_SCHEMA = 1
INDEX_TAIL = 256  # spans of the last events an index keeps: enough for max_events <= 256
_FILE_MODE = 0o600  # lock and temp files: owner only
_NEW_RECORD_MODE = 0o644


class FileVersion(msgspec.Struct, frozen=True):
    """What tells one state of a record file from another without reading it."""

    size: int
    mtime_ns: int
    ctime_ns: int
    inode: int


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


class IndexedParts(msgspec.Struct, frozen=True):
    """A record as an index lets one read it: the other fields plus the few events needed."""

    version: FileVersion
    fields: RecordFields  # every top-level field; `events` is an empty list here
    count: int
    history_bytes: int
    tail: list[msgspec.Raw]  # the last min(count, INDEX_TAIL) events
    evidence: dict[str, tuple[int, msgspec.Raw]]


class Appended(msgspec.Struct, frozen=True):
    """The outcome of one append: the version it replaced and what is on disk now."""

    read_version: FileVersion
    parts: IndexedParts


def _version(result: os.stat_result) -> FileVersion:
    return FileVersion(result.st_size, result.st_mtime_ns, result.st_ctime_ns, result.st_ino)


def unknown_request(paths: RecordPaths) -> UnknownRequestError:
    """The error for a request whose record file does not exist."""
    return UnknownRequestError(
        f"no request {paths.request_id!r}: {paths.record} does not exist; "
        "check the id and the workspace."
    )


def file_version(path: Path) -> FileVersion | None:
    """The file's current version, or ``None`` if it does not exist (one ``stat`` call)."""
    try:
        return _version(os.stat(path))
    except FileNotFoundError:
        return None


def _read_bytes(paths: RecordPaths) -> tuple[bytes, FileVersion]:
    try:
        with open(paths.record, "rb") as handle:
            version = _version(os.fstat(handle.fileno()))
            return handle.read(), version
    except FileNotFoundError:
        raise unknown_request(paths) from None
    except OSError as exc:
        raise RecordError(f"{paths.record}: cannot be read ({exc.strerror}).") from exc


def read_record(paths: RecordPaths) -> tuple[RecordFields, FileVersion]:
    """Read and decode a whole record file once; the version is the one of the bytes read."""
    data, version = _read_bytes(paths)
    return decode_record(data, str(paths.record)), version


# --- the index ---------------------------------------------------------------------------


def _load_index(paths: RecordPaths, version: FileVersion) -> RecordIndex | None:
    """The index if it describes exactly ``version`` of the record, else ``None``."""
    try:
        index = _INDEX_DECODER.decode(paths.index.read_bytes())
    except (OSError, msgspec.DecodeError):
        return None
    if index.schema != INDEX_SCHEMA or index.record != version:
        return None
    return index


def _parts(
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
        version = _version(os.fstat(fd))
        index = _load_index(paths, version)
        if index is None:
            return None
        return _parts(lambda offset, length: os.pread(fd, length, offset), index, str(paths.record))
    finally:
        os.close(fd)


def _evidence_spans(
    roles: list[str | None], spans: list[Span], start: int = 0
) -> dict[str, tuple[int, Span]]:
    evidence: dict[str, tuple[int, Span]] = {}
    for position, role in enumerate(roles):
        if role is not None:
            evidence[role] = (start + position, spans[position])
    return evidence


def _index_for(
    rendered: RenderedRecord,
    version: FileVersion,
    count: int,
    history_bytes: int,
    tail: list[Span],
    evidence: dict[str, tuple[int, Span]],
) -> RecordIndex:
    return RecordIndex(
        record=version,
        count=count,
        history_bytes=history_bytes,
        events_start=rendered.events_start,
        events_end=rendered.events_end,
        tail=tail[-INDEX_TAIL:],
        evidence=evidence,
    )


# --- writing -----------------------------------------------------------------------------


@contextlib.contextmanager
def _locked(paths: RecordPaths) -> Iterator[None]:
    try:
        fd = os.open(paths.lock, os.O_RDWR | os.O_CREAT, _FILE_MODE)
    except OSError as exc:
        raise RecordError(f"{paths.lock}: cannot create the lock file ({exc.strerror}).") from exc
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def _write_atomic(path: Path, data: bytes, *, durable: bool = True) -> FileVersion:
    temp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}{TEMP_SUFFIX}")
    try:
        # The temp file is private while written; the file keeps the mode it had.
        mode = stat.S_IMODE(os.stat(path).st_mode) if path.exists() else _NEW_RECORD_MODE
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, _FILE_MODE)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fchmod(fd, mode)
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise RecordError(
            f"{path}: cannot be written ({exc.strerror}); the record was left as it was."
        ) from exc
    if durable:
        _sync_folder(path.parent)
    return _version(os.stat(path))


def _sync_folder(folder: Path) -> None:
    # Make the rename itself durable, not just the new file's contents.
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _remove_stale_temps(path: Path) -> None:
    # Temp files of a writer killed mid-write; safe to remove while we hold the lock.
    for temp in path.parent.glob(f".{path.name}.*{TEMP_SUFFIX}"):
        with contextlib.suppress(OSError):
            temp.unlink()


def _write_index(paths: RecordPaths, index: RecordIndex) -> None:
    # A cache: not fsynced, and a failure to write it only costs the next reader a parse.
    with contextlib.suppress(OSError, RecordError):
        paths.index.parent.mkdir(parents=True, exist_ok=True)
        _write_atomic(paths.index, _INDEX_ENCODER.encode(index), durable=False)


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
    _remove_stale_temps(paths.record)
    version = _write_atomic(paths.record, rendered.data)
    index = _index_for(rendered, version, count, history_bytes, tail, evidence)
    _write_index(paths, index)
    data = rendered.data
    parts = _parts(lambda offset, length: data[offset : offset + length], index, str(paths.record))
    assert parts is not None  # we just laid these bytes out ourselves
    return parts


def _commit_all(
    paths: RecordPaths, fields: Mapping[str, Any], history: list[msgspec.Raw]
) -> IndexedParts:
    """Lay out every event afresh (no usable index) and commit the record with a new index."""
    formatted = [format_event(raw) for raw in history]
    rendered = render_record(fields, formatted)
    roles = [role_of_raw(raw) for raw in history]
    evidence = _evidence_spans(roles, rendered.spans)
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
    evidence.update(_evidence_spans(roles, spans, start=index.count))
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
    with _locked(paths):
        data, read_version = _read_bytes(paths)
        index = _load_index(paths, read_version)
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
    with _locked(paths):
        if paths.record.exists():
            return None
        return _commit_all(paths, fields, raws)
