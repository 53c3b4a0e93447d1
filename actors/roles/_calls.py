"""A role's model calls: prompts projected and sent, retried and repaired into a valid result.

Every prompt is built from a projection taken right before it is sent, and only while the
request is live: once it is cancelled or failed (a cancel, another worker's outcome reaching
the hop limit), no more calls are made for it (``RequestEnded``). Each failed call and each
answer the contract rejects is kept in the request's attempts folder
(``storage.attempt_files``) with what the model printed; the logs only say that it happened.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import anyio

from teams_runtime._logs import logger
from teams_runtime.actors.context import ContextHandle
from teams_runtime.actors.models import (
    ModelBackend,
    ModelReply,
    ServerFacts,
    Toolbox,
    ToolSession,
    complete_reporting,
    server_away,
)
from teams_runtime.actors.roles._budget import BudgetFacts, PromptBudgeter
from teams_runtime.actors.roles._call_tools import call_tools, keep_tool_calls
from teams_runtime.actors.telemetry import CallFacts, attempt_kind_of, log_prompt
from teams_runtime.codecs.attempt_records import AttemptRecord
from teams_runtime.codecs.config import DEFAULT_CAST, Cast, ModelConfig, PromptBudget, RateCard
from teams_runtime.codecs.envelopes import MessageEnvelope
from teams_runtime.codecs.formats import count_of
from teams_runtime.codecs.model import (
    FinishReason,
    ReplyReading,
    ResearchDecision,
    RoleResult,
    Validated,
    finish_reason_of,
    read_reply,
    validate_reading,
)
from teams_runtime.codecs.projection_reply import Projection
from teams_runtime.codecs.prompt_records import CallOutcome, PromptRecord
from teams_runtime.exceptions import ModelFailure, PromptTooLarge, TeamsRuntimeError
from teams_runtime.policy.outcomes import MAX_REPAIRS, contract_failure, research_result, state_of
from teams_runtime.policy.pricing import rate_key
from teams_runtime.policy.prompts import PromptBundle, PromptKind, build_prompt
from teams_runtime.policy.token_counts import (
    LearnedRatios,
    server_overshoot,
    server_prompt_tokens,
)
from teams_runtime.storage import Workspace
from teams_runtime.storage.attempt_files import save_attempt

__all__ = ["RequestEnded", "RoleCalls"]


# The characters of a rejected answer a repair shows when the whole (up to 4,000) cannot fit
# the role's budget.
_SHORT_PREVIOUS = 400


def _still_over(said: str, facts: BudgetFacts, less: int, setting: str) -> str:
    """The reason of a prompt still past the server's context once made again under its
    budget: how the server said so, the budget, and what would help."""
    how = said.split(". The prompt has", 1)[0]  # the backend's advice assumed no budget
    return (
        f"{how}, at its budget of {facts.max_prompt_tokens} tokens ({setting}; the prompt was "
        f"estimated at {facts.prompt_tokens_estimate}) and again when made {less} tokens "
        f"smaller; lower {setting}, or start the server with a larger context (llama.cpp: "
        "--ctx-size; llama-cpp-python: --n_ctx)"
    )


def _failed_call(bundle: PromptBundle, call: int, exc: ModelFailure) -> AttemptRecord:
    """The attempt file of a failed call: why, and what the model printed."""
    return AttemptRecord(
        request_id=bundle.request_id,
        role=bundle.role,
        purpose=bundle.purpose,
        call=call,
        reason=str(exc),
        exit_status=exc.exit_status,
        stderr_tail=exc.stderr_tail,
        answer=exc.output,
    )


class RequestEnded(Exception):
    """The request was cancelled or failed before a model call: the call is not made."""

    def __init__(self, request_id: str, status: str) -> None:
        super().__init__(f"request {request_id} is {status}")
        self.request_id = request_id
        self.status = status


@dataclass(frozen=True)
class _Reply:
    """A model's reply (and the JSON it holds), with the prompt's purpose and the number of
    the call that gave it."""

    reply: ModelReply
    reading: ReplyReading
    checked: Validated
    purpose: str
    call: int


class RoleCalls:
    """The model calls of one role, for any number of requests at once."""

    def __init__(
        self,
        role: str,
        *,
        model: ModelConfig,
        workspace: Workspace,
        context: ContextHandle,
        backend: ModelBackend,
        on_prompt: Callable[[PromptRecord], None] | None = None,
        rate_card: RateCard | None = None,
        cast: Cast = DEFAULT_CAST,
        budget: PromptBudget | None = None,
        ratios: LearnedRatios | None = None,
        facts: ServerFacts | None = None,
        mcp: Toolbox | None = None,
    ) -> None:
        """``mcp``: the tools of the MCP servers the role's ``model.tools.mcp`` names, started
        with the team."""
        self.role = role
        self._mcp = mcp
        self._cast = cast  # the team: the role's prompt kind, rules and hand-offs
        self._kind = cast.prompt_kind_of(role)
        self._model = model
        self._rate_key = rate_key(model)
        self._rate_card = rate_card  # what the prompt records price calls by
        self._workspace = workspace  # where attempts are kept
        self._context = context
        self._backend = backend
        self._on_prompt = on_prompt
        self._log = logger.bind(role=role)
        # The role's token budget (none: prompts as projected); `ratios` shared by a worker's
        # roles, so what one role's calls teach about a model serves the others.
        self.budgeter = PromptBudgeter(
            role,
            budget or PromptBudget(),
            model,
            self._rate_key,
            ratios=ratios,
            facts=facts,
        )

    async def valid_result(self, envelope: MessageEnvelope) -> RoleResult:
        """Prompt the model, repairing invalid answers (each one kept as an attempt) at most
        ``MAX_REPAIRS`` times; the role result to record, a contract failure if none passed.
        Raises ``ModelFailure`` (every call of a prompt failed), ``RequestEnded``, and what
        the ContextActor raises."""
        kind = self._kind
        request_id = envelope.request_id
        got = await self._project_and_prompt(kind, envelope)
        checked = got.checked
        answer, issues = checked.answer, checked.issues
        repairs = 0
        while answer is None:
            await self.keep_attempt(
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
            checked = got.checked
            answer, issues = checked.answer, checked.issues
        if isinstance(answer, ResearchDecision):
            return research_result(self.role, answer)
        return answer

    async def keep_attempt(self, attempt: AttemptRecord) -> None:
        """Save a failed call or a rejected reply; not being able to is logged, never raised."""
        try:
            await anyio.to_thread.run_sync(save_attempt, self._workspace, attempt)
        except (TeamsRuntimeError, OSError) as exc:
            self._log.bind(request_id=attempt.request_id).warning(
                "{}: attempt for request {} not kept: {}", self.role, attempt.request_id, exc
            )

    async def _live_projection(self, request_id: str) -> Projection:
        """The projection, if the request has not ended; else ``RequestEnded``. The prompt is
        built from this very projection, so no prompt shows an ended request."""
        projection = await self._context.project(request_id)
        ended = state_of(projection).ended
        if ended:
            raise RequestEnded(request_id, ended)
        return projection

    async def _project_and_prompt(
        self,
        kind: PromptKind,
        envelope: MessageEnvelope,
        *,
        repairing: PromptKind | None = None,
        errors: list[str] | None = None,
        previous: str = "",
    ) -> _Reply:
        projection = await self._live_projection(envelope.request_id)

        def prompt(shown: str) -> PromptBundle:
            return build_prompt(
                kind,
                role=self.role,
                projection=projection,
                envelope=envelope,
                repairing=repairing,
                errors=errors,
                previous=shown,
                cast=self._cast,
            )

        bundle = prompt(previous)
        # Over its budget a prompt is never sent: fitted here, or PromptTooLarge (final).
        try:
            fitted, facts = await self.budgeter.fit(bundle)
        except PromptTooLarge:
            if len(previous) <= _SHORT_PREVIOUS:
                raise
            # A repair's brief carries the rejected answer (one cut at the window is long):
            # shown shorter it fits, and the errors still say what to fix.
            bundle = prompt(previous[:_SHORT_PREVIOUS])
            fitted, facts = await self.budgeter.fit(bundle)
        try:
            return await self._send_prompt(fitted, facts)
        except PromptTooLarge as exc:
            if facts.max_prompt_tokens is None:
                raise
            less = self._overshoot(fitted, facts, exc)
        # The server counted more than the estimate: once more, that much under the budget.
        fitted, again = await self.budgeter.fit(bundle, less=less)
        try:
            return await self._send_prompt(fitted, again)
        except PromptTooLarge as exc:
            setting = self.budgeter.budget.setting if self.budgeter.budget else ""
            reason = _still_over(str(exc), facts, less, setting)
            raise PromptTooLarge(reason, output=exc.output) from None

    def _overshoot(self, bundle: PromptBundle, facts: BudgetFacts, exc: PromptTooLarge) -> int:
        """How many tokens under its budget the prompt is made again: to its estimate less
        what the server said it was over by (a tenth of the budget when it did not say). The
        model's learned ratio is corrected from the server's count of the prompt."""
        estimate = facts.prompt_tokens_estimate or 0
        budget = facts.max_prompt_tokens or 0
        counted = server_prompt_tokens(exc.output)
        if counted is not None:
            self.budgeter.correct(counted, len(bundle.text().encode("utf-8")))
        over = server_overshoot(exc.output)
        return budget - min(budget, estimate) + (over if over else max(budget // 10, 1))

    async def _send_prompt(self, bundle: PromptBundle, budget: BudgetFacts) -> _Reply:
        """Send a prompt (model.attempts calls at most, each only while the request is live);
        log each one sent and keep each failed call in the attempts folder. Raises the last
        ``ModelFailure`` if every call failed."""
        for call in range(1, self._model.attempts + 1):
            if call > 1:
                await self._live_projection(bundle.request_id)  # ended since the last call?
            reply: ModelReply | None = None
            reading: ReplyReading | None = None
            outcome: CallOutcome = "failed"
            finish: FinishReason | None = None  # of a failed call (a reply carries its own)
            started = anyio.current_time()
            tools = call_tools(self._model, self._context, bundle, budget, self._mcp, self.budgeter)
            try:
                reply = await complete_reporting(self._backend, bundle, tools)
            except ModelFailure as exc:
                finish = finish_reason_of(exc.finish_reason)
                await self.keep_attempt(_failed_call(bundle, call, exc))
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
            except BaseException as exc:  # stopped (cancelled): while its server was away?
                outcome = _outcome_cut_by(exc, away=server_away(self._backend))
                raise
            else:
                reading = read_reply(reply.text)
                checked = validate_reading(
                    reading,
                    kind=bundle.reply_kind,
                    request_id=bundle.request_id,
                    role=self.role,
                    next_roles=bundle.next_roles,
                )
                outcome = "completed" if checked.answer is not None else "invalid"
                return _Reply(
                    reply=reply, reading=reading, checked=checked, purpose=bundle.purpose, call=call
                )
            finally:
                await keep_tool_calls(self._workspace, bundle, call, tools)
                self._log_call(
                    bundle, call, started, reply, reading, outcome, finish, budget, tools
                )
        raise AssertionError("unreachable")

    def _log_call(
        self,
        bundle: PromptBundle,
        call: int,
        started: float,
        reply: ModelReply | None,
        reading: ReplyReading | None,
        outcome: CallOutcome,
        finish: FinishReason | None,
        budget: BudgetFacts,
        tools: ToolSession | None = None,
    ) -> None:
        """Log the prompt record of one call (``prompt_log.log_prompt``) and hand it on; the
        server's count of the prompt's tokens teaches the budget the model's ratio."""
        ended = anyio.current_time()
        first = reply.first_token_at if reply is not None else None
        facts = CallFacts(
            usage=reply.usage if reply is not None else None,
            read=reading.how if reading is not None else None,
            model=self._rate_key,
            rate_card=self._rate_card,
            attempt_kind=attempt_kind_of(bundle.purpose, call),
            latency_seconds=ended - started,
            first_token_seconds=first - started if first is not None else None,
            outcome=outcome,
            finish_reason=reply.finish_reason if reply is not None else finish,
            max_prompt_tokens=budget.max_prompt_tokens,
            prompt_tokens_estimate=budget.prompt_tokens_estimate,
            token_count_method=budget.token_count_method,
            tool_rounds=tools.rounds if tools is not None else None,
            tool_calls=tools.calls if tools is not None else None,
        )
        record = log_prompt(bundle, bundle.chars(), facts)
        if not record.tool_rounds:  # the tokens of tool rounds are not the prompt's
            self.budgeter.observe(record.prompt_tokens, record.prompt_chars)
        if self._on_prompt is not None:
            self._on_prompt(record)


def _outcome_cut_by(exc: BaseException, *, away: bool) -> CallOutcome:
    """How a call that raised ``exc`` (not a ``ModelFailure``) ended: a call waiting for its
    away server stays ``server_away``; one cut by the run stopping (the Team cancelled on
    SIGTERM or Ctrl-C) is ``stopped``, not the model's failure; anything else failed."""
    if away:
        return "server_away"
    if isinstance(exc, (anyio.get_cancelled_exc_class(), KeyboardInterrupt)):
        return "stopped"
    return "failed"
