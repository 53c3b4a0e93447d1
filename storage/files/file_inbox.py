"""Waiting answers of people's roles, one file each: ``FileAnswerInbox``, the ``AnswerInbox``
of the file storage.

    inbox/<role>/<name>-<request id>.json    one waiting answer (``codecs.waiting_answers``)

``<name>`` is made from the envelope's id, so one envelope waits once however often it is put
(a worker that crashed after putting it and before acking its claim puts it again). A file is
created whole or not at all (``local_files.create_new``) and replaced atomically when renewed.
Role folders are whatever folders the inbox holds: role names are values, not a fixed list.
Every folder is opened without following links. Blocking code: coroutines await it through
``files.threaded`` (a worker thread per call).
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from teams_runtime.codecs.waiting_answers import (
    WaitingAnswer,
    decode_waiting,
    encode_waiting,
    waiting_name,
)
from teams_runtime.exceptions import TeamsRuntimeError
from teams_runtime.storage.local_files import create_new, folder, read_file, write_atomic
from teams_runtime.storage.workspace import Workspace

__all__ = ["FileAnswerInbox"]


class FileAnswerInbox:
    """The inbox folder of one workspace."""

    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace
        self._runtime = workspace.runtime_dir
        self._root = workspace.inbox_dir

    def _path(self, item: WaitingAnswer) -> Path:
        name = f"{waiting_name(item.envelope_id)}-{item.request_id}.json"
        return self.workspace.role_inbox(item.role) / name

    def put(self, item: WaitingAnswer) -> bool:
        return create_new(self._path(item), encode_waiting(item), runtime=self._runtime)

    def renew(self, item: WaitingAnswer) -> None:
        write_atomic(self._path(item), encode_waiting(item), runtime=self._runtime)

    def remove(self, item: WaitingAnswer) -> bool:
        path = self._path(item)
        try:
            with folder(path.parent, self._runtime, create=False) as dfd:
                os.unlink(path.name, dir_fd=dfd)
        except FileNotFoundError:
            return False
        return True

    def items(self) -> list[WaitingAnswer]:
        found = []
        for role in self._roles():
            place = self._root / role
            for name in self._names(place):
                with contextlib.suppress(OSError):  # taken meanwhile, or not a regular file
                    item = decode_waiting(read_file(place / name, self._runtime))
                    if item is not None and item.role == role:
                        found.append(item)
        return sorted(found, key=lambda item: (item.since, item.envelope_id))

    def counts(self) -> dict[str, int]:
        counts = {role: len(self._names(self._root / role)) for role in self._roles()}
        return {role: count for role, count in counts.items() if count}

    def _roles(self) -> list[str]:
        """The real folders of the inbox (a stray file or a link there is passed over)."""
        try:
            with folder(self._root, self._runtime, create=False) as dfd, os.scandir(dfd) as found:
                return sorted(
                    entry.name
                    for entry in found
                    if entry.is_dir(follow_symlinks=False) and not entry.name.startswith(".")
                )
        except (FileNotFoundError, TeamsRuntimeError):
            return []

    def _names(self, place: Path) -> list[str]:
        try:
            with folder(place, self._runtime, create=False) as dfd:
                names = os.listdir(dfd)
        except (FileNotFoundError, TeamsRuntimeError):
            return []
        return sorted(n for n in names if n.endswith(".json") and not n.startswith("."))
