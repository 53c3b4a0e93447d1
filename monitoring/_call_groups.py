"""One group of a metrics report: the sums, counts and distributions of its prompt records.

Every number is kept as counted or computed (never rounded: ``metrics --json`` carries them
as they are; the table rounds for reading). A figure with nothing to compute it from is
``None`` (no call reported usage, none was priced): unknown, not zero. Memory per group is
its sums plus 8 bytes per record for each distribution (prompt sizes, latencies).
"""

from __future__ import annotations

import math
from array import array
from dataclasses import dataclass, field

import msgspec

from teams_runtime.codecs.config import RateCard
from teams_runtime.codecs.prompt_records import PromptRecord
from teams_runtime.policy.pricing import input_cost

__all__ = ["CallGroup", "Figures", "full_history_tokens", "quantile"]


def quantile(ordered: list[float] | list[int], share: float) -> float | None:
    """The nearest-rank quantile of sorted values (``None`` for none)."""
    if not ordered:
        return None
    return ordered[max(math.ceil(share * len(ordered)) - 1, 0)]


def full_history_tokens(record: PromptRecord) -> float | None:
    """The input tokens ``record``'s prompt would have taken with its full history, by the
    call's own tokens per character (so each model's tokenizer); ``None`` without reported
    input tokens (or characters to divide by)."""
    if record.prompt_tokens is None or not record.prompt_chars:
        return None
    return record.full_history_chars * record.prompt_tokens / record.prompt_chars


class Figures(msgspec.Struct, frozen=True, kw_only=True):
    """The figures of a group of calls, in the order ``metrics --json`` prints them: sizes
    and events, then tokens and cost, then timings, retries and failures, then what the full
    history would have taken. ``None``: nothing reported it (unknown, not zero)."""

    prompts: int
    eligible: int  # prompts whose history was over max_events
    compacted: int
    compacted_percent: float
    total_events: int
    included_events: int
    omitted_events: int
    prompt_chars: int
    full_history_chars: int
    mean_prompt_chars: float
    p95_prompt_chars: float  # a prompt's size (a whole number of characters)
    mean_full_history_chars: float
    mean_included_events: float
    saving_percent: float
    prompts_with_usage: int
    prompt_tokens: int | None
    completion_tokens: int | None
    prompts_with_cached_tokens: int
    cached_prompt_tokens: int | None
    cached_ratio: float | None  # over the calls that said what was cached
    mean_prompt_tokens: float | None
    priced_calls: int
    cost_usd: float | None
    latency_p50_ms: float | None
    latency_p95_ms: float | None
    latency_max_ms: float | None
    first_token_p50_ms: float | None
    retries: int
    repairs: int
    invalid: int
    failures: int
    server_away: int
    stopped: int  # calls cut by their run stopping: not failures
    truncated: int  # answers a server stopped at its token limit
    finish_reasons: dict[str, int]
    estimated_calls: int
    full_history_prompt_tokens_estimate: float | None
    saved_prompt_tokens_estimate: float | None
    estimated_priced_calls: int
    full_history_cost_usd_estimate: float | None
    saved_cost_usd_estimate: float | None


@dataclass
class CallGroup:
    """The records of one group, summed as they are read."""

    prompts: int = 0
    eligible: int = 0
    compacted: int = 0
    total_events: int = 0
    included_events: int = 0
    omitted_events: int = 0
    prompt_chars: int = 0
    full_history_chars: int = 0
    prompts_with_usage: int = 0  # prompts whose model server reported tokens
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_prompt_tokens: int = 0
    # The calls whose server said how much of their input was cached, and that input: the
    # cached ratio is over them alone (a server that never says is not "0% cached").
    prompts_with_cached_tokens: int = 0
    cached_base_tokens: int = 0
    priced_calls: int = 0  # calls with a cost (a rate card priced them)
    cost_usd: float = 0.0
    retries: int = 0
    repairs: int = 0
    invalid: int = 0
    failures: int = 0  # failed calls and calls given up while their server was away
    server_away: int = 0
    stopped: int = 0  # cut by the run stopping (SIGTERM, Ctrl-C): not the model's failure
    # Calls by the finish reason their server gave (records without one are not counted).
    finish_reasons: dict[str, int] = field(default_factory=dict)
    # What the prompts would have taken with their full history, estimated per call from its
    # own tokens per character (calls with usage only), and the cost of that (priced calls).
    full_history_tokens: float = 0.0
    estimated_calls: int = 0
    estimated_prompt_tokens: int = 0  # what those calls took
    full_history_cost_usd: float = 0.0
    estimated_priced_calls: int = 0
    estimated_cost_usd: float = 0.0  # what the priced ones of them cost
    sizes: array[int] = field(default_factory=lambda: array("q"))
    latencies: array[float] = field(default_factory=lambda: array("d"))
    first_tokens: array[float] = field(default_factory=lambda: array("d"))

    def add(self, record: PromptRecord, card: RateCard | None) -> None:
        """Count ``record``; ``card`` is the rate card of its model now (for the estimate)."""
        self.prompts += 1
        self.eligible += record.eligible
        self.compacted += record.compacted
        self.total_events += record.total_events
        self.included_events += record.included_events
        self.omitted_events += record.omitted_events
        self.prompt_chars += record.prompt_chars
        self.full_history_chars += record.full_history_chars
        self.sizes.append(record.prompt_chars)
        self.retries += record.attempt_kind == "retry"
        self.repairs += record.attempt_kind == "contract_repair"
        self.invalid += record.outcome == "invalid"
        self.failures += record.outcome in ("failed", "server_away")
        self.server_away += record.outcome == "server_away"
        self.stopped += record.outcome == "stopped"
        if record.finish_reason is not None:
            reasons = self.finish_reasons
            reasons[record.finish_reason] = reasons.get(record.finish_reason, 0) + 1
        if record.latency_ms is not None:
            self.latencies.append(record.latency_ms)
        if record.first_token_ms is not None:
            self.first_tokens.append(record.first_token_ms)
        if record.cost_usd is not None:
            self.priced_calls += 1
            self.cost_usd += record.cost_usd
        if record.prompt_tokens is not None and record.completion_tokens is not None:
            self.prompts_with_usage += 1
            self.prompt_tokens += record.prompt_tokens
            self.completion_tokens += record.completion_tokens
            if record.cached_prompt_tokens is not None:
                self.prompts_with_cached_tokens += 1
                self.cached_prompt_tokens += record.cached_prompt_tokens
                self.cached_base_tokens += record.prompt_tokens
        if record.prompt_tokens is not None:  # (the estimate needs only the input tokens)
            self._estimate(record, card)

    def _estimate(self, record: PromptRecord, card: RateCard | None) -> None:
        tokens, full = record.prompt_tokens, full_history_tokens(record)
        if tokens is None or full is None:
            return
        self.full_history_tokens += full
        self.estimated_calls += 1
        self.estimated_prompt_tokens += tokens
        # Priced by its card now: without one, what the extra tokens cost is unknown.
        if record.cost_usd is not None and card is not None:
            self.estimated_priced_calls += 1
            self.estimated_cost_usd += record.cost_usd
            # The history compaction left out would have been new, uncached input.
            extra = input_cost(card, max(full - tokens, 0.0))
            self.full_history_cost_usd += record.cost_usd + extra

    def figures(self) -> Figures:
        """The group's figures, unrounded; ``None`` where nothing reported them."""
        per_prompt = max(self.prompts, 1)
        saving = 1 - self.prompt_chars / self.full_history_chars if self.full_history_chars else 0.0
        usage = self.prompts_with_usage > 0
        cached = self.prompts_with_cached_tokens > 0
        latencies = sorted(self.latencies)
        estimated = self.estimated_calls > 0
        estimated_cost = self.estimated_priced_calls > 0
        ratio = (
            self.cached_prompt_tokens / self.cached_base_tokens if self.cached_base_tokens else None
        )
        saved_tokens = self.full_history_tokens - self.estimated_prompt_tokens
        saved_cost = self.full_history_cost_usd - self.estimated_cost_usd
        return Figures(
            prompts=self.prompts,
            eligible=self.eligible,
            compacted=self.compacted,
            compacted_percent=100 * self.compacted / per_prompt,
            total_events=self.total_events,
            included_events=self.included_events,
            omitted_events=self.omitted_events,
            prompt_chars=self.prompt_chars,
            full_history_chars=self.full_history_chars,
            mean_prompt_chars=self.prompt_chars / per_prompt,
            p95_prompt_chars=quantile(sorted(self.sizes), 0.95) or 0,
            mean_full_history_chars=self.full_history_chars / per_prompt,
            mean_included_events=self.included_events / per_prompt,
            saving_percent=float(100 * saving),
            prompts_with_usage=self.prompts_with_usage,
            prompt_tokens=self.prompt_tokens if usage else None,
            completion_tokens=self.completion_tokens if usage else None,
            prompts_with_cached_tokens=self.prompts_with_cached_tokens,
            cached_prompt_tokens=self.cached_prompt_tokens if cached else None,
            cached_ratio=ratio,
            mean_prompt_tokens=self.prompt_tokens / self.prompts_with_usage if usage else None,
            priced_calls=self.priced_calls,
            cost_usd=self.cost_usd if self.priced_calls else None,
            latency_p50_ms=quantile(latencies, 0.5),
            latency_p95_ms=quantile(latencies, 0.95),
            latency_max_ms=latencies[-1] if latencies else None,
            first_token_p50_ms=quantile(sorted(self.first_tokens), 0.5),
            retries=self.retries,
            repairs=self.repairs,
            invalid=self.invalid,
            failures=self.failures,
            server_away=self.server_away,
            stopped=self.stopped,
            truncated=self.finish_reasons.get("length", 0),
            finish_reasons=dict(sorted(self.finish_reasons.items())),
            estimated_calls=self.estimated_calls,
            full_history_prompt_tokens_estimate=self.full_history_tokens if estimated else None,
            saved_prompt_tokens_estimate=saved_tokens if estimated else None,
            estimated_priced_calls=self.estimated_priced_calls,
            full_history_cost_usd_estimate=self.full_history_cost_usd if estimated_cost else None,
            saved_cost_usd_estimate=saved_cost if estimated_cost else None,
        )
