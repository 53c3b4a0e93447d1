"""The file primitives every file-backed store builds on: versions, locks, atomic writes.

- A ``FileVersion`` (size, mtime, ctime, inode) tells one state of a file from another without
  reading it.
- ``locked`` holds an advisory ``fcntl`` lock on a sidecar file across a read-modify-write.
- ``write_atomic`` writes a temporary file in the same folder, fsyncs it, ``os.replace``s it
  over the target and fsyncs the folder: a crash leaves the old file or the new one. The
  version it returns is that of the bytes it wrote (``fstat`` of its own descriptor), whatever
  another program may have renamed into place since.
- Nothing here writes through a symbolic link: files are created with ``O_NOFOLLOW`` (and
  ``O_EXCL`` where new), and ``ensure_folder`` refuses a linked folder under the runtime folder.
"""

from __future__ import annotations

import contextlib
import fcntl
import glob
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
    "ensure_folder",
    "file_version",
    "locked",
    "remove_stale_temps",
    "version_of",
    "write_atomic",
]

TEMP_SUFFIX = ".tmp"
# Temp files are `.<name>~<pid>.<random>.tmp`: `~` is never part of a request id, so the temp
# files of one record can never match the pattern of another (`a.json` vs `a.json.b.json`).
_TEMP_MARK = "~"
_PRIVATE_MODE = 0o600  # lock and temp files: owner only
_NEW_FILE_MODE = 0o644
_CREATE_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW


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


def _linked(path: Path) -> RecordError:
    return RecordError(
        f"{path} is a symbolic link; teams-runtime never writes through links under "
        ".teams_runtime/ (remove the link, then retry)."
    )


def ensure_folder(folder: Path, runtime: Path) -> None:
    """Create ``folder`` (inside the ``runtime`` folder) and any missing parents, refusing any
    of them, ``runtime`` included, that is a symbolic link (``RecordError`` naming it)."""
    parts = folder.relative_to(runtime.parent).parts
    current = runtime.parent
    current.mkdir(parents=True, exist_ok=True)  # the workspace itself: the user's to link
    for part in parts:
        current = current / part
        try:
            mode = os.lstat(current).st_mode
        except FileNotFoundError:
            try:
                os.mkdir(current)
            except FileExistsError:  # another process made it just now
                pass
            except OSError as exc:
                raise RecordError(f"{current}: cannot create the folder ({exc.strerror}).") from exc
            mode = os.lstat(current).st_mode
        if stat.S_ISLNK(mode):
            raise _linked(current)


@contextlib.contextmanager
def locked(lock: Path) -> Iterator[None]:
    """Hold an exclusive advisory lock on ``lock`` (created if missing) while inside."""
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, _PRIVATE_MODE)
    except OSError as exc:
        if os.path.islink(lock):
            raise _linked(lock) from exc
        raise RecordError(f"{lock}: cannot create the lock file ({exc.strerror}).") from exc
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def _existing_mode(path: Path) -> int:
    try:
        result = os.lstat(path)
    except FileNotFoundError:
        return _NEW_FILE_MODE
    # A link in place of the file is replaced, never followed: the new file gets the default.
    return _NEW_FILE_MODE if stat.S_ISLNK(result.st_mode) else stat.S_IMODE(result.st_mode)


def write_atomic(path: Path, data: bytes, *, durable: bool = True) -> FileVersion:
    """Replace ``path`` with ``data`` atomically; ``durable`` fsyncs the file and its folder.

    Returns the version of the bytes written. The file keeps the mode it had (new files get
    0644). Raises ``RecordError`` naming the file if it cannot be written; the old file is then
    left as it was.
    """
    temp = path.with_name(
        f".{path.name}{_TEMP_MARK}{os.getpid()}.{secrets.token_hex(4)}{TEMP_SUFFIX}"
    )
    fd = -1
    try:
        fd = os.open(temp, _CREATE_NEW, _PRIVATE_MODE)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fchmod(fd, _existing_mode(path))
        if durable:
            os.fsync(fd)
        os.replace(temp, path)
        if durable:
            _sync_folder(path.parent)
        # The descriptor still names the inode we wrote, whatever is at the path by now.
        return version_of(os.fstat(fd))
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise RecordError(
            f"{path}: cannot be written ({exc.strerror}); the file was left as it was."
        ) from exc
    finally:
        if fd >= 0:
            os.close(fd)


def _sync_folder(folder: Path) -> None:
    # Make the rename itself durable, not just the new file's contents.
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def remove_stale_temps(path: Path) -> None:
    """Remove temp files that writers of ``path`` left when killed mid-write. Only safe while
    holding ``path``'s lock (no live writer of it then has one)."""
    pattern = f".{glob.escape(path.name)}{_TEMP_MARK}*{TEMP_SUFFIX}"
    for temp in path.parent.glob(pattern):
        with contextlib.suppress(OSError):
            temp.unlink()
