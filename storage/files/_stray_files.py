"""Files in a workspace's records and queue folders that teams-runtime did not write: found for
``status`` (each with a one-line reason), passed over by every reader, and, for envelopes in a
folder no role reads, set aside by ``purge-strays`` (docs/operations.md, "Strays").

What the runtime writes: ``requests/<id>.json`` and its ``.lock`` (a safe id in NFC form);
``queue/<role>/``, ``queue/deferred/<role>/`` and ``queue/claimed/<worker>/<role>/`` holding
``*.json`` envelope files; ``queue/workers/<worker>.lease``; ``queued/<32 hex>``, the markers
of queued envelope ids; temp files of its atomic writes (``.<name>~<pid>.<hex>.tmp``, there for
milliseconds) anywhere. ``queue/rejected/`` is for a
person and not looked at. Every folder is listed without following links.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Collection, Iterator
from pathlib import Path

from teams_runtime.codecs.request_ids import check_request_id
from teams_runtime.exceptions import TeamsRuntimeError, UnsafeRequestIdError
from teams_runtime.storage.files._envelope_names import queued_request_id
from teams_runtime.storage.files._lease_files import WORKER_NAME
from teams_runtime.storage.local_files import folder, is_temp_name, write_atomic
from teams_runtime.storage.protocols import Stray
from teams_runtime.storage.workspace import Workspace

__all__ = ["is_record_name", "marker_strays", "queue_strays", "record_strays", "set_aside_unread"]

_KEPT_FOR_PEOPLE = frozenset({"rejected"})
_QUEUE_FOLDERS = frozenset({"claimed", "deferred", "rejected", "workers"})
_SKIPPED = "skipped"
_MARKER_NAME = re.compile(r"[0-9a-f]{32}")  # a digest of a role and an envelope id


def _listing(place: Path, runtime: Path) -> list[os.DirEntry[str]]:
    """The entries of ``place``, by name (none if it is missing or cannot be opened)."""
    try:
        with folder(place, runtime, create=False) as dfd, os.scandir(dfd) as entries:
            return sorted(entries, key=lambda entry: entry.name)
    except (OSError, TeamsRuntimeError):
        return []


def _is_folder(entry: os.DirEntry[str]) -> bool:
    return entry.is_dir(follow_symlinks=False)


def _is_file(entry: os.DirEntry[str]) -> bool:
    return entry.is_file(follow_symlinks=False)


def is_record_name(name: str) -> bool:
    """Whether ``name`` is a record file's (``<id>.json``, the id safe and in NFC form)."""
    stem = name.removesuffix(".json")
    if stem == name:
        return False
    try:
        return check_request_id(stem) == stem
    except UnsafeRequestIdError:
        return False


# --- the records folder ---------------------------------------------------------------------


def record_strays(workspace: Workspace) -> list[Stray]:
    """The files of ``requests/`` that are no record, lock or temp file of one."""
    strays = []
    for entry in _listing(workspace.requests_dir, workspace.runtime_dir):
        name = entry.name
        if is_record_name(name) or is_record_name(name.removesuffix(".lock")) or is_temp_name(name):
            continue
        if name.endswith(".json"):
            reason = "its name is no safe request id in NFC form: not a record teams-runtime reads"
        else:
            reason = "not a record file (<request id>.json) or its lock"
        strays.append(
            Stray(where=str(workspace.requests_dir / name), reason=f"{reason}; {_SKIPPED}")
        )
    return strays


# --- the queue folders ----------------------------------------------------------------------


def queue_strays(workspace: Workspace, roles: Collection[str]) -> list[Stray]:
    """The files and folders of ``queue/`` that are no envelope, claim folder or lease of the
    team's ``roles``; a folder no role reads counts the envelopes left in it."""
    runtime, root = workspace.runtime_dir, workspace.queue_dir
    strays: list[Stray] = []
    for entry in _listing(root, runtime):
        place = root / entry.name
        if entry.name in _KEPT_FOR_PEOPLE:
            continue
        if not _is_folder(entry):
            strays.append(_not_a_folder(place, "a folder of the queue"))
        elif entry.name in roles:
            strays += _envelope_folder(place, runtime)
        elif entry.name == "deferred":
            strays += _role_folders(place, runtime, roles, deferred=True)
        elif entry.name == "claimed":
            for worker in _listing(place, runtime):
                if _is_folder(worker):
                    strays += _role_folders(place / worker.name, runtime, roles)
                else:
                    strays.append(_not_a_folder(place / worker.name, "a worker's claim folder"))
        elif entry.name == "workers":
            strays += _lease_folder(place, runtime)
        else:
            strays += _unread(place, runtime)
    return strays


def marker_strays(workspace: Workspace) -> list[Stray]:
    """What ``queued/`` holds that is no marker of a queued envelope id (``_queued_ids``): a
    put of that id goes on unguarded while it is there."""
    place = workspace.runtime_dir / "queued"
    return [
        Stray(where=str(place / entry.name), reason=f"not a queued-id marker; {_SKIPPED}")
        for entry in _listing(place, workspace.runtime_dir)
        if not (
            _is_file(entry) and (_MARKER_NAME.fullmatch(entry.name) or is_temp_name(entry.name))
        )
    ]


def _not_a_folder(place: Path, what: str) -> Stray:
    return Stray(where=str(place), reason=f"not {what}; {_SKIPPED}")


def _role_folders(
    place: Path, runtime: Path, roles: Collection[str], *, deferred: bool = False
) -> list[Stray]:
    strays: list[Stray] = []
    for entry in _listing(place, runtime):
        if not _is_folder(entry):
            strays.append(_not_a_folder(place / entry.name, "a role's folder"))
        elif entry.name in roles:
            strays += _envelope_folder(place / entry.name, runtime, deferred=deferred)
        else:
            strays += _unread(place / entry.name, runtime)
    return strays


def _envelope_folder(place: Path, runtime: Path, *, deferred: bool = False) -> list[Stray]:
    """The strays of a role's folder; in a ``deferred`` one, which only the runtime fills,
    also every ``*.json`` of a name the queue never gives."""
    strays = []
    for entry in _listing(place, runtime):
        name = entry.name
        ours = not deferred or queued_request_id(name) is not None
        if is_temp_name(name) or (_is_file(entry) and _is_envelope_name(name) and ours):
            continue
        if not ours and _is_envelope_name(name):
            reason = (
                "not a deferred envelope the runtime wrote (<time>-<hex>-<request id>.json); "
                f"never restored; {_SKIPPED}"
            )
        elif _is_envelope_name(name):
            reason = "not a regular file: the worker that claims it sets it aside"
        else:
            reason = f"not an envelope file (*.json); {_SKIPPED}"
        strays.append(Stray(where=str(place / name), reason=reason))
    return strays


def _is_envelope_name(name: str) -> bool:
    return name.endswith(".json") and not name.startswith(".")


def _envelopes_in(place: Path, runtime: Path) -> list[str]:
    entries = _listing(place, runtime)
    return [entry.name for entry in entries if _is_file(entry) and _is_envelope_name(entry.name)]


def _unread(place: Path, runtime: Path) -> list[Stray]:
    """The folder of a role the team does not have, unless it is empty: a role removed from
    ``team.roles`` leaves its folders, and an empty one holds nothing to lose."""
    try:
        with folder(place, runtime, create=False) as dfd:
            if not os.listdir(dfd):
                return []
    except (OSError, TeamsRuntimeError):
        pass  # a folder that cannot be read is named all the same
    return [
        Stray(
            where=f"{place}/",
            reason=f"no role of the team is named {place.name!r}: nothing reads it",
            envelopes=len(_envelopes_in(place, runtime)),
        )
    ]


def _lease_folder(place: Path, runtime: Path) -> list[Stray]:
    strays = []
    for entry in _listing(place, runtime):
        worker = entry.name.removesuffix(".lease")
        if is_temp_name(entry.name) or (
            _is_file(entry) and worker != entry.name and WORKER_NAME.fullmatch(worker)
        ):
            continue
        reason = f"not a worker's lease (<worker>.lease, a regular file); {_SKIPPED}"
        strays.append(Stray(where=str(place / entry.name), reason=reason))
    return strays


# --- setting envelopes aside ----------------------------------------------------------------


def _unread_folders(workspace: Workspace, roles: Collection[str]) -> Iterator[Path]:
    """The folders of envelopes no role reads: ``queue/<x>/``, ``queue/deferred/<x>/`` and
    ``queue/claimed/<worker>/<x>/`` for an ``x`` that is no role of the team."""
    runtime, root = workspace.runtime_dir, workspace.queue_dir
    owners = [root / "deferred"]  # the folders whose folders are named by role
    for entry in _listing(root, runtime):
        if entry.name == "claimed":
            claimed = _listing(root / "claimed", runtime)
            owners += [root / "claimed" / worker.name for worker in claimed if _is_folder(worker)]
        elif _is_folder(entry) and entry.name not in {*roles, *_QUEUE_FOLDERS}:
            yield root / entry.name
    for owner in owners:
        for entry in _listing(owner, runtime):
            if _is_folder(entry) and entry.name not in roles:
                yield owner / entry.name


def set_aside_unread(workspace: Workspace, roles: Collection[str]) -> int:
    """Move every envelope file in a folder no role reads to ``queue/rejected/`` (named
    ``<folder>-<file>``, with a ``.reason`` file beside it); returns how many."""
    runtime = workspace.runtime_dir
    rejected = workspace.queue_dir / "rejected"
    moved = 0
    for place in _unread_folders(workspace, roles):
        reason = f"{place}/: no role of the team is named {place.name!r}: nothing reads it.\n"
        for name in _envelopes_in(place, runtime):
            with (
                contextlib.suppress(FileNotFoundError),  # taken meanwhile (by a person)
                folder(place, runtime, create=False) as src,
                folder(rejected, runtime) as dst,
            ):
                target = _free_name(f"{place.name}-{name}", dst)
                os.rename(name, target, src_dir_fd=src, dst_dir_fd=dst)
                write_atomic(rejected / f"{target}.reason", reason.encode(), runtime=runtime)
                moved += 1
    return moved


def _free_name(name: str, dfd: int) -> str:
    """``name``, or ``<n>-name`` for the first ``n`` no file in the folder ``dfd`` has: two
    folders may hold envelopes of one name, and a move must not replace one with another."""
    candidate, number = name, 0
    while True:
        try:
            os.stat(candidate, dir_fd=dfd, follow_symlinks=False)
        except FileNotFoundError:
            return candidate
        number += 1
        candidate = f"{number}-{name}"
