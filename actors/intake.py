"""What users put in: new work (``teams-runtime submit``, the demo's seeding) and
cancellations (``teams-runtime cancel``)."""

from __future__ import annotations

import secrets
from datetime import datetime
from pathlib import Path
from typing import Any

import anyio
import msgspec

from teams_runtime.actors.context import ContextHandle, open_context
from teams_runtime.codecs.config import Cast
from teams_runtime.codecs.envelopes import MessageEnvelope
from teams_runtime.codecs.formats import now_iso
from teams_runtime.codecs.request_ids import check_request_id
from teams_runtime.policy.outcomes import plan_cancel, status_of
from teams_runtime.storage import WorkQueue, Workspace
from teams_runtime.storage.backends import open_backend, workspace_config

__all__ = [
    "Cancellation",
    "Submission",
    "cancel",
    "check_new_work",
    "new_record",
    "new_request_id",
    "submit",
    "submit_with",
]


class Submission(msgspec.Struct, frozen=True):
    """What ``submit`` did."""

    request_id: str
    created: bool
    envelope_path: str  # the queue's name for the envelope: its file, for the file queue


def new_request_id() -> str:
    """A fresh, safe request id: ``req-YYYYMMDD-HHMMSS-xxxx``."""
    return f"req-{datetime.now():%Y%m%d-%H%M%S}-{secrets.token_hex(2)}"


def check_new_work(cast: Cast, role: str) -> str:
    """Return ``role`` if ``submit`` may queue new work for it: a role of the team whose work
    does not come only from a hand-off (a ``version_control`` role: the hand-off says what to
    commit). Else ``ValueError`` naming the roles that take new work."""
    if role not in cast.takes_new_work:
        why = " for new work (its work comes from a hand-off)" if role in cast.roles else ""
        choices = ", ".join(cast.takes_new_work)
        raise ValueError(f"unknown role {role!r}{why}; choose one of: {choices}")
    return role


def _delegated(role: str, now: str) -> dict[str, Any]:
    return {
        "timestamp": now,
        "type": "delegated",
        "actor": "orchestrator",
        "summary": f"orchestrator handed the request to {role}",
        "payload": {"from_role": "orchestrator", "to_role": role},
    }


def new_record(envelope: MessageEnvelope, now: str) -> dict[str, Any]:
    """The record of a new request: status ``queued``, events ``created`` and ``delegated``."""
    return {
        "request_id": envelope.request_id,
        "status": "queued",
        "intent": envelope.intent,
        "urgency": envelope.urgency,
        "scope": envelope.scope,
        "body": envelope.body,
        "artifacts": envelope.artifacts,
        "params": envelope.params,
        "current_role": envelope.target,
        "next_role": envelope.target,
        "owner_role": "orchestrator",
        "created_at": now,
        "updated_at": now,
        "result": {},
        "events": [
            {
                "timestamp": now,
                "type": "created",
                "actor": "orchestrator",
                "summary": "request created",
            },
            _delegated(envelope.target, now),
        ],
    }


async def submit_with(
    context: ContextHandle, queue: WorkQueue, envelope: MessageEnvelope
) -> Submission:
    """Create or extend the request's record, then queue the envelope (in that order)."""
    now = now_iso()
    created = await context.create(envelope.request_id, new_record(envelope, now))
    if not created:
        await context.append_event(
            envelope.request_id,
            _delegated(envelope.target, now),
            updates={"status": "queued", "current_role": envelope.target, "updated_at": now},
        )
    ticket = await anyio.to_thread.run_sync(queue.put, envelope)
    return Submission(envelope.request_id, created, ticket)


async def submit(
    workspace: str | Path,
    *,
    role: str,
    scope: str,
    body: str = "",
    intent: str = "",
    urgency: str = "normal",
    request_id: str | None = None,
) -> Submission:
    """Queue work for ``role``, a role of the workspace's team that takes new work
    (``check_new_work``): a new request, or more work on an existing one."""
    root = Workspace(workspace)
    config = await anyio.to_thread.run_sync(workspace_config, root)
    check_new_work(config.cast, role)
    envelope = MessageEnvelope(
        request_id=check_request_id(request_id or new_request_id()),
        sender="user",
        target=role,
        intent=intent,
        urgency=urgency,
        scope=scope,
        body=body,
    )
    async with (  # the workspace's store and queue, open for this submit (NATS connects)
        open_backend(root, config) as backend,
        open_context(root.root, store=backend.store) as context,
    ):
        return await submit_with(context, backend.queue, envelope)


class Cancellation(msgspec.Struct, frozen=True):
    """What ``cancel`` did."""

    request_id: str
    already: bool  # it was cancelled before: nothing was written
    dropped: int  # queued envelopes removed


async def cancel(workspace: str | Path, request_id: str) -> Cancellation:
    """Cancel a request: drop its queued envelopes and mark it ``cancelled`` with an event.

    An envelope a worker holds now finishes its model call; its outcome is then recorded
    without handing the request on. Raises ``UnknownRequestError`` for an unknown id.
    """
    request_id = check_request_id(request_id)  # NFC, as the record's file and envelopes are named
    root = Workspace(workspace)
    async with (  # the workspace's store and queue, open for this cancel (NATS connects)
        open_backend(root) as backend,
        open_context(root.root, store=backend.store) as context,
    ):
        already = status_of(await context.project(request_id)) == "cancelled"
        if not already:
            plan = plan_cancel(now_iso())
            await context.append_events(request_id, plan.events, updates=plan.updates)
        dropped = await anyio.to_thread.run_sync(backend.queue.drop, request_id)
    return Cancellation(request_id, already, dropped)
