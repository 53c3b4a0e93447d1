"""The file primitives every file-backed store builds on: versions, locks, atomic writes.

- A ``FileVersion`` (size, mtime, ctime, inode) tells one state of a file from another without
  reading it.
- ``locked`` holds an advisory ``fcntl`` lock on a sidecar file across a read-modify-write.
- ``write_atomic`` writes a temporary file in the same folder, fsyncs it, renames it over the
  target and fsyncs the folder: a crash leaves the old file or the new one. The version it
  returns is that of the bytes it wrote (``fstat`` of its own descriptor), whatever another
  program may have renamed into place since.
- Nothing here writes through a symbolic link. Every folder under the runtime folder is opened
  one component at a time with ``O_NOFOLLOW | O_DIRECTORY`` (``open_folder``), and files are
  created, renamed and removed relative to that descriptor, so a link planted at any moment,
  even between a check and a write, is refused, never followed.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
import stat
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import msgspec

from teams_runtime.exceptions import RecordError

__all__ = [
    "TEMP_SUFFIX",
    "FileVersion",
    "FolderKeepsVanishing",
    "NotRegularFile",
    "Raced",
    "create_new",
    "ensure_folder",
    "file_version",
    "folder",
    "is_temp_name",
    "locked",
    "open_folder",
    "open_regular",
    "read_file",
    "remove_stale_temps",
    "version_of",
    "write_atomic",
]

TEMP_SUFFIX = ".tmp"
# Temp files are `.<name>~<pid>.<8 hex digits>.tmp`: `~` is never part of a request id, so the
# temp files of one record can never match the pattern of another (`a.json` vs `a.json.b.json`).
_TEMP_MARK = "~"
_TEMP_HEX_BYTES = 4
_TEMP_HEX = 2 * _TEMP_HEX_BYTES
_TEMP_NAME = re.compile(rf"\.(?P<target>.+)~[0-9]+\.[0-9a-f]{{{_TEMP_HEX}}}\.tmp")
_STALE_TEMP_SECONDS = 60.0  # a writer's own temp file lives for milliseconds
_PRIVATE_MODE = 0o600  # lock and temp files: owner only
_NEW_FILE_MODE = 0o644
_CREATE_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW


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
    """The file's current version, or ``None`` if it does not exist (one ``stat`` call; a
    folder on the way that is not a folder counts as missing)."""
    try:
        return version_of(os.stat(path))
    except (FileNotFoundError, NotADirectoryError):
        return None


def _refused(path: Path) -> RecordError:
    return RecordError(
        f"{path} is a symbolic link or not a folder; teams-runtime never writes through links "
        "under .teams_runtime/ (remove it, then retry)."
    )


_WALKS = 10  # walks of a folder path another program keeps removing parts of, then give up


class FolderKeepsVanishing(RecordError):
    """A folder another program removed every time it was made again."""


def open_folder(path: Path, runtime: Path, *, create: bool = True) -> int:
    """A descriptor of ``path``, a folder inside the ``runtime`` folder, opened one component
    at a time without following links (``create``: making missing ones). The workspace folder
    itself (``runtime``'s parent) is the user's and may be a link.

    With ``create``, a folder another program removes between our ``mkdir`` and our ``open``
    (someone tidying the index folder away) is made again: the walk starts over, a few times,
    rather than failing the write that needs it.

    Raises ``RecordError`` naming the component that is a link or not a folder, and
    ``FileNotFoundError`` for a missing one when not ``create``.
    """
    parts = path.relative_to(runtime.parent).parts
    for _ in range(_WALKS if create else 1):
        try:
            return _walk(runtime.parent, parts, create)
        except FileNotFoundError:
            if not create:
                raise
    raise FolderKeepsVanishing(
        f"{path}: another program keeps removing the folder; nothing was written."
    )


def _walk(top: Path, parts: tuple[str, ...], create: bool) -> int:
    if create:
        top.mkdir(parents=True, exist_ok=True)
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    current = top
    try:
        for part in parts:
            current = current / part
            child = _open_child(fd, part, current, create)
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


def _open_child(fd: int, part: str, current: Path, create: bool) -> int:
    if create:
        with contextlib.suppress(FileExistsError):
            os.mkdir(part, dir_fd=fd)
    try:
        return os.open(part, _FOLDER, dir_fd=fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise _refused(current) from exc
        raise


@contextlib.contextmanager
def folder(path: Path, runtime: Path, *, create: bool = True) -> Iterator[int]:
    """``open_folder`` as a context manager; ``OSError`` other than a refusal becomes a
    ``RecordError`` naming the folder."""
    try:
        fd = open_folder(path, runtime, create=create)
    except RecordError:
        raise
    except OSError as exc:
        if not create and isinstance(exc, FileNotFoundError):
            raise
        raise RecordError(f"{path}: cannot open the folder ({exc.strerror}).") from exc
    try:
        yield fd
    finally:
        os.close(fd)


def ensure_folder(path: Path, runtime: Path) -> None:
    """Create ``path`` (inside ``runtime``) and its missing parents, refusing any link."""
    with folder(path, runtime):
        pass


class Raced(Exception):
    """Another writer changed the file, or took the lock, while this one was writing: the
    write was not made; read again and retry."""


@contextlib.contextmanager
def locked(lock: Path, runtime: Path) -> Iterator[Callable[[], bool]]:
    """Hold an exclusive advisory lock on ``lock`` (created if missing) while inside; yields
    ``held()``, whether the lock file at the path is still the one locked.

    The lock is taken on the file the path names when it is held: if another program removed
    or replaced the lock file meanwhile, it is opened and locked again. A writer checks
    ``held()`` right before it replaces anything, so a lock file removed while held (someone
    tidying up) cannot let two writers both replace the record.
    """
    with folder(lock.parent, runtime) as dfd:
        while True:
            try:
                fd = os.open(lock.name, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, _PRIVATE_MODE,
                             dir_fd=dfd)  # fmt: skip
            except OSError as exc:
                if exc.errno == errno.ELOOP:
                    raise _refused(lock) from exc
                raise RecordError(f"{lock}: cannot create the lock file ({exc.strerror}).") from exc
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                current = os.stat(lock.name, dir_fd=dfd, follow_symlinks=False)
            except FileNotFoundError:
                os.close(fd)
                continue
            if current.st_ino != os.fstat(fd).st_ino:
                os.close(fd)  # it was replaced while we waited: lock the one in place now
                continue
            break

        def held() -> bool:
            try:
                current = os.stat(lock.name, dir_fd=dfd, follow_symlinks=False)
            except OSError:
                return False
            return current.st_ino == os.fstat(fd).st_ino

        try:
            yield held
        finally:
            os.close(fd)  # closing releases the lock


def _existing_mode(name: str, dfd: int) -> int:
    try:
        result = os.stat(name, dir_fd=dfd, follow_symlinks=False)
    except FileNotFoundError:
        return _NEW_FILE_MODE
    # A link in place of the file is replaced, never followed: the new file gets the default.
    return _NEW_FILE_MODE if stat.S_ISLNK(result.st_mode) else stat.S_IMODE(result.st_mode)


def write_atomic(
    path: Path,
    data: bytes,
    *,
    runtime: Path,
    durable: bool = True,
    unless: Callable[[], bool] | None = None,
) -> FileVersion:
    """Replace ``path`` (a file inside the ``runtime`` folder) with ``data`` atomically;
    ``durable`` fsyncs the file and its folder.

    Returns the version of the bytes written. The file keeps the mode it had (new files get
    0644). Raises ``RecordError`` naming the file if it cannot be written (or its folder is a
    link); the old file is then left as it was. ``unless`` is asked right before the rename:
    ``False`` leaves the old file and raises ``Raced``.
    """
    # os.urandom is what secrets.token_hex reads; importing secrets (hmac, hashlib, OpenSSL)
    # would cost every command, readers (`status`) included, a few milliseconds.
    unique = f"{os.getpid()}.{os.urandom(_TEMP_HEX_BYTES).hex()}"
    temp = f".{path.name}{_TEMP_MARK}{unique}{TEMP_SUFFIX}"
    with folder(path.parent, runtime) as dfd:
        fd = -1
        try:
            fd = os.open(temp, _CREATE_NEW, _PRIVATE_MODE, dir_fd=dfd)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fchmod(fd, _existing_mode(path.name, dfd))
            if durable:
                os.fsync(fd)
            if unless is not None and not unless():
                os.unlink(temp, dir_fd=dfd)
                raise Raced(str(path))
            os.replace(temp, path.name, src_dir_fd=dfd, dst_dir_fd=dfd)
            if durable:
                with contextlib.suppress(OSError):
                    os.fsync(dfd)  # the rename itself durable, not just the contents
            # The descriptor still names the inode we wrote, whatever is at the path by now.
            return version_of(os.fstat(fd))
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.unlink(temp, dir_fd=dfd)
            raise RecordError(
                f"{path}: cannot be written ({exc.strerror}); the file was left as it was."
            ) from exc
        finally:
            if fd >= 0:
                os.close(fd)


def create_new(path: Path, data: bytes, *, runtime: Path) -> bool:
    """Create ``path`` (inside ``runtime``) holding ``data`` unless something is there already;
    whether it was created. Whole or not at all: the bytes are written and fsynced in a temp
    file first, then linked into place (``link`` never replaces, nor follows a link there)."""
    temp = f".{path.name}{_TEMP_MARK}{os.getpid()}.{os.urandom(4).hex()}{TEMP_SUFFIX}"
    with folder(path.parent, runtime) as dfd:
        try:
            fd = os.open(temp, _CREATE_NEW, _NEW_FILE_MODE, dir_fd=dfd)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                os.fsync(fd)
            finally:
                os.close(fd)
            try:
                os.link(temp, path.name, src_dir_fd=dfd, dst_dir_fd=dfd, follow_symlinks=False)
            except FileExistsError:
                return False
            with contextlib.suppress(OSError):
                os.fsync(dfd)
            return True
        except OSError as exc:
            raise RecordError(f"{path}: cannot be written ({exc.strerror}).") from exc
        finally:
            with contextlib.suppress(OSError):
                os.unlink(temp, dir_fd=dfd)


class NotRegularFile(OSError):
    """What ``open_regular`` raises when something else is in the file's place (``errno``
    ``EISDIR`` for a folder, ``EINVAL`` for a FIFO, a device, a socket)."""


def open_regular(path: Path | str, *, dir_fd: int | None = None, follow_links: bool = False) -> int:
    """Open a regular file for reading, never blocking on something else planted in its place
    (``NotRegularFile`` for those) and, unless ``follow_links``, never through a link."""
    flags = os.O_RDONLY | os.O_NONBLOCK | (0 if follow_links else os.O_NOFOLLOW)
    fd = os.open(path, flags, dir_fd=dir_fd)
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        kind = errno.EISDIR if stat.S_ISDIR(mode) else errno.EINVAL
        raise NotRegularFile(kind, "not a regular file", str(path))
    os.set_blocking(fd, True)
    return fd


def read_file(path: Path, runtime: Path) -> bytes:
    """The bytes of a regular file inside ``runtime``, never through a link (``OSError`` if it
    is one, is missing, or is not a regular file)."""
    with folder(path.parent, runtime, create=False) as dfd:
        fd = open_regular(path.name, dir_fd=dfd)
        with open(fd, "rb") as handle:
            return handle.read()


def is_temp_name(name: str, target: str | None = None) -> bool:
    """Whether ``name`` is one ``write_atomic`` makes (of a file named ``target``, if given):
    exactly ``.<target>~<pid digits>.<8 lower-case hex digits>.tmp``. The one test of what is
    our temp file: the stale-temp cleanup removes only these, and ``status`` counts any other
    name (``.a.json~notes.tmp``) as a stray, never deleted."""
    match = _TEMP_NAME.fullmatch(name)
    return match is not None and (target is None or match["target"] == target)


def remove_stale_temps(path: Path, runtime: Path) -> None:
    """Remove temp files that writers of ``path`` left when killed mid-write: only names
    ``write_atomic`` makes (``is_temp_name``), and only those older than a minute, so a live
    writer's (one that took a replaced lock, say) is never touched, nor a person's file."""
    now = time.time()
    with folder(path.parent, runtime) as dfd:
        for name in os.listdir(dfd):
            if not is_temp_name(name, path.name):
                continue
            with contextlib.suppress(OSError):
                info = os.stat(name, dir_fd=dfd, follow_symlinks=False)
                if now - info.st_mtime > _STALE_TEMP_SECONDS:
                    os.unlink(name, dir_fd=dfd)
