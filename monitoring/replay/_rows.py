"""One row of a replay: the sums of a (policy, layout) pair's prompts as they go, and the row
they make (what ``replay --json`` prints in ``policies``)."""

from __future__ import annotations

from dataclasses import dataclass

import msgspec

from teams_runtime.codecs.prompt_records import PromptRecord

__all__ = ["ReplayRow", "RowSums"]


class ReplayRow(msgspec.Struct, frozen=True, kw_only=True):
    """A (policy, layout) pair's figures over every call replayed.

    ``evidence_kept`` is a share (0 to 1) of ``evidence_pairs``, ``None`` without one;
    ``cost_usd`` the prompts' input cost by the rate cards (cached tokens at the cached rate),
    ``None`` when no card priced a prompt; ``budget_overflows`` the prompts over the budget in
    force (the policy's own, else the role's configured one), ``None`` when none had one.

    The ``measured_*`` figures are the model server's, from the prompt records that carry
    ``cached_prompt_tokens`` (``recorded`` rows only): the tokens it read and served from its
    cache, their share, and the share the replay predicts for those same prompts beside it.
    """

    policy: str
    layout: str
    prompts: int
    prompt_tokens_estimate: int
    cacheable_prompt_tokens: int
    evidence_kept: float | None
    cost_usd: float | None
    cacheable_same_role_prompt_tokens: int
    cacheable_cross_role_prompt_tokens: int
    evidence_pairs: int
    priced_prompts: int
    prompt_chars: int
    included_events: int
    budget_overflows: int | None
    too_large: int
    measured_prompts: int = 0
    measured_prompt_tokens: int = 0
    measured_cached_prompt_tokens: int = 0
    measured_cached_share: float | None = None
    predicted_cached_share: float | None = None

    @property
    def cacheable_share(self) -> float:
        """The cacheable tokens' share of the prompt tokens (0 without any)."""
        tokens = self.prompt_tokens_estimate
        return self.cacheable_prompt_tokens / tokens if tokens else 0.0


@dataclass
class RowSums:
    """The running sums behind a ``ReplayRow``."""

    prompts: int = 0
    tokens: int = 0
    cacheable: int = 0
    same_role: int = 0
    chars: int = 0
    included: int = 0
    evidence_pairs: int = 0
    evidence_kept: int = 0
    priced: int = 0
    cost: float = 0.0
    budgeted: int = 0  # prompts with a budget in force
    overflows: int = 0  # of them, those over it before any fit
    too_large: int = 0  # prompts that could not fit even without events (never sent)
    measured: int = 0  # prompts whose server said what it served from its cache
    measured_tokens: int = 0  # the server's prompt tokens of them
    measured_cached: int = 0  # and its cached ones
    predicted_tokens: int = 0  # the replay's estimate of the same prompts
    predicted_cached: int = 0  # and its cacheable prefix

    def add_prompt(self, chars: int, tokens: int, cacheable: int, same: int, events: int) -> None:
        """Count one prompt sent: its size, tokens, cacheable prefix and included events."""
        self.chars += chars
        self.tokens += tokens
        self.cacheable += cacheable
        self.same_role += same
        self.included += events

    def add_measured(self, record: PromptRecord, tokens: int, cacheable: int) -> None:
        """Count what the server said of a prompt's cache beside the replay's figures (when
        its record carries both counts)."""
        if record.cached_prompt_tokens is None or not record.prompt_tokens:
            return
        self.measured += 1
        self.measured_tokens += record.prompt_tokens
        self.measured_cached += record.cached_prompt_tokens
        self.predicted_tokens += tokens
        self.predicted_cached += cacheable

    def row(self, policy: str, layout: str) -> ReplayRow:
        """The sums as a row."""
        return ReplayRow(
            policy=policy,
            layout=layout,
            prompts=self.prompts,
            prompt_tokens_estimate=self.tokens,
            cacheable_prompt_tokens=self.cacheable,
            evidence_kept=self.evidence_kept / self.evidence_pairs if self.evidence_pairs else None,
            cost_usd=self.cost if self.priced else None,
            cacheable_same_role_prompt_tokens=self.same_role,
            cacheable_cross_role_prompt_tokens=self.cacheable - self.same_role,
            evidence_pairs=self.evidence_pairs,
            priced_prompts=self.priced,
            prompt_chars=self.chars,
            included_events=self.included,
            budget_overflows=self.overflows if self.budgeted else None,
            too_large=self.too_large,
            measured_prompts=self.measured,
            measured_prompt_tokens=self.measured_tokens,
            measured_cached_prompt_tokens=self.measured_cached,
            measured_cached_share=_share(self.measured_cached, self.measured_tokens),
            predicted_cached_share=_share(self.predicted_cached, self.predicted_tokens),
        )


def _share(part: int, whole: int) -> float | None:
    return part / whole if whole else None
