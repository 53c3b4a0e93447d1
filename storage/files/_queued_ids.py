"""One envelope per id in the file queue: a marker file per queued envelope id, so a second put
of an id whose first envelope may still exist is refused (docs/operations.md, "One envelope per
id").

``.teams_runtime/queued/<key>`` (``key``: a digest of the role and the envelope id, which
name an outcome) holds ``<role>/<name>``,
where the first envelope was queued (the name is kept through every move: claimed, deferred,
rejected). A put holds the marker's lock (``flock``) from before it is visible until its
envelope is written, so a racing put waits for it and then sees the envelope; a lock dies with
its process, so a put killed half-way leaves a marker that names no envelope, which the next put
of that id takes over. ``done`` and ``drop`` remove the marker of the envelope they remove, under
the same lock; a marker whose envelope is gone otherwise (a crash between the two removals, an
envelope removed by hand) is taken over the same way.

Whether an envelope exists is looked up where it can be: waiting, deferred, claimed by any
worker, or set aside. Envelopes move by renames while that is looked at, so a miss is looked at
again (``_LOOKS`` times in all): a move takes a claim or a model call, a look microseconds.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import stat
from collections.abc import Iterator, Sequence
from pathlib import Path

import msgspec

from teams_runtime.exceptions import TeamsRuntimeError
from teams_runtime.storage.files._envelope_names import QUEUED_NAME
from teams_runtime.storage.local_files import folder, read_file

__all__ = ["QueuedIds"]

_LOOKS = 3
_OPEN_FLAGS = os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC


class _NoMarker(Exception):
    """Something that is no marker file stands at a marker's name."""


class _EnvelopeId(msgspec.Struct):
    envelope_id: str = ""


def _key(envelope_id: str, role: str) -> str:
    # An outcome is keyed by its role and envelope id: so is an envelope's one place.
    import hashlib  # here, not at the top: `status` reads the queue, never marks ids

    return hashlib.blake2b(f"{role}\0{envelope_id}".encode(), digest_size=16).hexdigest()


class QueuedIds:
    """The markers of one workspace's queued envelope ids."""

    def __init__(self, queue_root: Path, runtime: Path, roles: Sequence[str]) -> None:
        self._root = queue_root
        self._runtime = runtime
        self._roles = frozenset(roles)
        self._markers = runtime / "queued"

    @contextlib.contextmanager
    def first(self, envelope_id: str, role: str, name: str) -> Iterator[Path | None]:
        """Hold ``envelope_id``'s marker: yields where its first envelope is when one may still
        exist (the put is refused), else ``None``, and the marker then names ``role/name``,
        which the caller writes before leaving the block. Where another program left something
        that is no file at the marker's name (a link, a folder, a pipe: a stray ``status``
        names), the put goes on unguarded rather than stop the request."""
        key = _key(envelope_id, role)
        with folder(self._markers, self._runtime) as dfd:
            try:
                fd = self._hold(dfd, key)
            except _NoMarker:
                yield None
                return
            try:
                content = os.pread(fd, 4096, 0).decode(errors="replace")
                existing = self._existing(content, envelope_id)
                if existing is None:
                    _rewrite(fd, f"{role}/{name}")  # taken over (or just made)
                yield existing
            finally:
                os.close(fd)  # the lock goes with it

    def forget(self, envelope_id: str, role: str, name: str) -> None:
        """Remove ``envelope_id``'s marker if it names ``role/name`` (the envelope removed)."""
        key = _key(envelope_id, role)
        with (
            contextlib.suppress(FileNotFoundError, _NoMarker),
            folder(self._markers, self._runtime, create=False) as dfd,
        ):
            fd = self._locked(dfd, key)
            if fd is None:
                return
            try:
                if os.pread(fd, 4096, 0).decode(errors="replace") == f"{role}/{name}":
                    os.unlink(key, dir_fd=dfd)
            finally:
                os.close(fd)

    def id_in(self, path: Path) -> str:
        """The envelope id in the envelope file ``path`` (empty when it has none)."""
        try:
            return msgspec.json.decode(read_file(path, self._runtime), type=_EnvelopeId).envelope_id
        except (msgspec.DecodeError, TeamsRuntimeError):
            return ""

    def _hold(self, dfd: int, key: str) -> int:
        """The marker ``key``, locked: made empty when there is none (made and locked under a
        temporary name, then linked: no one sees it unlocked)."""
        while True:
            fd = self._locked(dfd, key)
            if fd is not None:
                return fd
            temp = f".{key}~{os.getpid()}.{os.urandom(4).hex()}.tmp"
            fd = os.open(temp, _OPEN_FLAGS | os.O_CREAT | os.O_EXCL, 0o644, dir_fd=dfd)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                os.link(temp, key, src_dir_fd=dfd, dst_dir_fd=dfd, follow_symlinks=False)
            except FileExistsError:
                os.close(fd)
                continue  # another put made it meanwhile: wait for its lock
            except BaseException:
                os.close(fd)
                raise
            finally:
                os.unlink(temp, dir_fd=dfd)
            return fd  # empty: `_existing` finds no envelope for it

    @staticmethod
    def _locked(dfd: int, key: str) -> int | None:
        """The existing marker ``key``, locked; ``None`` if there is none (or it was removed
        while its lock was awaited)."""
        while True:
            try:
                fd = os.open(key, _OPEN_FLAGS, dir_fd=dfd)
            except FileNotFoundError:
                return None
            except OSError as exc:  # a link (ELOOP), a folder (EISDIR), a socket (ENXIO)
                raise _NoMarker from exc
            if not stat.S_ISREG(os.fstat(fd).st_mode):  # a pipe, a device
                os.close(fd)
                raise _NoMarker
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                same = os.stat(key, dir_fd=dfd, follow_symlinks=False).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
            if same:
                return fd
            os.close(fd)  # removed, or removed and made again, while its lock was awaited

    def _existing(self, content: str, envelope_id: str) -> Path | None:
        """Where the envelope ``envelope_id`` a marker names is now; ``None`` when it is
        nowhere (or the file there is another envelope: a marker not the queue's)."""
        role, _, name = content.partition("/")
        if role not in self._roles or QUEUED_NAME.fullmatch(name) is None:
            return None  # an empty marker (made just now) or not one the queue wrote
        for _ in range(_LOOKS):
            for place in self._places(role, name):
                if os.path.lexists(place):
                    with contextlib.suppress(OSError):  # moved on meanwhile: look again
                        return place if self.id_in(place) == envelope_id else None
        return None

    def _places(self, role: str, name: str) -> Iterator[Path]:
        # Waiting last: the moves that could hide an envelope from one look end there.
        yield self._root / "rejected" / f"{role}-{name}"
        yield self._root / "deferred" / role / name
        with contextlib.suppress(OSError):
            for worker in sorted(os.listdir(self._root / "claimed")):
                yield self._root / "claimed" / worker / role / name
        yield self._root / role / name


def _rewrite(fd: int, content: str) -> None:
    os.ftruncate(fd, 0)
    os.pwrite(fd, content.encode(), 0)
