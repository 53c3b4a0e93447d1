"""A person's answers: what ``teams-runtime inbox`` lists and shows, and what
``teams-runtime answer`` records.

A person's result is held to the contract a model of that role is held to
(``codecs.model._contract``: the role's prompt kind in the team's cast decides which, and its
``hands_to`` what it may name as ``next_role``), and recorded through the same
path: ``policy.outcomes.plan_outcome`` decided from the request's ``hops`` and ``status``, one
compare-and-set append keyed by the envelope (``outcome_writes``), then the follow-up queued.
So an answer is recorded once: a second one finds the key and is refused, even when two hosts
answer at the same moment (the store decides under its lock or at the head's revision). An
answer to a request cancelled or failed meanwhile is refused, and nothing is written.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import anyio
import msgspec

from teams_runtime.actors.context import ContextHandle, open_context
from teams_runtime.actors.roles._outcome_writes import (
    OutcomeWriter,
    outcome_key,
    queue_recorded_follow_up,
)
from teams_runtime.actors.roles._person_waits import InboxLook, handle_overdue, tidy_inbox
from teams_runtime.codecs.config import DEFAULT_CAST, Cast, TeamConfig
from teams_runtime.codecs.formats import now_iso
from teams_runtime.codecs.model import ResearchDecision, RoleResult, validate_reply
from teams_runtime.codecs.statuses import ResultStatus
from teams_runtime.codecs.waiting_answers import WaitingAnswer
from teams_runtime.exceptions import AnswerRefused, UnknownRequestError
from teams_runtime.policy.deliverables import carried_output
from teams_runtime.policy.outcomes import (
    OutcomePlan,
    RequestState,
    in_epoch,
    plan_outcome,
    research_result,
    state_of,
    status_of,
)
from teams_runtime.policy.prompts import PromptBundle, build_prompt, reply_kind_of
from teams_runtime.storage import AnswerInbox, WorkQueue, Workspace
from teams_runtime.storage.opening import open_storage

__all__ = [
    "Answered",
    "answer",
    "person_result",
    "pick_waiting",
    "read_inbox",
    "record_answer",
    "waiting_prompt",
]


class Answered(msgspec.Struct, frozen=True, kw_only=True):
    """What ``answer`` recorded: whose answer, its status, where the request went."""

    request_id: str
    role: str
    envelope_id: str
    status: ResultStatus  # the result's
    handed_to: str  # the role an envelope was queued for ("" when none)
    request_status: str  # the record's status after the answer


class _NothingWaits(Exception):
    """No waiting answer has the id asked for."""


def pick_waiting(items: Sequence[WaitingAnswer], wanted: str, role: str | None) -> WaitingAnswer:
    """The waiting answer ``wanted`` names: an envelope id, or a request id with one answer
    waiting (of ``role``, if given). Raises ``AnswerRefused`` when several match."""
    matches = [item for item in items if item.envelope_id == wanted]
    matches = matches or [item for item in items if item.request_id == wanted]
    if role is not None:
        matches = [item for item in matches if item.role == role]
    if not matches:
        raise _NothingWaits(wanted)
    if len(matches) > 1:
        each = ", ".join(f"{item.envelope_id} ({item.role})" for item in matches)
        raise AnswerRefused(
            f"{len(matches)} answers wait for request {wanted}: {each}; name one by its "
            "envelope id, or give --role."
        )
    return matches[0]


async def _waiting_item(
    inbox: AnswerInbox,
    context: ContextHandle,
    wanted: str,
    role: str | None,
    envelope_id: str | None = None,
) -> WaitingAnswer:
    """``pick_waiting`` over what waits in ``inbox`` now (the envelope ``envelope_id`` only,
    when given); when nothing matches, the refusal says why, as the request's record tells."""
    items = await inbox.items()
    try:
        if envelope_id is not None:
            return _expected(items, wanted, envelope_id, role)
        return pick_waiting(items, wanted, role)
    except _NothingWaits:
        raise await _nothing_waits(context, wanted) from None


def _expected(
    items: Sequence[WaitingAnswer], wanted: str, envelope_id: str, role: str | None
) -> WaitingAnswer:
    """The waiting answer of envelope ``envelope_id`` (the question its person saw) under
    ``wanted``: ``AnswerRefused`` when another envelope waits there now (the one seen was
    answered, and the request came back with a new question)."""
    mine = [i for i in items if wanted in (i.request_id, i.envelope_id)]
    mine = [i for i in mine if role is None or i.role == role]
    for item in mine:
        if item.envelope_id == envelope_id:
            return item
    if mine:
        raise AnswerRefused(
            f"request {wanted}: the question you saw was answered; a new one waits: reload "
            f"(envelope {mine[0].envelope_id} waits, not {envelope_id}). Nothing was recorded."
        )
    raise _NothingWaits(wanted)


async def _nothing_waits(context: ContextHandle, wanted: str) -> AnswerRefused:
    """Why nothing waits under ``wanted``, as the request's record says."""
    listed = "`teams-runtime inbox` lists what waits"
    try:
        projection = await context.project(wanted)
    except UnknownRequestError:
        return AnswerRefused(f"no answer waits for {wanted}: no request or waiting envelope has "
                             f"that id; {listed}.")  # fmt: skip
    status = status_of(projection) or "none"
    events = projection.value("events")
    last = events[-1] if isinstance(events, list) and events else None
    if isinstance(last, dict) and last.get("type") == "answer_timed_out":
        return AnswerRefused(_too_late(wanted))
    if state_of(projection).ended:
        return AnswerRefused(f"request {wanted} is {status}: no answer waits for it.")
    return AnswerRefused(
        f"no answer waits for request {wanted} (status {status}): it was answered already, or "
        f"no person's role has it now; {listed}."
    )


def _too_late(request_id: str) -> str:
    return (
        f"request {request_id} failed: no answer came within its answer_within, so this one "
        f"was not recorded (`teams-runtime retry {request_id}` puts it in the inbox again)."
    )


def _cast_role(cast: Cast, item: WaitingAnswer) -> str:
    """``item``'s role, which must still be one of the team's (``cast``)."""
    if item.role not in cast.roles:
        raise AnswerRefused(
            f"request {item.request_id} waits for the {item.role} role, which the team no "
            f"longer has (its roles are: {', '.join(cast.names)}); nothing was recorded."
        )
    return item.role


def person_result(
    item: WaitingAnswer,
    given: Mapping[str, Any],
    cast: Cast = DEFAULT_CAST,
    *,
    whole: bool = False,
) -> RoleResult:
    """The result ``given`` (fields from flags, or a ``whole`` result from a file) as the
    role's contract in ``cast`` (the team) takes it, its ``request_id`` and ``role`` filled in
    when ``given`` leaves them out: its prompt kind's contract, and a ``next_role`` among the
    role's ``hands_to``. ``AnswerRefused`` listing every issue when it breaks the contract."""
    role = _cast_role(cast, item)
    result = {"request_id": item.request_id, "role": role, **given}
    kind = cast.prompt_kind_of(role)
    checked = validate_reply(
        msgspec.json.encode(result).decode(),
        kind=reply_kind_of(kind),
        request_id=item.request_id,
        role=role,
        next_roles=cast.next_roles(role),
    )
    answer = checked.answer
    if answer is None:
        raise AnswerRefused(
            f"the answer breaks the {item.role} role's contract, so it was not recorded: "
            + " ".join(checked.issues)
            + " (`teams-runtime inbox show` prints the contract"
            + (")." if whole else "; give a whole result with --from FILE).")
        )
    if isinstance(answer, ResearchDecision):
        return research_result(item.role, answer)
    return answer


def _answer_plan(
    item: WaitingAnswer, result: RoleResult, now: str, *, max_hops: int, cast: Cast, carried: Any
) -> Callable[[RequestState], OutcomePlan]:
    """How ``item``'s answer is decided from the request's state: ``AnswerRefused`` when the
    request ended, or moved on to a later epoch (cancelled, failed, reopened, retried) since
    the answer was asked for."""

    def decide(state: RequestState) -> OutcomePlan:
        if state.ended:
            raise AnswerRefused(
                f"request {item.request_id} was {state.ended} meanwhile; the answer was not "
                "recorded."
            )
        if state.is_stale(item.envelope):
            raise AnswerRefused(
                f"request {item.request_id} was cancelled, failed, reopened or retried since "
                "this answer was asked for; it was not recorded (`teams-runtime inbox` lists "
                "what waits now)."
            )
        plan = plan_outcome(
            item.role,
            item.envelope,
            result,
            now,
            hops=state.count,
            max_hops=max_hops,
            cast=cast,
            carried=carried,
        )
        return in_epoch(state, plan)

    return decide


async def record_answer(
    context: ContextHandle,
    queue: WorkQueue,
    inbox: AnswerInbox,
    item: WaitingAnswer,
    result: RoleResult,
    *,
    max_hops: int,
    cast: Cast = DEFAULT_CAST,
) -> Answered:
    """Record ``result`` (checked by ``person_result``) as ``item``'s outcome in the team
    ``cast``, queue what it hands on, and take ``item`` out of the inbox. Raises
    ``AnswerRefused`` (nothing written) when its outcome is recorded already or its request
    ended."""
    request_id, role = item.request_id, item.role
    with anyio.CancelScope(shield=True):  # a Ctrl-C mid-write leaves nothing half done
        recorded = await context.recall(request_id, outcome_key(role, item.envelope))
        if recorded:  # answered before, and that answer stopped short of removing it
            await queue_recorded_follow_up(context, queue, role, item.envelope, recorded, cast=cast)
            await inbox.remove(item)
            raise AnswerRefused(f"request {request_id}: the {role} answer is recorded already; "
                                "this one was not.")  # fmt: skip
        projection = await context.project(request_id)
        state = state_of(projection)
        decide = _answer_plan(
            item,
            result,
            now_iso(),
            max_hops=max_hops,
            cast=cast,
            carried=carried_output(projection),
        )
        writer = OutcomeWriter(role, context=context, queue=queue)
        try:
            written = await writer.record(item.envelope, decide, state)
        except AnswerRefused:
            await inbox.remove(item)  # its request ended, or moved on
            raise
        await inbox.remove(item)
    if not written.applied:
        raise AnswerRefused(
            f"request {request_id}: another answer to the {role} role was recorded at the "
            "same moment; this one was not."
        )
    follow_up = written.plan.follow_up
    return Answered(
        request_id=request_id,
        role=role,
        envelope_id=item.envelope_id,
        status=result.status,
        handed_to=follow_up.target if follow_up is not None else "",
        request_status=str(written.plan.updates.get("status", "")),
    )


async def answer(
    workspace: Workspace,
    config: TeamConfig,
    wanted: str,
    given: Mapping[str, Any],
    *,
    role: str | None = None,
    whole: bool = False,
    envelope_id: str | None = None,
) -> Answered:
    """Record a person's answer to the waiting envelope ``wanted`` names (``pick_waiting``),
    on the workspace's storage: ``given`` is the result's fields (``person_result``; a
    ``whole`` result, from a file). With ``envelope_id`` (the question the person saw), only
    that envelope's answer is recorded: the outcome is keyed by it, so a newer question
    waiting under ``wanted`` is refused, never answered by mistake."""
    async with (
        open_storage(workspace, config) as storage,
        open_context(workspace.root, config.prompt_context, store=storage.store) as context,
    ):
        item = await _waiting_item(storage.inbox, context, wanted, role, envelope_id)
        now = time.time()
        if item.overdue(now):  # the deadline holds, whoever looks first: apply it now
            model = config.model_for(item.role)
            overdue = await handle_overdue(context, storage.queue, storage.inbox, item, model, now)
            if overdue.waiting is None and overdue.failed:
                raise AnswerRefused(_too_late(item.request_id))
            if overdue.waiting is None:  # another answer, or another look, came first
                raise await _nothing_waits(context, item.request_id)
            item = overdue.waiting  # `requeue`: it waits again, and this answer is in time
        result = person_result(item, given, config.cast, whole=whole)
        return await record_answer(
            context,
            storage.queue,
            storage.inbox,
            item,
            result,
            max_hops=config.team.max_hops,
            cast=config.cast,
        )


async def read_inbox(workspace: Workspace, config: TeamConfig) -> InboxLook:
    """What waits for people now, oldest first, once the inbox is tidied (``tidy_inbox``:
    answered and ended ones finished, overdue ones handled by their role's ``on_failure``,
    which ``InboxLook`` reports)."""
    async with (
        open_storage(workspace, config) as storage,
        open_context(workspace.root, config.prompt_context, store=storage.store) as context,
    ):
        return await tidy_inbox(
            context, storage.queue, storage.inbox, config.model_for, cast=config.cast
        )


async def waiting_prompt(
    workspace: Workspace, config: TeamConfig, wanted: str, role: str | None = None
) -> tuple[WaitingAnswer, PromptBundle]:
    """The waiting answer ``wanted`` names and the prompt a model of its role would get for
    it now (the same projection and envelope); writes nothing."""
    async with (
        open_storage(workspace, config) as storage,
        open_context(workspace.root, config.prompt_context, store=storage.store) as context,
    ):
        item = await _waiting_item(storage.inbox, context, wanted, role)
        role = _cast_role(config.cast, item)
        projection = await context.project(item.request_id)
        kind = config.cast.prompt_kind_of(role)
        return item, build_prompt(
            kind, role=role, projection=projection, envelope=item.envelope, cast=config.cast
        )
