"""A person's role (``model.backend: human``) as workers handle it: no model call; its
envelopes wait in the team's inbox (``storage.protocols.AnswerInbox``) for
``teams-runtime answer`` (``person_answers``).

- ``wait_for_person``: a worker puts the envelope it claimed in the inbox, then acks the claim,
  so no lease is held while a person thinks (days, maybe), and no worker needs to run then.
- ``tidy_inbox``: what waits is looked at again, by a serving worker (its own people's roles)
  and by ``teams-runtime inbox`` (all of them). A waiting answer whose outcome is recorded (an
  answer that crashed before it removed it) is finished; one whose request ended (cancelled,
  failed) is removed; one whose ``answer_within`` ran out is handled by its role's
  ``model.on_failure``: ``fail`` records ``answer_timed_out`` and fails the request (keyed by
  the envelope, like an answer: of the two, whichever writes first is recorded, once);
  ``requeue`` lets it wait again for another ``answer_within``.

Logs are content-free: roles, request and envelope ids, counts.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection

import anyio
import msgspec

from teams_runtime._logs import logger
from teams_runtime.actors.context import ContextHandle
from teams_runtime.actors.roles._outcome_writes import (
    OutcomeWriter,
    outcome_key,
    queue_recorded_follow_up,
)
from teams_runtime.codecs.config import DEFAULT_CAST, Cast, ModelConfig
from teams_runtime.codecs.envelopes import MessageEnvelope
from teams_runtime.codecs.formats import now_iso
from teams_runtime.codecs.waiting_answers import WaitingAnswer
from teams_runtime.exceptions import RecordError, StorageError, TeamsRuntimeError
from teams_runtime.policy.outcomes import plan_for, plan_no_answer, state_of
from teams_runtime.storage import AnswerInbox, Claim, WorkQueue

__all__ = [
    "HUMAN",
    "InboxLook",
    "Overdue",
    "handle_overdue",
    "is_person",
    "tidy_inbox",
    "wait_for_person",
]

HUMAN = "human"  # the model backend of a person's role


class InboxLook(msgspec.Struct, frozen=True):
    """What one look at the inbox found: what still waits, oldest first, and the answers
    whose ``answer_within`` ran out at this look: ``timed_out`` (``on_failure: fail``: this
    look failed their requests) and ``renewed`` (``requeue``: they wait again, in ``waiting``
    too). Who looked says so: ``run``'s summary, ``inbox``'s notes."""

    waiting: list[WaitingAnswer]
    timed_out: list[WaitingAnswer] = []
    renewed: list[WaitingAnswer] = []


class Overdue(msgspec.Struct, frozen=True, kw_only=True):
    """What handling an answer whose ``answer_within`` ran out did: the answer as it waits
    again (``None`` when it left the inbox), and whether this look failed the request (not an
    answer or another look that came first)."""

    waiting: WaitingAnswer | None
    failed: bool


def is_person(model: ModelConfig) -> bool:
    """Whether a role with ``model`` is a person's: its answers come from ``answer``."""
    return model.backend == HUMAN


async def wait_for_person(
    inbox: AnswerInbox,
    queue: WorkQueue,
    claim: Claim,
    envelope: MessageEnvelope,
    model: ModelConfig,
) -> None:
    """Put ``envelope`` in the inbox (due after the role's ``answer_within``), then ack its
    claim. Put twice (a crash between the two), it waits once, since when it was first put."""
    now = time.time()
    within = model.answer_seconds
    item = WaitingAnswer(envelope=envelope, since=now, due=None if within is None else now + within)
    put = await inbox.put(item)
    await queue.done(claim)
    logger.bind(role=envelope.target, request_id=envelope.request_id).info(
        "{}: request {} waits for a person's answer (envelope {}{})",
        envelope.target,
        envelope.request_id,
        envelope.envelope_id,
        "" if put else ", waiting already",
    )


async def _settled(
    context: ContextHandle,
    queue: WorkQueue,
    inbox: AnswerInbox,
    item: WaitingAnswer,
    cast: Cast,
) -> bool:
    """Finish ``item`` if its outcome is recorded, its request ended, or it was asked for an
    older epoch of the request (cancelled and reopened since); whether it did. One whose
    record cannot be read is left waiting (``answer`` then says why)."""
    try:
        recorded = await context.recall(item.request_id, outcome_key(item.role, item.envelope))
        if recorded:
            await queue_recorded_follow_up(
                context, queue, item.role, item.envelope, recorded, cast=cast
            )
        else:
            state = state_of(await context.project(item.request_id))
            if not state.ended and not state.is_stale(item.envelope):
                return False
    except RecordError:
        return False
    await inbox.remove(item)
    return True


def ran_out_within(item: WaitingAnswer, model: ModelConfig, now: float) -> float:
    """The ``answer_within`` that ran out for ``item``, in seconds: the one fixed when it was
    put in the inbox (its due less its since), not the config's now, which may have changed
    meanwhile. A renewed one keeps no such span (its due was set at the renewal): the role's
    ``answer_within`` now, if any."""
    if item.due is not None and item.renewals == 0:
        # Rounded: the two times are floats of ~1.7e9, whose difference is off by ~1e-7.
        return round(item.due - item.since, 3)
    return model.answer_seconds or max((item.due or now) - item.since, 1.0)


async def handle_overdue(
    context: ContextHandle,
    queue: WorkQueue,
    inbox: AnswerInbox,
    item: WaitingAnswer,
    model: ModelConfig,
    now: float,
) -> Overdue:
    """Handle ``item``, whose ``answer_within`` ran out, by its role's ``on_failure``."""
    log = logger.bind(role=item.role, request_id=item.request_id)
    within = ran_out_within(item, model, now)
    if model.on_failure == "requeue":
        # It waits again for the role's answer_within now (the config may have changed).
        again_within = model.answer_seconds or within
        again = msgspec.structs.replace(item, due=now + again_within, renewals=item.renewals + 1)
        await inbox.renew(again)
        log.warning(
            "{}: no answer for request {} within {:g} s; it waits again (renewal {})",
            item.role,
            item.request_id,
            within,
            again.renewals,
        )
        return Overdue(waiting=again, failed=False)
    failure = plan_no_answer(item.role, within, now_iso(), item.envelope)
    state = state_of(await context.project(item.request_id))
    writer = OutcomeWriter(item.role, context=context, queue=queue)
    # Shielded, as a model's outcome is: a stop (SIGTERM) that lands between the write and
    # the removal would leave the entry waiting for a failed request, and say nothing.
    with anyio.CancelScope(shield=True):
        written = await writer.record(
            item.envelope, lambda at: plan_for(at, failure, item.envelope), state
        )
        await inbox.remove(item)
        if written.applied:
            log.warning(
                "{}: no answer for request {} within {:g} s; the request failed",
                item.role,
                item.request_id,
                within,
            )
    return Overdue(waiting=None, failed=written.applied)


async def tidy_inbox(
    context: ContextHandle,
    queue: WorkQueue,
    inbox: AnswerInbox,
    model_for: Callable[[str], ModelConfig],
    roles: Collection[str] | None = None,
    *,
    cast: Cast = DEFAULT_CAST,
) -> InboxLook:
    """Look at every waiting answer (of ``roles``; all when ``None``; ``cast``: the team):
    finish those answered or ended, apply ``on_failure`` (``model_for(role)``'s) to the
    overdue; what still waits, and what ran out (``InboxLook``). A problem with one (the store
    busy) leaves it for the next look."""
    waiting: list[WaitingAnswer] = []
    timed_out: list[WaitingAnswer] = []
    renewed: list[WaitingAnswer] = []
    for item in await inbox.items():
        if roles is not None and item.role not in roles:
            continue
        try:
            if await _settled(context, queue, inbox, item, cast):
                continue
            now = time.time()
            if item.overdue(now):
                model = model_for(item.role)
                overdue = await handle_overdue(context, queue, inbox, item, model, now)
                if overdue.waiting is None:
                    if overdue.failed:
                        timed_out.append(item)
                    continue
                item = overdue.waiting
                renewed.append(item)
        except (TeamsRuntimeError, OSError) as exc:
            logger.bind(role=item.role, request_id=item.request_id).warning(
                "{}: the waiting answer of request {} was not looked at ({}); trying again",
                item.role,
                item.request_id,
                # The line names the error as before StorageError was renamed (issue 30).
                "BackendError" if isinstance(exc, StorageError) else type(exc).__name__,
            )
        waiting.append(item)
    return InboxLook(waiting, timed_out, renewed)
