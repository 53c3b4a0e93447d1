"""The policies a replay compares, by the names users give them: ``configured``,
``recent_only``, ``full``, ``recorded``, ``max_prompt_tokens:N`` and ``R/M``; each one's
``prompt_context`` and token budget for a role at a hop."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Literal

import msgspec

from teams_runtime.codecs.config import (
    DEFAULT_STEP,
    MOST_PROMPT_TOKENS,
    PromptContextConfig,
    TeamConfig,
    event_count_problem,
)
from teams_runtime.codecs.prompt_records import PromptRecord
from teams_runtime.exceptions import ConfigError
from teams_runtime.policy.budget import Budget

__all__ = ["DEFAULT_POLICIES", "POLICY_FORMS", "Policy", "asked_policies", "parse_policy"]

PolicyKind = Literal["configured", "recent_only", "full", "recorded", "budget", "events"]

# What `replay` compares without `--policy`: the config in force, the same tail without
# backfill, and no compaction at all.
DEFAULT_POLICIES = ("configured", "recent_only", "full")
POLICY_FORMS = (
    "configured, recent_only, full, recorded, max_prompt_tokens:N (N tokens, the configured "
    "events) or R/M (recent_events/max_events, 1 <= R <= M)"
)

_BUDGET = re.compile(r"max_prompt_tokens:(\d+)")
_PAIR = re.compile(r"(\d+)/(\d+)")


class Policy(msgspec.Struct, frozen=True, kw_only=True):
    """A policy to replay: its name as a report shows it, and what it sets (``None``: the
    config's)."""

    name: str
    kind: PolicyKind
    recent_events: int | None = None
    max_events: int | None = None
    max_prompt_tokens: int | None = None

    def context_for(self, config: TeamConfig, record: PromptRecord) -> PromptContextConfig:
        """The ``prompt_context`` the prompt of ``record``'s hop is projected under (laid out
        as a replay's row says, but for ``recorded``: the call's own layout and step)."""
        configured = config.prompt_context
        match self.kind:
            case "configured" | "budget":
                return configured
            case "full":
                return msgspec.structs.replace(configured, enabled=False)
            case "recent_only":
                recent = configured.recent_events
                return PromptContextConfig(recent_events=recent, max_events=recent)
            case "recorded":  # as the call was sent: its counts, layout and step
                return PromptContextConfig(
                    enabled=record.enabled,
                    recent_events=record.recent_events,
                    max_events=record.max_events,
                    layout=record.layout or "upstream",
                    step=record.step or DEFAULT_STEP,
                )
            case "events":
                return PromptContextConfig(
                    recent_events=self.recent_events or 1, max_events=self.max_events or 1
                )

    def budget_for(self, config: TeamConfig, record: PromptRecord) -> Budget | None:
        """The budget the prompt is fitted to under this policy (``None``: not fitted)."""
        if self.kind == "budget" and self.max_prompt_tokens is not None:
            return Budget(tokens=self.max_prompt_tokens, setting=self.name)
        if self.kind == "recorded" and record.max_prompt_tokens is not None:
            return Budget(tokens=record.max_prompt_tokens, setting="the recorded budget")
        if self.kind == "configured":
            return configured_budget(config, record.role)
        return None


def configured_budget(config: TeamConfig, role: str) -> Budget | None:
    """``role``'s budget as written in ``config`` when it is a number (``auto`` is resolved
    from a model server by a run, which a replay does not ask)."""
    written = config.prompt_budget(role)
    if not isinstance(written.max_prompt_tokens, int):
        return None
    where = f"roles.{role}." if written.source == "role" else ""
    setting = f"{where}prompt_context.max_prompt_tokens"
    return Budget(tokens=written.max_prompt_tokens, setting=setting)


def parse_policy(text: str) -> Policy:
    """The policy ``text`` names; ``ValueError`` saying the valid forms otherwise."""
    name = text.strip()
    if name in ("configured", "recent_only", "full", "recorded"):
        return Policy(name=name, kind=name)  # type: ignore[arg-type]
    if found := _BUDGET.fullmatch(name):
        tokens = int(found.group(1))
        if not 1 <= tokens <= MOST_PROMPT_TOKENS:
            raise ValueError(
                f"{name!r}: N must be from 1 to {MOST_PROMPT_TOKENS} tokens; valid policies: "
                + POLICY_FORMS
            )
        return Policy(name=f"max_prompt_tokens:{tokens}", kind="budget", max_prompt_tokens=tokens)
    if found := _PAIR.fullmatch(name):
        recent, most = int(found.group(1)), int(found.group(2))
        problem = event_count_problem(recent) or event_count_problem(most)
        if problem is None and recent > most:
            problem = "must have R <= M"
        if problem is not None:
            raise ValueError(f"{name!r}: {problem}; valid policies: {POLICY_FORMS}")
        try:
            PromptContextConfig(recent_events=recent, max_events=most)
        except ConfigError as exc:  # the config's own check, should it ever say more
            raise ValueError(f"{name!r}: {exc}; valid policies: {POLICY_FORMS}") from None
        return Policy(name=f"{recent}/{most}", kind="events", recent_events=recent, max_events=most)
    raise ValueError(f"unknown policy {name!r}; valid policies: {POLICY_FORMS}")


def asked_policies(asked: Sequence[Policy] | None) -> list[Policy]:
    """The policies asked for, each once in the order asked (a repeated flag is not a second
    row), else ``DEFAULT_POLICIES``."""
    once = list({policy.name: policy for policy in asked or ()}.values())
    return once or [parse_policy(name) for name in DEFAULT_POLICIES]
