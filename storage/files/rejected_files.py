"""The rejected envelopes of a file workspace: ``queue/rejected/<role>-<name>.json``, each with
its ``.reason`` beside it (as ``files.file_queue`` sets them aside), listed and put back in
``queue/<role>/<name>.json``, the name they were queued under (so they keep their place).

A file whose name starts with no role of the team is listed as a stray (``purge-strays`` names
them ``<folder>-<file>``) and never put back: no role reads where it came from."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence

import msgspec

from teams_runtime.codecs.roles import ROLES
from teams_runtime.exceptions import TeamsRuntimeError
from teams_runtime.storage.files._envelope_names import QUEUED_NAME
from teams_runtime.storage.local_files import folder, read_file
from teams_runtime.storage.rejected import RejectedEnvelope
from teams_runtime.storage.workspace import Workspace

__all__ = ["FileRejectedShelf"]

_REASON_CHARS = 500  # of a .reason file, shown: reasons are one content-free line


class _Named(msgspec.Struct):
    request_id: str = ""


def _request_id(data: bytes) -> str:
    try:
        named = msgspec.json.decode(data, type=_Named)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        return ""
    return named.request_id


def _queued_as(envelope: RejectedEnvelope) -> str:
    """The name ``envelope`` was queued under (a stray's: its name here)."""
    return envelope.name[len(envelope.role) + 1 :] if envelope.role else envelope.name


class FileRejectedShelf:
    """``queue/rejected/`` of one workspace (read and moved without following links)."""

    def __init__(self, workspace: Workspace, roles: Sequence[str] = ROLES) -> None:
        self.workspace = workspace
        # Longest first: a role's name may hold a "-" (`code-review`), and another role's
        # name may be its start (`code`).
        self._roles = sorted(roles, key=len, reverse=True)
        self._runtime = workspace.runtime_dir
        self._folder = workspace.queue_dir / "rejected"

    def _names(self) -> list[str]:
        try:
            with folder(self._folder, self._runtime, create=False) as dfd:
                names = os.listdir(dfd)
        except FileNotFoundError:
            return []
        return sorted(n for n in names if n.endswith(".json") and not n.startswith("."))

    def _read(self, name: str) -> bytes:
        try:
            return read_file(self._folder / name, self._runtime)
        except OSError:
            return b""  # put back or removed meanwhile, or not a file: said as unknown

    def listing(self) -> list[RejectedEnvelope]:
        found = []
        for name in self._names():
            role = next((r for r in self._roles if name.startswith(f"{r}-")), "")
            # A name that starts with no role of the team: a stray `purge-strays` set aside
            # (`<folder>-<file>`), or the envelope of a role that left the team. Either way no
            # role reads where it would go back to.
            named = QUEUED_NAME.fullmatch(name[len(role) + 1 :]) if role else None
            request_id = named["request_id"] if named else _request_id(self._read(name))
            reason = self._read(f"{name}.reason").decode("utf-8", "replace").strip()
            found.append(
                RejectedEnvelope(
                    role=role,
                    request_id=request_id,
                    name=name,
                    reason=reason[:_REASON_CHARS],
                    stray=not role,
                )
            )
        # The queue's names start with the time they were queued at: oldest first (a stray's
        # name is as its folder's and file's were: by name, after the others).
        return sorted(found, key=lambda envelope: (envelope.stray, _queued_as(envelope)))

    def requeue(self, request_id: str | None = None) -> int:
        moved = 0
        for envelope in self.listing():
            if envelope.stray or (request_id is not None and envelope.request_id != request_id):
                continue  # a stray stays: no role reads where it came from
            queued_as = _queued_as(envelope)
            try:
                with (
                    folder(self._folder, self._runtime, create=False) as src,
                    folder(self.workspace.role_queue(envelope.role), self._runtime) as dst,
                ):
                    os.rename(envelope.name, queued_as, src_dir_fd=src, dst_dir_fd=dst)
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(f"{envelope.name}.reason", dir_fd=src)
            except FileNotFoundError:
                continue  # put back by someone else meanwhile
            except OSError as exc:
                raise TeamsRuntimeError(
                    f"{self._folder / envelope.name}: cannot be put back in the queue "
                    f"({exc.strerror or exc}); {moved} put back before it."
                ) from None
            moved += 1
        return moved
