"""Role actors: one per role, turning claimed envelopes into persisted role results.

For each envelope a role asks the ContextActor for the projection, streams its prompt to the
model backend, checks the answer against the contract (at most two repair prompts, each
re-projected), and persists the outcome in one write (``outcomes.plan_outcome``). A result
naming ``next_role`` queues an envelope for it. The envelope leaves the queue only after all of
that, so a crash means it is handled again.

Each failed model call and each answer the contract rejects is kept in the request's attempts
folder (``storage.attempts``) with what the model printed; the logs only say that it happened.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import anyio
from anyio.abc import TaskGroup, TaskStatus
from loguru import logger

from teams_runtime.actors.context import ContextHandle
from teams_runtime.actors.mailbox import Mailbox, MailboxStatistics
from teams_runtime.actors.model_backends import ModelBackend, ModelReply, complete_reporting
from teams_runtime.actors.prompt_log import log_prompt
from teams_runtime.actors.request_locks import RequestLocks
from teams_runtime.actors.tracing import traced_envelope
from teams_runtime.codecs.answer_reading import AnswerReading, read_answer
from teams_runtime.codecs.attempt_records import AttemptRecord
from teams_runtime.codecs.config import ModelConfig
from teams_runtime.codecs.contract import validate_reading
from teams_runtime.codecs.envelopes import MessageEnvelope
from teams_runtime.codecs.formats import count_of, now_iso
from teams_runtime.codecs.prompt_records import PromptRecord
from teams_runtime.exceptions import (
    ActorStopped,
    AskTimeout,
    BackendError,
    ModelFailure,
    PromptTooLarge,
    TeamsRuntimeError,
)
from teams_runtime.policy.outcomes import (
    MAX_REPAIRS,
    OutcomePlan,
    as_cancelled,
    contract_failure,
    hops_of,
    plan_model_failure,
    plan_outcome,
    recorded_follow_up,
    research_result,
    status_of,
)
from teams_runtime.policy.prompts import (
    PromptBundle,
    PromptKind,
    answer_kind_of,
    build_prompt,
    kind_for_role,
)
from teams_runtime.storage import Claim, WorkQueue, Workspace
from teams_runtime.storage.attempt_files import save_attempt

__all__ = ["Outcome", "RoleActor", "Working"]

Outcome = Literal["done", "failed", "deferred", "rejected"]

# How often a model call that is still running is reported (DEBUG: `run --verbose`).


class _NotSaved(Exception):
    """The outcome could not be persisted: the envelope stays queued for another try."""


@dataclass(frozen=True)
class _Answer:
    """A model's reply (and the JSON it holds), with the prompt's purpose and the number of
    the call that gave it."""

    reply: ModelReply
    reading: AnswerReading
    purpose: str
    call: int


@dataclass(frozen=True, slots=True)
class Working:
    """One envelope a role is handling now: the request's id and when the role took it
    (``anyio.current_time()``). Content-free by design: what a live view may show."""

    request_id: str
    since: float


def outcome_key(role: str, envelope: MessageEnvelope) -> str:
    """What ``role``'s outcome of ``envelope`` is recorded under (``append_key``)."""
    return f"{role}/{envelope.envelope_id}"


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
    ) -> None:
        self.role = role
        self._model = model
        self._max_hops = max_hops
        self._workspace = workspace  # where attempts are kept
        self._context = context
        self._backend = backend
        self._queue = queue
        self._locks = locks
        self._on_finished = on_finished
        self._on_prompt = on_prompt
        self._slots = anyio.Semaphore(concurrency)
        self._mailbox: Mailbox[Claim] = Mailbox(role, inbox_size)
        self._group: TaskGroup | None = None
        self._working: dict[str, Working] = {}  # by claim ticket
        self._log = logger.bind(role=role)

    async def tell(self, claim: Claim) -> None:
        """Hand a claimed envelope to this role; waits while its inbox is full."""
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
                "{}: envelope {} of request {} left queued", self.role, claim.ticket, request_id
            )
            outcome = await self._release(claim)
        finally:
            self._working.pop(claim.ticket, None)
            self._slots.release()
        self._on_finished(claim, outcome)

    async def _reject(self, claim: Claim, reason: str) -> Outcome:
        await anyio.to_thread.run_sync(self._queue.reject, claim, reason)
        return "rejected"

    async def _release(self, claim: Claim) -> Outcome:
        await anyio.to_thread.run_sync(self._queue.release, claim)
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
            except ModelFailure as exc:
                return await self._model_failed(envelope, claim, str(exc))
            except (_NotSaved, AskTimeout, ActorStopped, BackendError) as exc:
                # Transient (the store was busy, away or stopping): another attempt may succeed.
                if not isinstance(exc, _NotSaved):
                    self._log.bind(request_id=envelope.request_id).warning(
                        "{}: request {}: {}; its envelope stays queued",
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
        died after persisting it) or whose request was cancelled, without asking the model."""
        request_id = envelope.request_id
        recorded = await self._context.recall(request_id, self._key(envelope))
        if not recorded:
            if status_of(await self._context.project(request_id)) != "cancelled":
                return None
            self._log.bind(request_id=request_id).info(
                "{}: request {} was cancelled; envelope dropped", self.role, request_id
            )
        else:
            self._log.bind(request_id=request_id).info(
                "{}: outcome for request {} already recorded; not handled again",
                self.role,
                request_id,
            )
            follow_up = recorded_follow_up(self.role, envelope, recorded, now_iso())
            # The crash may have come before it was queued; once it is handled, it is not.
            if follow_up is not None and not await self._context.recall(
                request_id, outcome_key(follow_up.target, follow_up)
            ):
                await anyio.to_thread.run_sync(self._queue.put, follow_up)
        await anyio.to_thread.run_sync(self._queue.done, claim)
        return "done"

    async def _model_failed(self, envelope: MessageEnvelope, claim: Claim, reason: str) -> Outcome:
        log = self._log.bind(request_id=envelope.request_id)
        log.warning("{}: model failed for request {}: {}", self.role, envelope.request_id, reason)
        if self._model.on_failure == "requeue":
            log.warning(
                "{}: envelope of request {} left in the queue for the next run: {}",
                self.role,
                envelope.request_id,
                claim.ticket,
            )
            return await self._release(claim)
        try:
            await self._persist(envelope, claim, plan_model_failure(self.role, reason, now_iso()))
            return "failed"
        except _NotSaved:
            return await self._release(claim)

    async def _keep_attempt(self, attempt: AttemptRecord) -> None:
        """Save a failed call or a rejected answer; not being able to is logged, never raised."""
        try:
            await anyio.to_thread.run_sync(save_attempt, self._workspace, attempt)
        except (TeamsRuntimeError, OSError) as exc:
            self._log.bind(request_id=attempt.request_id).warning(
                "{}: attempt for request {} not kept: {}", self.role, attempt.request_id, exc
            )

    async def _send_prompt(self, bundle: PromptBundle) -> _Answer:
        """Send a prompt (model.attempts calls at most); log each one sent and keep each failed
        call in the attempts folder. Raises the last ``ModelFailure`` if every call failed."""
        for call in range(1, self._model.attempts + 1):
            reply: ModelReply | None = None
            reading: AnswerReading | None = None
            try:
                reply = await complete_reporting(self._backend, bundle)
            except ModelFailure as exc:
                await self._keep_attempt(
                    AttemptRecord(
                        request_id=bundle.request_id,
                        role=self.role,
                        purpose=bundle.purpose,
                        call=call,
                        reason=str(exc),
                        exit_status=exc.exit_status,
                        stderr_tail=exc.stderr_tail,
                        answer=exc.output,
                    )
                )
                if call == self._model.attempts or isinstance(exc, PromptTooLarge):
                    raise  # (a prompt beyond the server's context is not sent unchanged again)
                self._log.bind(request_id=bundle.request_id).warning(
                    "{}: model attempt {} of {} failed for request {}: {}",
                    self.role,
                    call,
                    self._model.attempts,
                    bundle.request_id,
                    exc,
                )
            else:
                reading = read_answer(reply.text)
                return _Answer(reply=reply, reading=reading, purpose=bundle.purpose, call=call)
            finally:
                usage = reply.usage if reply is not None else None
                read = reading.how if reading is not None else None
                record = log_prompt(bundle, bundle.chars(), usage, read)
                if self._on_prompt is not None:
                    self._on_prompt(record)
        raise AssertionError("unreachable")

    async def _project_and_prompt(
        self,
        kind: PromptKind,
        envelope: MessageEnvelope,
        *,
        repairing: PromptKind | None = None,
        errors: list[str] | None = None,
        previous: str = "",
    ) -> _Answer:
        projection = await self._context.project(envelope.request_id)
        bundle = build_prompt(
            kind,
            role=self.role,
            projection=projection,
            envelope=envelope,
            repairing=repairing,
            errors=errors,
            previous=previous,
        )
        return await self._send_prompt(bundle)

    async def _handle(self, envelope: MessageEnvelope, claim: Claim) -> Outcome:
        request_id = envelope.request_id
        result = await self._valid_result(envelope)
        current = await self._context.project(request_id)  # handed on meanwhile?
        plan = plan_outcome(
            self.role, envelope, result, now_iso(), hops=hops_of(current), max_hops=self._max_hops
        )
        cancelled = await self._persist(envelope, claim, plan)
        self._log.bind(request_id=request_id).info(
            "{}: request {}: {} -> {}",
            self.role,
            request_id,
            result["status"],
            "cancelled" if cancelled else result["next_role"] or plan.updates["status"],
        )
        return "failed" if result["status"] == "failed" and not result["next_role"] else "done"

    async def _valid_result(self, envelope: MessageEnvelope) -> dict[str, Any]:
        """Prompt the model, repairing invalid answers (each one kept as an attempt) at most
        ``MAX_REPAIRS`` times; the role result to record, a contract failure if none passed."""
        kind = kind_for_role(self.role)
        answer_kind = answer_kind_of(kind)
        request_id = envelope.request_id
        got = await self._project_and_prompt(kind, envelope)
        checked = validate_reading(
            got.reading, kind=answer_kind, request_id=request_id, role=self.role
        )
        answer, issues = checked.answer, checked.issues
        repairs = 0
        while answer is None:
            await self._keep_attempt(
                AttemptRecord(
                    request_id=request_id,
                    role=self.role,
                    purpose=got.purpose,
                    call=got.call,
                    reason=f"rejected by contract validation ({count_of(len(issues), 'issue')})",
                    exit_status=got.reply.exit_status,
                    issues=issues,
                    stderr_tail=got.reply.stderr_tail,
                    answer=got.reply.text,
                    answer_read=checked.read,
                )
            )
            if repairs == MAX_REPAIRS:
                return contract_failure(request_id, self.role, issues)
            repairs += 1
            self._log.bind(request_id=request_id).warning(
                "{}: result for request {} rejected by contract validation ({}); repair {} of {}",
                self.role,
                request_id,
                count_of(len(issues), "issue"),
                repairs,
                MAX_REPAIRS,
            )
            got = await self._project_and_prompt(
                "repair", envelope, repairing=kind, errors=issues, previous=got.reply.text
            )
            checked = validate_reading(
                got.reading, kind=answer_kind, request_id=request_id, role=self.role
            )
            answer, issues = checked.answer, checked.issues
        return research_result(self.role, answer) if kind == "research_decision" else answer

    def _key(self, envelope: MessageEnvelope) -> str:
        return outcome_key(self.role, envelope)

    async def _persist(self, envelope: MessageEnvelope, claim: Claim, plan: OutcomePlan) -> bool:
        """Write the plan, queue its follow-up, then dequeue: shielded from cancellation; on
        failure the envelope stays queued (``_NotSaved``). Returns whether the request had been
        cancelled (only the plan's first event and result were written then)."""
        try:
            with anyio.CancelScope(shield=True):
                # Keyed by the envelope: a retry after a timeout, or a second delivery, is not
                # written twice. Unless cancelled meanwhile: checked under the record's lock.
                appended = await self._context.append_keyed(
                    envelope.request_id,
                    plan.events,
                    updates=plan.updates,
                    key=self._key(envelope),
                    unless={"status": "cancelled"},
                )
                cancelled = appended.refused
                if cancelled:  # checked under the lock: record it, hand nothing on
                    plan = as_cancelled(plan)
                    appended = await self._context.append_keyed(
                        envelope.request_id,
                        plan.events,
                        updates=plan.updates,
                        key=self._key(envelope),
                    )
                # Not applied: another delivery of this envelope recorded its outcome and
                # queued its follow-up already (a worker that hung past its lease, say).
                if plan.follow_up is not None and appended.applied:
                    await anyio.to_thread.run_sync(self._queue.put, plan.follow_up)
                if plan.drop_queued:
                    await anyio.to_thread.run_sync(self._queue.drop, envelope.request_id)
                await anyio.to_thread.run_sync(self._queue.done, claim)
        except (TeamsRuntimeError, OSError) as exc:  # e.g. disk full, stopping: nothing lost
            self._log.bind(request_id=envelope.request_id).error(
                "{}: outcome for request {} not saved ({}); its envelope stays queued",
                self.role,
                envelope.request_id,
                exc,
            )
            raise _NotSaved from exc
        return cancelled
