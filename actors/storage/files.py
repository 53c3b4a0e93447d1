"""The file primitives every file-backed store builds on: versions, locks, atomic writes.

- A ``FileVersion`` (size, mtime, ctime, inode) tells one state of a file from another without
  reading it.
- ``locked`` holds an advisory ``fcntl`` lock on a sidecar file across a read-modify-write.
- ``write_atomic`` writes a temporary file in the same folder, fsyncs it, ``os.replace``s it
  over the target and fsyncs the folder: a crash leaves the old file or the new one.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import secrets
import stat
from collections.abc import Iterator
from pathlib import Path

import msgspec

from teams_runtime.exceptions import RecordError

__all__ = [
    "TEMP_SUFFIX",
    "FileVersion",
    "file_version",
    "locked",
    "remove_stale_temps",
    "version_of",
    "write_atomic",
]

TEMP_SUFFIX = ".tmp"
_PRIVATE_MODE = 0o600  # lock and temp files: owner only
_NEW_FILE_MODE = 0o644


class FileVersion(msgspec.Struct, frozen=True):
    """What tells one state of a file from another without reading it."""

    size: int
    mtime_ns: int
    ctime_ns: int
    inode: int


def version_of(result: os.stat_result) -> FileVersion:
    """The version a ``stat``/``fstat`` result describes."""
    return FileVersion(result.st_size, result.st_mtime_ns, result.st_ctime_ns, result.st_ino)


def file_version(path: Path) -> FileVersion | None:
    """The file's current version, or ``None`` if it does not exist (one ``stat`` call)."""
    try:
        return version_of(os.stat(path))
    except FileNotFoundError:
        return None


@contextlib.contextmanager
def locked(lock: Path) -> Iterator[None]:
    """Hold an exclusive advisory lock on ``lock`` (created if missing) while inside."""
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, _PRIVATE_MODE)
    except OSError as exc:
        raise RecordError(f"{lock}: cannot create the lock file ({exc.strerror}).") from exc
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def write_atomic(path: Path, data: bytes, *, durable: bool = True) -> FileVersion:
    """Replace ``path`` with ``data`` atomically; ``durable`` fsyncs the file and its folder.

    The file keeps the mode it had (new files get 0644). Raises ``RecordError`` naming the file
    if it cannot be written; the old file is then left as it was.
    """
    temp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}{TEMP_SUFFIX}")
    try:
        # The temp file is private while written; the file keeps the mode it had.
        mode = stat.S_IMODE(os.stat(path).st_mode) if path.exists() else _NEW_FILE_MODE
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, _PRIVATE_MODE)
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
            f"{path}: cannot be written ({exc.strerror}); the file was left as it was."
        ) from exc
    if durable:
        _sync_folder(path.parent)
    return version_of(os.stat(path))


def _sync_folder(folder: Path) -> None:
    # Make the rename itself durable, not just the new file's contents.
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def remove_stale_temps(path: Path) -> None:
    """Remove temp files of writers killed mid-write; only safe while holding the lock."""
    for temp in path.parent.glob(f".{path.name}.*{TEMP_SUFFIX}"):
        with contextlib.suppress(OSError):
            temp.unlink()
