"""What users put in: new work (``teams-runtime submit``, the demo's seeding) and
cancellations (``teams-runtime cancel``).

More work for a request that has finished (``completed``, ``failed``) or was ``cancelled``
reopens it, which is done only when asked (``reopen``): work sent to the wrong id should not
quietly bring back a request that was over. A ``blocked`` request takes more work as it is
(that work is what it waits for)."""

from __future__ import annotations

import secrets
from datetime import datetime
from pathlib import Path

import anyio
import msgspec

from teams_runtime.actors.context import ContextHandle, open_context
from teams_runtime.actors.roles import MAX_RACES
from teams_runtime.codecs.config import Cast
from teams_runtime.codecs.envelopes import MessageEnvelope
from teams_runtime.codecs.events import Event, RecordUpdates, event_json, updates_json
from teams_runtime.codecs.formats import now_iso
from teams_runtime.codecs.request_ids import check_request_id
from teams_runtime.codecs.request_records import RecordFields
from teams_runtime.codecs.statuses import FINISHED
from teams_runtime.exceptions import RequestStateError, TeamsRuntimeError
from teams_runtime.policy import events
from teams_runtime.policy.outcomes import (
    FAILED_ENVELOPE,
    RequestState,
    in_epoch,
    plan_cancel,
    state_of,
)
from teams_runtime.storage import WorkQueue, Workspace
from teams_runtime.storage.opening import open_storage, workspace_config

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
    reopened: str = ""  # the status it had, when this work reopened a finished request


def new_request_id() -> str:
    """A fresh, safe request id: ``req-YYYYMMDD-HHMMSS-xxxx``."""
    return f"req-{datetime.now():%Y%m%d-%H%M%S}-{secrets.token_hex(2)}"


def check_new_work(cast: Cast, role: str) -> str:
    """Return ``role`` if ``submit`` may queue new work for it: a role of the team whose work
    does not come only from a hand-off (a ``version_control`` role: the hand-off says what to
    commit). Else ``ValueError`` naming the roles that take new work."""
    if role not in cast.takes_new_work:
        choices = ", ".join(cast.takes_new_work)
        if role in cast.roles:
            raise ValueError(
                f"role {role!r} takes no new work: its prompt_kind is version_control, so its "
                f"work comes from a hand-off that says what to commit; choose one of: {choices}"
            )
        raise ValueError(
            f"unknown role {role!r}; choose one of: {choices}"
            + cast.guess(role, cast.takes_new_work)
        )
    return role


def new_record(envelope: MessageEnvelope, now: str, by: str = "orchestrator") -> RecordFields:
    """The record of a new request: status ``queued``, events ``created`` and ``delegated``,
    credited to ``by`` (``Cast.intake_actor``)."""
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
        "owner_role": by,
        "created_at": now,
        "updated_at": now,
        "result": {},
        "events": [
            event_json(events.created(now, by)),
            event_json(events.handed_on(now, by, envelope.target)),
        ],
    }


async def _extend(
    context: ContextHandle, envelope: MessageEnvelope, now: str, *, reopen: bool, by: str
) -> tuple[str, int]:
    """Add the ``delegated`` event of more work to an existing request (and ``reopened``
    first, for a finished one, which moves it to its next epoch); the status it reopened from,
    or ``""``, and the epoch the work is for. Decided from the status and epoch the write
    replaces (a compare-and-set), so a request that finishes meanwhile is not reopened unasked.
    Raises ``RequestStateError`` for a finished one without ``reopen``."""
    request_id = envelope.request_id
    state = state_of(await context.project(request_id))
    for _ in range(MAX_RACES):
        status = state.status if isinstance(state.status, str) else ""
        finished = status in FINISHED
        if finished and not reopen:
            raise RequestStateError(
                f"request {request_id} is {status}; more work would reopen it: give --reopen "
                "to do so. Nothing was queued."
            )
        written: list[Event] = [events.reopened(now, status)] if finished else []
        written.append(events.handed_on(now, by, envelope.target))
        updates = RecordUpdates(status="queued", current_role=envelope.target, updated_at=now)
        if status == "failed":  # the failed step is not retried now: its envelope is spent
            updates[FAILED_ENVELOPE] = None
        # A reopen starts the next epoch: what the request's last one left (a call still under
        # way, an answer still waiting) is stale from here on, never applied.
        epoch = state.epoch_number + 1 if finished else state.epoch_number
        if finished:
            updates["epoch"] = epoch
        appended = await context.append_keyed(
            request_id,
            [event_json(event) for event in written],
            updates=updates_json(updates),
            expect={"status": state.status, "epoch": state.epoch},
        )
        if not appended.refused:
            return (status if finished else ""), epoch
        state = RequestState.of(appended.fields)
    raise TeamsRuntimeError(
        f"request {request_id}: other writers changed its status {MAX_RACES} times in a row; "
        "nothing was queued (submit again)."
    )


async def submit_with(
    context: ContextHandle,
    queue: WorkQueue,
    envelope: MessageEnvelope,
    *,
    reopen: bool = False,
    by: str = "orchestrator",
) -> Submission:
    """Create or extend the request's record, then queue the envelope (in that order). A
    finished request (``FINISHED``) is extended only with ``reopen``; else
    ``RequestStateError`` and nothing is written. ``by``: who the new events credit
    (``Cast.intake_actor``)."""
    now = now_iso()
    created = await context.create(envelope.request_id, new_record(envelope, now, by))
    reopened, epoch = "", 0
    if not created:
        reopened, epoch = await _extend(context, envelope, now, reopen=reopen, by=by)
    envelope = msgspec.structs.replace(envelope, epoch=epoch)
    ticket = await queue.put(envelope)
    return Submission(envelope.request_id, created, ticket, reopened)


async def submit(
    workspace: str | Path,
    *,
    role: str,
    scope: str,
    body: str = "",
    intent: str = "",
    urgency: str = "normal",
    request_id: str | None = None,
    reopen: bool = False,
) -> Submission:
    """Queue work for ``role``, a role of the workspace's team that takes new work
    (``check_new_work``): a new request, or more work on an existing one (one that has
    finished or was cancelled only with ``reopen``: see ``submit_with``)."""
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
        open_storage(root, config) as storage,
        open_context(root.root, store=storage.store) as context,
    ):
        return await submit_with(
            context, storage.queue, envelope, reopen=reopen, by=config.cast.intake_actor
        )


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
        open_storage(root) as storage,
        open_context(root.root, store=storage.store) as context,
    ):
        already = await _cancel(context, request_id)
        dropped = await storage.queue.drop(request_id)
    return Cancellation(request_id, already, dropped)


async def _cancel(context: ContextHandle, request_id: str) -> bool:
    """Write the cancel, moving the request to its next epoch in the same compare-and-set as
    its status (a call under way, an answer waiting, are stale from then on); whether it was
    cancelled already (nothing written). Raises ``UnknownRequestError`` for an unknown id."""
    state = state_of(await context.project(request_id))
    for _ in range(MAX_RACES):
        if state.status == "cancelled":
            return True
        plan = in_epoch(state, plan_cancel(now_iso()))
        appended = await context.append_keyed(
            request_id,
            plan.events_json(),
            updates=plan.updates_json(),
            expect=dict(state.expected()),
        )
        if not appended.refused:
            return False
        state = RequestState.of(appended.fields)
    raise TeamsRuntimeError(
        f"request {request_id}: other writers changed it {MAX_RACES} times in a row while it "
        "was being cancelled; nothing was written (cancel again)."
    )
