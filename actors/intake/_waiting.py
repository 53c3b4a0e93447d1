"""What users get back: a request waited for until it settles (``wait_for_request``), and how it
stands then (``RequestOutcome``: its status and the last role's result), for an app that
submits work and needs its answer.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio
import msgspec

from teams_runtime.storage import RecordStore, Workspace
from teams_runtime.storage.opening import open_storage, workspace_config

__all__ = ["SETTLED", "RequestOutcome", "wait_for_request", "wait_with"]

# The statuses a request keeps until someone acts: the team's work on it is over (completed,
# failed, cancelled), or it waits for more work (blocked).
SETTLED = frozenset({"completed", "blocked", "failed", "cancelled"})


class RequestOutcome(msgspec.Struct, frozen=True, kw_only=True):
    """How a settled request stands: ``status`` (``completed``, ``blocked``, ``failed`` or
    ``cancelled``), the role it was at, its hand-offs, and ``result``: the last role's result
    as the record keeps it (``status``, ``summary``, ``insights``, ... ``{}`` when none)."""

    request_id: str
    status: str
    current_role: str
    hops: int
    result: dict[str, Any]


async def wait_for_request(
    workspace: str | Path, request_id: str, *, poll_interval: float = 0.2
) -> RequestOutcome:
    """Wait until ``request_id`` of the workspace settles (``SETTLED``), and return how it
    stands. It opens the workspace's store for the wait (its own, beside a running Team's),
    reading the record every ``poll_interval`` seconds; it waits however long that takes
    (put it under ``anyio.fail_after``). Raises ``UnknownRequestError`` for a request that
    does not exist, ``RecordError`` for one that cannot be read."""
    root = Workspace(workspace)
    config = await anyio.to_thread.run_sync(workspace_config, root)
    async with open_storage(root, config) as storage:
        return await wait_with(storage.store, request_id, poll_interval=poll_interval)


async def wait_with(
    store: RecordStore, request_id: str, *, poll_interval: float = 0.2
) -> RequestOutcome:
    """``wait_for_request`` on an open store: the record read (its fields and newest event
    only) every ``poll_interval`` seconds until its status is settled."""
    while True:
        fields = (await store.read(request_id, tail=1)).fields
        status = fields.get("status")
        if isinstance(status, str) and status in SETTLED:
            return _outcome(request_id, status, fields)
        # A poll: the store's `version` cannot tell of a write from another process on every
        # backend (on NATS it knows the revisions it has seen), and a read is one index look-up.
        await anyio.sleep(poll_interval)


def _outcome(request_id: str, status: str, fields: Mapping[str, Any]) -> RequestOutcome:
    role, hops, result = fields.get("current_role"), fields.get("hops"), fields.get("result")
    return RequestOutcome(
        request_id=request_id,
        status=status,
        current_role=role if isinstance(role, str) else "",
        hops=hops if type(hops) is int else 0,
        result=result if isinstance(result, dict) else {},
    )
