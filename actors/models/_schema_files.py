"""The contract's JSON schema as a file for one model command's call
(``TEAMS_RUNTIME_RESULT_SCHEMA``): CLIs such as ``codex exec --output-schema`` take a path.

The file is private to the call (mode 0600, not in the workspace), holds only the schema
(``result_schema.generation_schema``: the call's request id and role, the team's roles; no
request content) and is removed when the call ends. It lives in its worker's own folder,
``<temporary folder>/teams-runtime-<uid>/schemas-<host>-<pid>/`` (the parent mode 0700, checked
to be this user's): a worker killed with ``kill -9`` cannot remove its files, so each worker
that starts removes the folders of this host's workers that no longer run
(``clear_dead_workers``).
"""

from __future__ import annotations

import contextlib
import os
import platform
import shutil
import stat
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import msgspec

from teams_runtime.codecs.model import generation_schema
from teams_runtime.policy.prompts import PromptBundle

__all__ = ["clear_dead_workers", "schema_file", "schemas_root"]

_PREFIX = "schemas-"


def schemas_root() -> Path:
    """This user's folder of workers' schema folders, in the system's temporary folder."""
    return Path(tempfile.gettempdir()) / f"teams-runtime-{os.getuid()}"


def _private_folder(path: Path) -> Path:
    """``path``, made if missing (mode 0700); raises ``OSError`` if it is not a folder of
    this user's that only they may enter (a link, another's: someone else's trap)."""
    with contextlib.suppress(FileExistsError):
        path.mkdir(mode=0o700)
    found = path.lstat()
    if not stat.S_ISDIR(found.st_mode) or found.st_uid != os.getuid() or found.st_mode & 0o077:
        raise PermissionError(f"{path} is not a private folder of this user's")
    return path


def _worker_folder(host: str, pid: int) -> str:
    return f"{_PREFIX}{host}-{pid}"


def _write(data: bytes) -> str:
    root = _private_folder(schemas_root())
    folder = _private_folder(root / _worker_folder(platform.node(), os.getpid()))
    fd, path = tempfile.mkstemp(prefix="teams-runtime-schema-", suffix=".json", dir=folder)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    return path


def _remove(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: running
        return True
    return True


def clear_dead_workers() -> int:
    """Remove the schema folders of this host's workers that no longer run (killed before
    they could remove their files); how many (blocking: a worker calls it as it starts).
    Never raises: a folder that cannot be read or removed is left."""
    host = platform.node()
    mine = f"{_PREFIX}{host}-"
    cleared = 0
    try:
        root = _private_folder(schemas_root())
        entries = list(root.iterdir())
    except OSError:
        return 0
    for entry in entries:
        pid = entry.name.removeprefix(mine)
        if entry.name.startswith(mine) and pid.isdigit() and not _running(int(pid)):
            shutil.rmtree(entry, ignore_errors=True)
            cleared += 1
    return cleared


@contextlib.asynccontextmanager
async def schema_file(bundle: PromptBundle) -> AsyncIterator[str]:
    """The path of a file holding the schema of ``bundle``'s answer, for as long as the
    ``async with`` lasts (removed after it, shielded from cancellation)."""
    schema = generation_schema(
        bundle.reply_kind,
        request_id=bundle.request_id,
        role=bundle.role,
        next_roles=bundle.next_roles,
        output=bundle.output,
    )
    path = await anyio.to_thread.run_sync(_write, msgspec.json.encode(schema))
    try:
        yield path
    finally:
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(_remove, path)
