"""What role actors log for every prompt they send: the spec's compaction line and one
structured, content-free ``PromptRecord`` (bound as ``RECORD_KEY``; the CLI's sinks route it to
``.teams_runtime/logs/prompt_context.jsonl``). Nothing here holds prompt or payload text.

``log_prompt`` is the one place every call passes through, with every per-call fact on the
record it builds (sizes, counts, tokens, timings, cost, outcome): what any other sink of
per-call telemetry hooks onto.
"""

from __future__ import annotations

import msgspec

from teams_runtime._logs import logger
from teams_runtime.actors.telemetry._tracing import model_call
from teams_runtime.codecs.config import RateCard
from teams_runtime.codecs.formats import now_iso
from teams_runtime.codecs.model import FinishReason, ReplyRead, TokenUsage
from teams_runtime.codecs.prompt_records import (
    AttemptKind,
    CallOutcome,
    PromptRecord,
    TokenCountMethod,
    encode_prompt_record,
)
from teams_runtime.codecs.request_records import EVENT_SEPARATOR, EVENTS_KEY
from teams_runtime.policy.pricing import call_cost
from teams_runtime.policy.prompts import PromptBundle

__all__ = ["RECORD_KEY", "CallFacts", "attempt_kind_of", "log_prompt", "prompt_record"]

RECORD_KEY = "prompt_record"  # the loguru extra that carries a prompt record


class CallFacts(msgspec.Struct, frozen=True, kw_only=True):
    """What the role saw of one call of a prompt (counts and times only)."""

    usage: TokenUsage | None = None  # what the model server reported, if anything
    read: ReplyRead | None = None  # how the answer's JSON object was read; None: no answer
    model: str | None = None  # the rate card key of the role's model
    rate_card: RateCard | None = None  # its card, None without one (or telemetry disabled)
    attempt_kind: AttemptKind | None = None
    latency_seconds: float | None = None
    first_token_seconds: float | None = None
    outcome: CallOutcome | None = None
    finish_reason: FinishReason | None = None  # why the server said the answer ended
    # The role's token budget, when one is in force: its tokens, the prompt's estimate under
    # it, and how that was counted (``actors.roles._budget``).
    max_prompt_tokens: int | None = None
    prompt_tokens_estimate: int | None = None
    token_count_method: TokenCountMethod | None = None
    # With tools offered (``model.tools``): the rounds of tool calls and the calls in them.
    tool_rounds: int | None = None
    tool_calls: int | None = None


def attempt_kind_of(purpose: str, call: int) -> AttemptKind:
    """Why call number ``call`` of a prompt for ``purpose`` was sent."""
    if call > 1:
        return "retry"
    return "contract_repair" if purpose == "contract_repair" else "primary"


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else max(seconds, 0.0) * 1000


def prompt_record(
    bundle: PromptBundle, prompt_chars: int, call: CallFacts | None = None
) -> PromptRecord:
    """The content-free record of one prompt and its ``call``; full history size is computed
    from byte sizes, the cost from the call's usage by its rate card."""
    call = call if call is not None else CallFacts()
    usage = call.usage
    projection = bundle.projection
    config = projection.config
    selected_bytes = 0
    events = projection.fields.get(EVENTS_KEY)
    if events is not None and projection.total_events:
        selected_bytes = len(events) - 2 - max(projection.included_events - 1, 0)  # [ , ]
    omitted_bytes = max(projection.history_bytes - selected_bytes, 0)
    notice_chars = len(bundle.notice) + 2 if bundle.notice else 0
    full = (
        prompt_chars
        - notice_chars
        + omitted_bytes
        + len(EVENT_SEPARATOR) * projection.omitted_events
    )
    return PromptRecord(
        timestamp=now_iso(),
        role=bundle.role,
        purpose=bundle.purpose,
        request_id=bundle.request_id,
        enabled=config.enabled,
        recent_events=config.recent_events,
        max_events=config.max_events,
        total_events=projection.total_events,
        included_events=projection.included_events,
        omitted_events=projection.omitted_events,
        compacted=projection.compacted,
        eligible=projection.total_events > config.max_events,
        backfilled_roles=[item.role for item in projection.backfilled],
        prompt_chars=prompt_chars,
        full_history_chars=full,
        prompt_tokens=usage.prompt_tokens if usage is not None else None,
        completion_tokens=usage.completion_tokens if usage is not None else None,
        answer_read=call.read,
        model=call.model,
        attempt_kind=call.attempt_kind,
        latency_ms=_ms(call.latency_seconds),
        first_token_ms=_ms(call.first_token_seconds),
        cached_prompt_tokens=usage.cached_prompt_tokens if usage is not None else None,
        cost_usd=call_cost(call.rate_card, usage, answered=call.read is not None),
        outcome=call.outcome,
        finish_reason=call.finish_reason,
        max_prompt_tokens=call.max_prompt_tokens,
        prompt_tokens_estimate=call.prompt_tokens_estimate,
        token_count_method=call.token_count_method,
        tool_rounds=call.tool_rounds,
        tool_calls=call.tool_calls,
        layout=config.layout if config.layout != "upstream" else None,
        step=config.step if config.layout == "shared_prefix" else None,
    )


def log_prompt(
    bundle: PromptBundle, prompt_chars: int, call: CallFacts | None = None
) -> PromptRecord:
    """Log one sent prompt: the spec's compaction line if compacted, and its record with
    every per-call fact of ``call`` (tokens, timings, cost, outcome)."""
    record = prompt_record(bundle, prompt_chars, call)
    bound = logger.bind(role=record.role, request_id=record.request_id, purpose=record.purpose)
    if record.compacted:
        decided = bundle.projection.budget  # only when the budget left events out
        bound.info(
            "[{}] prompt_context_compacted request_id={} purpose={} total_events={} "
            "included_events={} omitted_events={} recent_events={} max_events={}{}",
            record.role,
            record.request_id or "unknown",
            record.purpose,
            record.total_events,
            record.included_events,
            record.omitted_events,
            record.recent_events,
            record.max_events,
            ""
            if decided is None
            else f" max_prompt_tokens={decided.max_prompt_tokens}"
            f" prompt_tokens_estimate={decided.prompt_tokens_estimate}",
        )
    bound.bind(**{RECORD_KEY: encode_prompt_record(record)}).info(RECORD_KEY)
    model_call(record)  # its span and metrics, when OpenTelemetry is on
    return record
