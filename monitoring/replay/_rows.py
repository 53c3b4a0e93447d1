"""One row of a replay: the sums of a (policy, layout) pair's prompts as they go, and the row
they make (what ``replay --json`` prints in ``policies``)."""

from __future__ import annotations

from dataclasses import dataclass

import msgspec

__all__ = ["ReplayRow", "RowSums"]


class ReplayRow(msgspec.Struct, frozen=True, kw_only=True):
    """A (policy, layout) pair's figures over every call replayed.

    ``evidence_kept`` is a share (0 to 1) of ``evidence_pairs``, ``None`` without one;
    ``cost_usd`` the prompts' input cost by the rate cards (cached tokens at the cached rate),
    ``None`` when no card priced a prompt; ``budget_overflows`` the prompts over the budget in
    force (the policy's own, else the role's configured one), ``None`` when none had one.
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

    def add_prompt(self, chars: int, tokens: int, cacheable: int, same: int, events: int) -> None:
        """Count one prompt sent: its size, tokens, cacheable prefix and included events."""
        self.chars += chars
        self.tokens += tokens
        self.cacheable += cacheable
        self.same_role += same
        self.included += events

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
        )
