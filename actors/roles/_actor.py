"""Role actors: one per role, turning claimed envelopes into persisted role results.

For each envelope a role asks the model for a valid result (``role_calls``: the projection,
the prompt, the contract, at most two repair prompts, each re-projected) and persists the
outcome in one compare-and-set write (``outcome_writes``). A result naming ``next_role``
queues an envelope for it. The envelope leaves the queue only after all of that, so a crash
means it is handled again; an envelope whose request ended meanwhile (cancelled, or failed by
another worker's outcome) is dropped without a model call. A person's role (``human``) asks no
model: its envelope waits in the inbox for ``teams-runtime answer`` (``person_waits``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import anyio
from anyio.abc import TaskGroup, TaskStatus

from teams_runtime._logs import logger
from teams_runtime.actors._locks import RequestLocks
from teams_runtime.actors._mailbox import Mailbox, MailboxStatistics
from teams_runtime.actors.context import ContextHandle
from teams_runtime.actors.models import ModelBackend, ServerFacts, Toolbox
from teams_runtime.actors.roles._calls import RequestEnded, RoleCalls
from teams_runtime.actors.roles._outcome_writes import (
    NotSaved,
    OutcomeWriter,
    outcome_key,
    queue_recorded_follow_up,
)
from teams_runtime.actors.roles._person_waits import is_person, wait_for_person
from teams_runtime.actors.telemetry import traced_envelope
from teams_runtime.codecs.config import DEFAULT_CAST, Cast, ModelConfig, PromptBudget, RateCard
from teams_runtime.codecs.envelopes import MessageEnvelope
from teams_runtime.codecs.events import PROMPT_TOO_LARGE
from teams_runtime.codecs.formats import now_iso
from teams_runtime.codecs.prompt_records import PromptRecord
from teams_runtime.exceptions import (
    ActorStopped,
    AskTimeout,
    ModelFailure,
    PromptTooLarge,
    StorageError,
    TeamsRuntimeError,
)
from teams_runtime.policy.deliverables import carried_output
from teams_runtime.policy.outcomes import (
    OutcomePlan,
    RequestState,
    plan_for,
    plan_model_failure,
    plan_outcome,
    state_of,
)
from teams_runtime.policy.token_counts import LearnedRatios
from teams_runtime.storage import AnswerInbox, Claim, WorkQueue, Workspace

__all__ = ["Outcome", "RoleActor", "Working", "outcome_key"]

# "waiting": the envelope went to the inbox, for a person's answer.
Outcome = Literal["done", "failed", "deferred", "rejected", "waiting"]


@dataclass(frozen=True, slots=True)
class Working:
    """One envelope a role is handling now: the request's id and when the role took it
    (``anyio.current_time()``). Content-free by design: what a live view may show."""

    request_id: str
    since: float


class RoleActor:
    """Handles the claimed envelopes of one role, several requests at a time."""

    def __init__(
        self,
        role: str,
        *,
        model: ModelConfig,
        max_hops: int = 40,
        workspace: Workspace,
        context: ContextHandle,
        backend: ModelBackend,
        queue: WorkQueue,
        locks: RequestLocks,
        on_finished: Callable[[Claim, Outcome], None],
        on_prompt: Callable[[PromptRecord], None] | None = None,
        concurrency: int = 4,
        inbox_size: int = 256,
        rate_card: RateCard | None = None,
        inbox: AnswerInbox | None = None,
        cast: Cast = DEFAULT_CAST,
        budget: PromptBudget | None = None,
        ratios: LearnedRatios | None = None,
        facts: ServerFacts | None = None,
        mcp: Toolbox | None = None,
    ) -> None:
        if is_person(model) and inbox is None:
            raise ValueError(f"the {role} role is a person's (model.backend: human): give an inbox")
        self.role = role
        self._cast = cast  # the team the role is one of
        self._model = model
        self._max_hops = max_hops
        self._context = context
        self._queue = queue
        self._locks = locks
        self._on_finished = on_finished
        self._calls = RoleCalls(
            role,
            model=model,
            workspace=workspace,
            context=context,
            backend=backend,
            on_prompt=on_prompt,
            rate_card=rate_card,
            cast=cast,
            budget=budget,
            ratios=ratios,
            facts=facts,
            mcp=mcp,
        )
        self._writer = OutcomeWriter(role, context=context, queue=queue)
        self._inbox = inbox  # where a person's role puts its envelopes
        self._slots = anyio.Semaphore(concurrency)
        self._mailbox: Mailbox[Claim] = Mailbox(role, inbox_size)
        self._group: TaskGroup | None = None
        self._working: dict[str, Working] = {}  # by claim ticket
        self._log = logger.bind(role=role)

    async def tell(self, claim: Claim) -> None:
        """Hand a claimed envelope to this role; waits while its mailbox is full."""
        await self._mailbox.tell(claim)

    def statistics(self) -> MailboxStatistics:
        """The role's inbox: envelopes waiting, served, in flight."""
        return self._mailbox.statistics()

    def working(self) -> list[Working]:
        """The envelopes being handled now, oldest first (a copy; cheap, no I/O)."""
        return sorted(self._working.values(), key=lambda work: work.since)

    def stop(self) -> None:
        """Take no more envelopes; ``serve`` returns when the ones being handled are done."""
        self._mailbox.stop()

    async def serve(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Handle envelopes until ``stop``; start it with ``task_group.start``."""
        async with anyio.create_task_group() as group:
            self._group = group
            await self._mailbox.serve(self._start_work, task_status=task_status)

    async def _start_work(self, claim: Claim) -> None:
        # Waits for a free slot, so a busy role stops taking from its inbox (backpressure).
        await self._slots.acquire()
        assert self._group is not None
        self._group.start_soon(self._work, claim)

    async def _work(self, claim: Claim) -> None:
        request_id = claim.envelope.request_id if claim.envelope is not None else "-"
        self._working[claim.ticket] = Working(request_id, anyio.current_time())
        try:
            outcome = await traced_envelope(self.role, claim.envelope, self._outcome_of(claim))
        except Exception as exc:  # a bug must not take the team down: keep the envelope
            self._log.bind(request_id=request_id).opt(exception=exc).error(
                "{}: envelope {} of request {} deferred", self.role, claim.ticket, request_id
            )
            outcome = await self._release(claim)
        finally:
            self._working.pop(claim.ticket, None)
            self._slots.release()
        self._on_finished(claim, outcome)

    async def _reject(self, claim: Claim, reason: str) -> Outcome:
        await self._queue.reject(claim, reason)
        return "rejected"

    async def _release(self, claim: Claim) -> Outcome:
        """Defer the envelope; any worker takes it again when its next attempt is due."""
        due = await self._queue.release(claim)
        request_id = claim.envelope.request_id if claim.envelope is not None else "-"
        self._log.bind(request_id=request_id).info(
            "{}: envelope of request {} deferred; next attempt in {:.0f} s",
            self.role,
            request_id,
            max(due - time.time(), 0.0),
        )
        return "deferred"

    async def _outcome_of(self, claim: Claim) -> Outcome:
        envelope = claim.envelope
        if envelope is None:
            self._log.error("{}: rejected an envelope: {}", self.role, claim.problem)
            return await self._reject(claim, claim.problem)
        async with self._locks.hold(envelope.request_id):
            try:
                earlier = await self._earlier_outcome(envelope, claim)
                if earlier is not None:
                    return earlier
                return await self._handle(envelope, claim)
            except RequestEnded as ended:
                self._log.bind(request_id=envelope.request_id).info(
                    "{}: request {} is {}; envelope dropped",
                    self.role,
                    envelope.request_id,
                    ended.status,
                )
                await self._queue.done(claim)
                return "done"
            except ModelFailure as exc:
                # A prompt that cannot fit is not sent again, whatever on_failure says.
                final = isinstance(exc, PromptTooLarge)
                return await self._model_failed(envelope, claim, str(exc), final=final)
            except (NotSaved, AskTimeout, ActorStopped, StorageError) as exc:
                # Transient (the store was busy, away or stopping): another attempt may succeed.
                if not isinstance(exc, NotSaved):
                    self._log.bind(request_id=envelope.request_id).warning(
                        "{}: request {}: {}; its envelope is deferred",
                        self.role,
                        envelope.request_id,
                        exc,
                    )
                return await self._release(claim)
            except TeamsRuntimeError as exc:  # the record is missing or cannot be read
                self._log.bind(request_id=envelope.request_id).error(
                    "{}: cannot handle request {}: {}", self.role, envelope.request_id, exc
                )
                return await self._reject(claim, str(exc))

    async def _earlier_outcome(self, envelope: MessageEnvelope, claim: Claim) -> Outcome | None:
        """Finish an envelope whose outcome is already recorded (a second delivery: a worker
        died after persisting it, or its write landed after an ask timed out), queueing the
        follow-up that outcome handed on, without asking the model."""
        request_id = envelope.request_id
        recorded = await self._context.recall(request_id, outcome_key(self.role, envelope))
        if not recorded:
            return None
        self._log.bind(request_id=request_id).info(
            "{}: outcome for request {} already recorded; not handled again",
            self.role,
            request_id,
        )
        await queue_recorded_follow_up(
            self._context, self._queue, self.role, envelope, recorded, cast=self._cast
        )
        await self._queue.done(claim)
        return "done"

    async def _model_failed(
        self, envelope: MessageEnvelope, claim: Claim, reason: str, *, final: bool = False
    ) -> Outcome:
        self._log.bind(request_id=envelope.request_id).warning(
            "{}: model failed for request {}: {}", self.role, envelope.request_id, reason
        )
        if self._model.on_failure == "requeue" and not final:
            return await self._release(claim)  # on_failure: requeue
        cause = PROMPT_TOO_LARGE if final else ""
        failure = plan_model_failure(self.role, reason, now_iso(), envelope, cause)
        state = state_of(await self._context.project(envelope.request_id))
        try:
            await self._writer.persist(
                envelope, claim, lambda at: plan_for(at, failure, envelope), state
            )
            return "failed"
        except NotSaved:
            return await self._release(claim)

    async def _wait_for_person(self, envelope: MessageEnvelope, claim: Claim) -> Outcome:
        """Put the envelope in the inbox for a person, unless its request ended."""
        state = state_of(await self._context.project(envelope.request_id))
        if state.ended:
            raise RequestEnded(envelope.request_id, state.ended)
        if state.is_stale(envelope):  # cancelled and reopened since: nobody waits for it now
            await self._queue.done(claim)
            return "done"
        assert self._inbox is not None  # checked when the role was made
        try:
            await wait_for_person(self._inbox, self._queue, claim, envelope, self._model)
        except (TeamsRuntimeError, OSError) as exc:  # the inbox cannot be written: try later
            self._log.bind(request_id=envelope.request_id).error(
                "{}: request {} not put in the inbox ({}); its envelope is deferred",
                self.role,
                envelope.request_id,
                exc,
            )
            return await self._release(claim)
        return "waiting"

    async def _handle(self, envelope: MessageEnvelope, claim: Claim) -> Outcome:
        if is_person(self._model):
            return await self._wait_for_person(envelope, claim)
        request_id = envelope.request_id
        result = await self._calls.valid_result(envelope)
        now = now_iso()

        def decide(state: RequestState) -> OutcomePlan:
            plan = plan_outcome(
                self.role,
                envelope,
                result,
                now,
                hops=state.count,
                max_hops=self._max_hops,
                cast=self._cast,
                carried=carried,
            )
            return plan_for(state, plan, envelope)

        # Decided from the state now (handed on meanwhile?); the write expects it unchanged.
        projection = await self._context.project(request_id)
        state, carried = state_of(projection), carried_output(projection)
        recorded = await self._writer.persist(envelope, claim, decide, state)
        plan = recorded.plan
        log = self._log.bind(request_id=request_id)
        if not recorded.applied:  # another delivery's outcome is the one recorded (we were paused)
            log.info(
                "{}: request {}: outcome already recorded by another worker; this one not kept",
                self.role,
                request_id,
            )
        else:
            # Where it went: the role handed to, or the request's status when it stops here
            # ("request failed": at the hop limit too), never a bare "failed -> failed".
            handed_to = plan.follow_up.target if plan.follow_up is not None else ""
            ended = recorded.state.ended or ("" if handed_to else plan.updates["status"])
            went = f"request {ended}" if ended else handed_to
            if plan.drop_queued:  # this hand-off was one past team.max_hops
                went += " at the hop limit"
            log.info("{}: request {}: {} -> {}", self.role, request_id, result.status, went)
        # Failed by this outcome: the role's own failed result, or the hop limit it reached.
        failed = result.status == "failed" and not result.next_role
        return "failed" if failed or (recorded.applied and plan.drop_queued) else "done"
