"""Workers' lease files: ``queue/workers/<worker>.lease``, whose mtime is when the worker last
renewed (``FileWorkQueue``). Only regular files named by a worker id are leases: anything else
in the folder is another program's, never counted as a worker nor removed (``stray_files``
names it)."""

from __future__ import annotations

import contextlib
import os
import re
from pathlib import Path

from teams_runtime.exceptions import TeamsRuntimeError
from teams_runtime.storage.local_files import folder

__all__ = ["WORKER_NAME", "LeaseFiles"]

# The characters of a worker id (``new_worker_id``: host, pid and a random part).
WORKER_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9_.-]*")
_SUFFIX = ".lease"


class LeaseFiles:
    """The lease files in ``place`` (a workspace's ``queue/workers``, inside ``runtime``)."""

    def __init__(self, place: Path, runtime: Path) -> None:
        self.place = place
        self.runtime = runtime

    def path(self, worker: str) -> Path:
        return self.place / f"{worker}{_SUFFIX}"

    def workers(self) -> list[str]:
        """The workers that have a lease file, by name."""
        try:
            with folder(self.place, self.runtime, create=False) as dfd, os.scandir(dfd) as found:
                names = [entry.name for entry in found if entry.is_file(follow_symlinks=False)]
        except (FileNotFoundError, TeamsRuntimeError):
            return []
        workers = (name.removesuffix(_SUFFIX) for name in names if name.endswith(_SUFFIX))
        return sorted(worker for worker in workers if WORKER_NAME.fullmatch(worker))

    def renewed(self, worker: str) -> float:
        """When ``worker`` last renewed (``FileNotFoundError``: it has no lease;
        ``TeamsRuntimeError``: the folder cannot be opened)."""
        with folder(self.place, self.runtime, create=False) as dfd:
            return os.stat(f"{worker}{_SUFFIX}", dir_fd=dfd, follow_symlinks=False).st_mtime

    def age(self, worker: str, now: float) -> float | None:
        """Seconds since ``worker`` last renewed; ``None`` if it has no lease."""
        try:
            return now - self.renewed(worker)
        except (FileNotFoundError, TeamsRuntimeError):
            return None

    def remove(self, worker: str) -> None:
        """Remove ``worker``'s lease file, if it can be."""
        with (
            contextlib.suppress(OSError, TeamsRuntimeError),
            folder(self.place, self.runtime, create=False) as dfd,
        ):
            os.unlink(f"{worker}{_SUFFIX}", dir_fd=dfd)
