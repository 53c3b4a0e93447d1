"""Reading the away files of model servers (``.teams_runtime/servers/``, one per worker waiting
for a server, written by ``actors.models._servers``): ``status``, another process, sees which
servers the running workers wait for. No logging here: ``status`` starts without loguru."""

from __future__ import annotations

import os
import platform

import msgspec

from teams_runtime.codecs.server_records import (
    SERVERS_FOLDER,
    ServerAway,
    decode_server_away,
)
from teams_runtime.storage.local_files import is_temp_name, read_file
from teams_runtime.storage.protocols import Stray
from teams_runtime.storage.workspace import Workspace

__all__ = ["server_strays", "servers_away"]


def _running_here(record: ServerAway, host: str) -> bool:
    """Whether the worker that wrote ``record`` may still be running (one on another host
    sharing the folder cannot be checked: it counts)."""
    if record.host != host:
        return True
    try:
        os.kill(record.pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: it is running
        return True
    return True


def servers_away(workspace: Workspace) -> list[ServerAway]:
    """The servers (and the models on a server) some running worker of this workspace is
    waiting for, one entry per server or model (the earliest ``away_since``), by URL and then
    model (a whole server first). Files that cannot be read, or whose worker is gone (a
    worker killed while waiting), are skipped."""
    folder = workspace.runtime_dir / SERVERS_FOLDER
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return []
    host = platform.node()
    earliest: dict[tuple[str, str], ServerAway] = {}  # ("", a whole server) sorts first
    for name in names:
        if not name.endswith(".json"):
            continue
        try:
            record = decode_server_away(read_file(folder / name, workspace.runtime_dir))
        except (OSError, msgspec.DecodeError):
            continue
        if not _running_here(record, host):
            continue
        key = (record.base_url, record.model or "")
        known = earliest.get(key)
        if known is None or record.away_since < known.away_since:
            earliest[key] = record
    return [earliest[key] for key in sorted(earliest)]


def server_strays(workspace: Workspace) -> list[Stray]:
    """The entries of the servers folder that are no away file a worker writes (another
    program's, or a file that is not one any more): ``servers_away`` skips them."""
    folder = workspace.runtime_dir / SERVERS_FOLDER
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return []
    strays = []
    for name in names:
        if is_temp_name(name):
            continue  # a worker writing one (atomically) right now
        try:
            decode_server_away(read_file(folder / name, workspace.runtime_dir))
            if name.endswith(".json"):
                continue
        except (OSError, msgspec.DecodeError):
            pass
        reason = "not a model server's away file as a worker writes it; skipped"
        strays.append(Stray(where=str(folder / name), reason=reason))
    return strays
