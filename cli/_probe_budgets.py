"""Each role's token budget as ``config --probe`` shows it beside its server's answer: a number
as written, ``auto`` as a run resolves it from the window the server said."""

from __future__ import annotations

import msgspec

from teams_runtime.actors.models import ServerProbe, auto_budget
from teams_runtime.codecs.config import TeamConfig
from teams_runtime.exceptions import ConfigError

__all__ = ["ProbeBudget", "budget_lines", "probe_budgets"]


class ProbeBudget(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One role's budget as ``config --probe`` shows it: as written, and where; an ``auto``
    one as a run resolves it (the window, the prompt's tokens, the ``max_tokens`` sent, and
    whose reserve that is: ``default`` or ``model.openai.max_tokens``), or why it cannot."""

    max_prompt_tokens: int | str
    source: str = msgspec.field(name="from")
    window: int | None = None
    prompt_tokens: int | None = None
    max_tokens: int | None = None
    reserve: str | None = None
    problem: str | None = None
    # A number larger than the server's window (less the answer's tokens) can be refused.
    warning: str | None = None


def probe_budgets(config: TeamConfig, result: ServerProbe) -> dict[str, ProbeBudget]:
    """The budget of each of ``result``'s roles that has one, as a run would resolve it:
    ``auto`` is the window (the server's, else ``model.openai.context_tokens``) less the
    answer's reserve (``model.openai.max_tokens``, else the default), sent as ``max_tokens``."""
    budgets = {}
    for role in result.roles:
        written = config.prompt_budget(role)
        if written.max_prompt_tokens is None:
            if written.source == "role":  # the role opted out of the global budget: said
                budgets[role] = ProbeBudget(max_prompt_tokens="none", source="role")
            continue
        budget = ProbeBudget(max_prompt_tokens=written.max_prompt_tokens, source=written.source)
        openai = config.model_for(role).openai
        if isinstance(written.max_prompt_tokens, int) and openai is not None:
            window = result.context_tokens or openai.context_tokens
            warning = _over_window(written.max_prompt_tokens, window, openai.max_tokens)
            budget = msgspec.structs.replace(budget, window=window, warning=warning)
        if written.max_prompt_tokens == "auto" and openai is not None:
            window = result.context_tokens if result.context_tokens else openai.context_tokens
            reserve = "default" if openai.max_tokens is None else "model.openai.max_tokens"
            budget = msgspec.structs.replace(budget, window=window, reserve=reserve)
            try:
                auto = auto_budget(window, openai.max_tokens) if window else None
            except ConfigError as exc:
                budget = msgspec.structs.replace(budget, problem=str(exc))
            else:
                if auto is not None:
                    budget = msgspec.structs.replace(
                        budget, prompt_tokens=auto.prompt_tokens, max_tokens=auto.max_tokens
                    )
        budgets[role] = budget
    return budgets


def _over_window(budget: int, window: int | None, max_tokens: int | None) -> str | None:
    """Why a budget written as a number cannot hold on a server of ``window`` tokens, whose
    answers take ``max_tokens`` of it (``None``: it can, or the window is unknown)."""
    if window is None or budget + (max_tokens or 0) <= window:
        return None
    answer = f" less max_tokens {max_tokens}" if max_tokens else ""
    return (
        f"warning: larger than the server's window of {window} tokens{answer}, so a prompt "
        "within the budget can still be refused; lower it, or write auto"
    )


def _budget_words(budget: ProbeBudget) -> str:
    """One role's budget as ``config --probe`` says it."""
    head = f"max_prompt_tokens {budget.max_prompt_tokens} ({budget.source})"
    if budget.reserve is None:  # a number: as written
        return f"{head}: {budget.warning}" if budget.warning else head
    if budget.problem is not None:
        return f"{head}: {budget.problem}"
    if budget.window is None:
        return f"{head}: no budget, the window is unknown (set model.openai.context_tokens)"
    reserve = "the default reserve" if budget.reserve == "default" else budget.reserve
    return (
        f"{head}: {budget.prompt_tokens} prompt tokens, the window {budget.window} less "
        f"max_tokens {budget.max_tokens} ({reserve}) sent with each prompt"
    )


def budget_lines(budgets: dict[str, ProbeBudget]) -> list[str]:
    """A line for each budget said, naming the roles whose budget it is."""
    said: dict[str, list[str]] = {}
    for role, budget in budgets.items():
        said.setdefault(_budget_words(budget), []).append(role)
    return [f"  {', '.join(roles)}: {words}" for words, roles in said.items()]
