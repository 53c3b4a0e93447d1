"""Request record files on disk: versioned reads, locked read-modify-write, atomic replace.

Blocking functions: the ContextActor runs them in worker threads. Every writer (the actor,
``teams-runtime append``, other processes) goes through ``append_to_record`` so that:

- an advisory ``fcntl`` lock on a sidecar ``<id>.json.lock`` is held across read-modify-write,
  so concurrent appends from several processes never lose an event;
- the new bytes go to a temporary file in the same folder, are flushed and fsynced, then
  ``os.replace``d over the record: a crash leaves the old file or the new one, never a torn one.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import secrets
import stat
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import msgspec

from teams_runtime.codecs.records import (
    EVENTS_KEY,
    RecordFields,
    decode_record,
    encode_record,
)
from teams_runtime.exceptions import RecordError, UnknownRequestError

__all__ = [
    "TEMP_SUFFIX",
    "FileVersion",
    "append_to_record",
    "create_record",
    "file_version",
    "read_record",
]

TEMP_SUFFIX = ".tmp"
_FILE_MODE = 0o600  # lock and temp files: owner only
_NEW_RECORD_MODE = 0o644


class FileVersion(msgspec.Struct, frozen=True):
    """What tells one state of a record file from another without reading it."""

    size: int
    mtime_ns: int
    ctime_ns: int
    inode: int


def _version(stat: os.stat_result) -> FileVersion:
    return FileVersion(stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns, stat.st_ino)


def file_version(path: Path) -> FileVersion | None:
    """The file's current version, or ``None`` if it does not exist (one ``stat`` call)."""
    try:
        return _version(os.stat(path))
    except FileNotFoundError:
        return None


def read_record(path: Path, request_id: str) -> tuple[RecordFields, FileVersion]:
    """Read and decode a record file once; the version is the one of the bytes read."""
    try:
        with open(path, "rb") as handle:
            version = _version(os.fstat(handle.fileno()))
            data = handle.read()
    except FileNotFoundError:
        raise UnknownRequestError(
            f"no request {request_id!r}: {path} does not exist; check the id and the workspace."
        ) from None
    except OSError as exc:
        raise RecordError(f"{path}: cannot be read ({exc.strerror}).") from exc
    return decode_record(data, str(path)), version


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    lock_path = path.with_name(path.name + ".lock")
    try:
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, _FILE_MODE)
    except OSError as exc:
        raise RecordError(f"{lock_path}: cannot create the lock file ({exc.strerror}).") from exc
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def _write_atomic(path: Path, data: bytes) -> FileVersion:
    temp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}{TEMP_SUFFIX}")
    try:
        # The temp file is private while written; the record keeps the mode it had.
        mode = stat.S_IMODE(os.stat(path).st_mode) if path.exists() else _NEW_RECORD_MODE
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, _FILE_MODE)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fchmod(fd, mode)
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


class Appended(msgspec.Struct, frozen=True):
    """The outcome of one append: what was read before it and what is on disk after it."""

    read_version: FileVersion
    version: FileVersion
    fields: RecordFields
    events: list[msgspec.Raw]


def append_to_record(
    path: Path,
    request_id: str,
    events: list[msgspec.Raw],
    updates: Mapping[str, Any],
) -> Appended:
    """Append ``events`` and set ``updates`` (top-level fields) in one locked write.

    Events other processes appended before the lock was taken are kept: the file is always
    re-read under the lock. Untouched events are written from their original bytes.
    """
    if not path.exists():  # no lock file for a request that does not exist
        raise UnknownRequestError(
            f"no request {request_id!r}: {path} does not exist; check the id and the workspace."
        )
    with _locked(path):
        fields, read_version = read_record(path, request_id)
        existing = fields.get(EVENTS_KEY, [])
        if not isinstance(existing, list):
            raise RecordError(
                f"{path}: `events` is a {type(existing).__name__}, not a list; cannot append "
                "without losing it (fix the record by hand)."
            )
        fields.update(updates)
        fields[EVENTS_KEY] = all_events = existing + events
        _remove_stale_temps(path)
        version = _write_atomic(path, encode_record(fields))
    return Appended(read_version, version, fields, all_events)


def create_record(path: Path, record: Mapping[str, Any]) -> FileVersion | None:
    """Write a new record file unless one exists; ``None`` if it already existed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with _locked(path):
        if path.exists():
            return None
        return _write_atomic(path, encode_record(record))
