"""Trying again what failed (``teams-runtime retry``): a failed request's last step, and
envelopes set aside as rejected.

A failing outcome keeps the envelope whose step failed in the record (``FAILED_ENVELOPE``:
a model that failed every call, a role's result that said ``failed``, the hop limit). A
retry writes a ``retried`` event and makes the request ``in_progress`` for that role through
the ContextActor, like any outcome (a compare-and-set on ``status: failed``, so two retries at
once queue it once), then queues a copy of the envelope under a new id: the old one's outcome
is recorded, and a second delivery of it would be recognised and skipped. A request that
failed before envelopes were kept is retried with its own fields (scope, body, ...) for its
``current_role``. Rejected envelopes go back to their queues as they were
(``storage.rejected``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import anyio
import msgspec

from teams_runtime.actors.context import ContextHandle, open_context
from teams_runtime.codecs.envelopes import MessageEnvelope
from teams_runtime.codecs.events import RecordUpdates, event_json, updates_json
from teams_runtime.codecs.formats import now_iso
from teams_runtime.codecs.projection_reply import Projection
from teams_runtime.codecs.request_ids import check_request_id
from teams_runtime.codecs.request_records import EVENTS_KEY
from teams_runtime.codecs.roles import ROLES
from teams_runtime.exceptions import RequestStateError, TeamsRuntimeError
from teams_runtime.policy import events
from teams_runtime.policy.outcomes import FAILED_ENVELOPE, follow_up_id, state_of
from teams_runtime.storage import WorkQueue, Workspace
from teams_runtime.storage.opening import open_storage, workspace_config

__all__ = ["Retried", "requeue_rejected", "retry_failed", "retry_with"]


class Retried(msgspec.Struct, frozen=True):
    """What ``retry_failed`` did: the role queued again and the envelope's new id;
    ``resumed``: an earlier retry's, whose queue put this one made sure of."""

    request_id: str
    role: str
    envelope_id: str
    resumed: bool = False


def _kept_envelope(projection: Projection, roles: Sequence[str]) -> MessageEnvelope | None:
    """The envelope the failing outcome kept, else one made of the record's own fields."""
    kept = projection.value(FAILED_ENVELOPE)
    if isinstance(kept, dict):
        try:
            return msgspec.convert(kept, MessageEnvelope)
        except msgspec.ValidationError:
            pass  # edited by hand into something else: the record's fields below
    role = projection.value("current_role")
    if not isinstance(role, str) or role not in roles:
        return None

    def text(key: str, default: str = "") -> str:
        value = projection.value(key)
        return value if isinstance(value, str) else default

    artifacts = projection.value("artifacts")
    params = projection.value("params")
    return MessageEnvelope(
        request_id=projection.request_id,
        sender="user",
        target=role,
        intent=text("intent"),
        urgency=text("urgency", "normal"),
        scope=text("scope"),
        artifacts=[str(item) for item in artifacts] if isinstance(artifacts, list) else [],
        params=params if isinstance(params, dict) else {},
        body=text("body"),
    )


async def retry_with(
    context: ContextHandle,
    queue: WorkQueue,
    request_id: str,
    *,
    max_hops: int,
    roles: Sequence[str] = ROLES,
) -> Retried:
    """Queue a failed request's last envelope again (see the module's docstring). Raises
    ``RequestStateError`` (nothing written) when the request has not failed, failed at the
    hop limit that still holds (``max_hops``), or names no role of the team (``roles``) to
    retry."""
    request_id = check_request_id(request_id)
    projection = await context.project(request_id)
    state = state_of(projection)
    interrupted = _unqueued_retry(projection, state.epoch_number, roles)
    if interrupted is not None:  # a retry stopped between its `retried` and its queue put
        await queue.put(interrupted)  # one envelope per id: nothing new if it is queued
        return Retried(request_id, interrupted.target, interrupted.envelope_id, resumed=True)
    failed = _retryable_envelope(projection, request_id, max_hops, roles)
    now = now_iso()
    # A retry starts the request's next epoch: the new envelope is made for it.
    epoch = state.epoch_number + 1
    # A new id: the old envelope's outcome (the failure) is recorded under its own.
    envelope = msgspec.structs.replace(
        failed,
        envelope_id=follow_up_id(failed.envelope_id, f"retry-{projection.total_events}"),
        epoch=epoch,
    )
    role = envelope.target
    # The kept envelope is spent (null): prompts of the request do not carry it on.
    updates = RecordUpdates(status="in_progress", current_role=role, next_role=role,
                            updated_at=now, failed_envelope=None, epoch=epoch)  # fmt: skip
    appended = await context.append_keyed(
        request_id,
        [event_json(events.retried(now, envelope, failed.envelope_id))],
        updates=updates_json(updates),
        expect={"status": "failed", "epoch": state.epoch},
    )
    if appended.refused:
        raise RequestStateError(
            f"request {request_id} changed while it was being retried (another retry or "
            "submit); nothing was queued by this one."
        )
    try:
        await queue.put(envelope)
    except TeamsRuntimeError as exc:
        await _undo(context, request_id, role, now)
        raise TeamsRuntimeError(
            f"the envelope for {role} could not be queued ({exc}); request {request_id} is "
            "failed again: run the same retry once the queue takes it."
        ) from None
    return Retried(request_id, role, envelope.envelope_id)


def _unqueued_retry(
    projection: Projection, epoch: int, roles: Sequence[str]
) -> MessageEnvelope | None:
    """The envelope of the request's newest event when that is a ``retried`` of this epoch
    (its step has recorded nothing since): the retry may have stopped before queueing it."""
    if projection.value("status") != "in_progress" or not projection.total_events:
        return None
    newest = msgspec.json.decode(projection.fields[EVENTS_KEY])[-1]
    payload = newest.get("payload") if isinstance(newest, dict) else None
    if newest.get("type") != "retried" or not isinstance(payload, dict):
        return None
    try:
        envelope = msgspec.convert(payload.get("envelope"), MessageEnvelope)
    except msgspec.ValidationError:
        return None  # written before retries kept their envelope, or edited by hand
    return envelope if envelope.epoch == epoch and envelope.target in roles else None


def _retryable_envelope(
    projection: Projection, request_id: str, max_hops: int, roles: Sequence[str]
) -> MessageEnvelope:
    """The envelope to queue again for a request that may be retried; a
    ``RequestStateError`` (nothing written) saying why when it may not."""
    state = state_of(projection)
    if state.status != "failed":
        shown = state.status if isinstance(state.status, str) and state.status else "no status"
        raise RequestStateError(
            f"request {request_id} is {shown}, not failed: only a failed request is retried "
            "(`teams-runtime submit --reopen` gives a finished one more work)."
        )
    if state.count >= max_hops:
        raise RequestStateError(
            f"request {request_id} has had {state.count} hand-offs, team.max_hops is "
            f"{max_hops}: a retry would stop at the hop limit again; raise team.max_hops in "
            "team_runtime.yaml first."
        )
    failed = _kept_envelope(projection, roles)
    if failed is None:
        raise RequestStateError(
            f"request {request_id} keeps no envelope to retry and its current_role names no "
            "role; give it new work with `teams-runtime submit --reopen`."
        )
    if failed.target not in roles:  # the role left the team since: refused before any write
        raise RequestStateError(
            f"request {request_id} failed at role {failed.target!r}, which the team no longer "
            f"has (its roles: {', '.join(roles)}); nothing was written. Put the role back in "
            "team.roles to retry it, or give the request new work with "
            "`teams-runtime submit --reopen --role ROLE`."
        )
    return failed


async def _undo(context: ContextHandle, request_id: str, role: str, now: str) -> None:
    """Make the request failed again after its envelope could not be queued, unless it moved
    on meanwhile (so `retry` can be run again, and `status` does not show it in progress)."""
    event = events.retry_not_queued(now, role)
    await context.append_keyed(
        request_id,
        [event_json(event)],
        updates=updates_json(RecordUpdates(status="failed")),
        expect={"status": "in_progress"},
    )


async def retry_failed(workspace: str | Path, request_id: str, *, max_hops: int) -> Retried:
    """``retry_with`` on the workspace's store and queue, open for this call."""
    root = Workspace(workspace)
    config = await anyio.to_thread.run_sync(workspace_config, root)
    async with (
        open_storage(root, config) as storage,
        open_context(root.root, store=storage.store) as context,
    ):
        return await retry_with(
            context, storage.queue, request_id, max_hops=max_hops, roles=config.cast.names
        )


async def requeue_rejected(workspace: str | Path, request_id: str | None) -> int:
    """Put the rejected envelopes of ``request_id`` (``None``: all) back in their queues;
    how many."""
    async with open_storage(Workspace(workspace)) as storage:
        moved: int = await storage.rejected.requeue(request_id)
    return moved
