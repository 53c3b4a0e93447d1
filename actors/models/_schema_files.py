"""The contract's JSON schema as a file for one model command's call
(``TEAMS_RUNTIME_RESULT_SCHEMA``): CLIs such as ``codex exec --output-schema`` take a path.

The file is private to the call (mode 0600, in the system's temporary folder, not the
workspace), holds only the schema (``result_schema.generation_schema``: the call's request id
and role, the team's roles; no request content) and is removed when the call ends.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import AsyncIterator

import anyio
import msgspec

from teams_runtime.codecs.model import generation_schema
from teams_runtime.policy.prompts import PromptBundle

__all__ = ["schema_file"]


def _write(data: bytes) -> str:
    fd, path = tempfile.mkstemp(prefix="teams-runtime-schema-", suffix=".json")
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    return path


def _remove(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)


@contextlib.asynccontextmanager
async def schema_file(bundle: PromptBundle) -> AsyncIterator[str]:
    """The path of a file holding the schema of ``bundle``'s answer, for as long as the
    ``async with`` lasts (removed after it, shielded from cancellation)."""
    schema = generation_schema(
        bundle.reply_kind,
        request_id=bundle.request_id,
        role=bundle.role,
        next_roles=bundle.next_roles,
    )
    path = await anyio.to_thread.run_sync(_write, msgspec.json.encode(schema))
    try:
        yield path
    finally:
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(_remove, path)
