"""Writing a role's outcome: one compare-and-set append, its follow-up, then the dequeue.

The plan is decided from the request's state (``policy.outcomes.RequestState``: its ``hops``
and ``status``) and the append expects the record to hold that state still. When another
worker moved the request on meanwhile (a hand-off counted, the hop limit reached, a cancel),
the store refuses the append and answers the state it holds now; the plan is decided again
from that, without a read and without asking the model again. So ``hops`` counts each
hand-off once, the hop limit fails a request once, and a request that ended gets only the
role's report, whatever number of workers share it.
"""

from __future__ import annotations

from collections.abc import Callable

import anyio
import msgspec

from teams_runtime._logs import logger
from teams_runtime.actors.context import ContextHandle
from teams_runtime.codecs.config import DEFAULT_CAST, Cast
from teams_runtime.codecs.envelopes import MessageEnvelope
from teams_runtime.codecs.formats import JsonObject
from teams_runtime.exceptions import TeamsRuntimeError
from teams_runtime.policy.outcomes import OutcomePlan, RequestState, recorded_follow_up, state_of
from teams_runtime.storage import Claim, WorkQueue

__all__ = [
    "MAX_RACES",
    "NotSaved",
    "OutcomeWriter",
    "Recorded",
    "outcome_key",
    "queue_recorded_follow_up",
]

# Refusals in a row before the write is given up (the envelope is deferred): each one means
# another writer changed the request, so this takes that many writers on one request at once.
MAX_RACES = 64


class NotSaved(Exception):
    """The outcome could not be persisted: the envelope is deferred for another try."""


class Recorded(msgspec.Struct, frozen=True, kw_only=True):
    """What writing an outcome did: the plan written, the state it was decided from (the one
    the write found), and whether this write recorded it (``False``: the envelope's outcome
    was recorded before, by another delivery or another answer)."""

    plan: OutcomePlan
    state: RequestState
    applied: bool


def outcome_key(role: str, envelope: MessageEnvelope) -> str:
    """What ``role``'s outcome of ``envelope`` is recorded under (``append_key``)."""
    return f"{role}/{envelope.envelope_id}"


async def queue_recorded_follow_up(
    context: ContextHandle,
    queue: WorkQueue,
    role: str,
    envelope: MessageEnvelope,
    recorded: list[JsonObject],
    *,
    cast: Cast = DEFAULT_CAST,
) -> None:
    """Queue again the envelope an outcome already recorded (``recorded``: its events) handed
    on: the crash that left its envelope undone may have come before the follow-up was
    queued (``cast``: the team; nothing to a role it no longer has). Not once the follow-up is
    handled or the request has ended. (Its id is derived from ``envelope``'s: a copy queued
    twice is recorded once.)"""
    request_id = envelope.request_id
    follow_up = recorded_follow_up(role, envelope, recorded, cast)
    if follow_up is None:
        return
    state = state_of(await context.project(request_id))
    # Made in the epoch its parent was (one queued before epochs: the current one).
    follow_up = msgspec.structs.replace(
        follow_up, epoch=envelope.epoch if envelope.epoch is not None else state.epoch_number
    )
    if (
        not state.ended
        and not state.is_stale(follow_up)
        and not await context.recall(request_id, outcome_key(follow_up.target, follow_up))
    ):
        await queue.put(follow_up)


class OutcomeWriter:
    """Persists the outcomes of one role."""

    def __init__(self, role: str, *, context: ContextHandle, queue: WorkQueue) -> None:
        self.role = role
        self._context = context
        self._queue = queue
        self._log = logger.bind(role=role)

    async def persist(
        self,
        envelope: MessageEnvelope,
        claim: Claim,
        decide: Callable[[RequestState], OutcomePlan],
        state: RequestState,
    ) -> Recorded:
        """Write the plan ``decide`` makes of the request's ``state`` (decided again from the
        state a refused write answers), queue its follow-up, then dequeue: shielded from
        cancellation. On failure the envelope stays queued (``NotSaved``)."""
        try:
            with anyio.CancelScope(shield=True):
                recorded = await self.record(envelope, decide, state)
                await self._queue.done(claim)
        except (TeamsRuntimeError, OSError) as exc:  # e.g. disk full, stopping: nothing lost
            self._log.bind(request_id=envelope.request_id).error(
                "{}: outcome for request {} not saved ({}); its envelope is deferred",
                self.role,
                envelope.request_id,
                exc,
            )
            raise NotSaved from exc
        return recorded

    async def record(
        self,
        envelope: MessageEnvelope,
        decide: Callable[[RequestState], OutcomePlan],
        state: RequestState,
    ) -> Recorded:
        """Write the plan ``decide`` makes of ``state`` (decided again from the state a
        refused write answers) and queue its follow-up. What ``decide`` raises, and the
        store's errors, are raised."""
        recorded = await self._write(envelope, decide, state)
        plan = recorded.plan
        # Not applied: another delivery of this envelope recorded its outcome and queued its
        # follow-up already (a worker that hung past its lease, a second answer).
        if plan.follow_up is not None and recorded.applied:
            await self._queue.put(plan.follow_up)
        if plan.drop_queued and recorded.applied:
            await self._queue.drop(envelope.request_id)
        return recorded

    async def _write(
        self,
        envelope: MessageEnvelope,
        decide: Callable[[RequestState], OutcomePlan],
        state: RequestState,
    ) -> Recorded:
        for _ in range(MAX_RACES):
            plan = decide(state)
            # Keyed by the envelope: a retry after a timeout, or a second delivery, is not
            # written twice. Expecting the state it was decided from: checked under the
            # record's lock (the head's revision on NATS), so no other write slips in between.
            appended = await self._context.append_keyed(
                envelope.request_id,
                plan.events_json(),
                updates=plan.updates_json(),
                key=outcome_key(self.role, envelope),
                expect=state.expected(),
            )
            if not appended.refused:
                return Recorded(plan=plan, state=state, applied=appended.applied)
            state = RequestState.of(appended.fields)
        raise TeamsRuntimeError(
            f"request {envelope.request_id}: other writers changed it {MAX_RACES} times in a "
            "row while this outcome was being written; nothing was written (retried later)."
        )
