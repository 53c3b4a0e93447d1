"""The token budget as ``prompt``, ``project`` and ``explain`` show it: the budget in force
(``--max-prompt-tokens``, else the role's or the config's), each event's tokens at the rate a
run would count them (the model's learned from the workspace's prompt log, else the default),
and the prompt as the budget leaves it; and the layout (``--layout``, ``--step`` applied), its
figures beside the budget's. Nothing is sent, nothing is written.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable
from typing import Any

import msgspec

from teams_runtime.cli._flags import team_role
from teams_runtime.cli._output import UserError
from teams_runtime.codecs.config import PromptContextConfig, TeamConfig
from teams_runtime.codecs.formats import JsonObject
from teams_runtime.codecs.projection_reply import Projection
from teams_runtime.codecs.request_records import (
    EVENT_SEPARATOR,
    encode_json,
    format_event,
    pretty_event_size,
)
from teams_runtime.exceptions import PromptTooLarge
from teams_runtime.monitoring import seeded_ratios
from teams_runtime.monitoring.replay import envelope_from
from teams_runtime.policy.budget import Budget, FittedPrompt, fit_prompt, rate_tokens
from teams_runtime.policy.pricing import rate_key
from teams_runtime.policy.projection import notice_text
from teams_runtime.policy.prompts import PromptBundle, build_prompt
from teams_runtime.policy.token_counts import LearnedRatios, TokenRate
from teams_runtime.storage import Workspace

__all__ = [
    "budget_figures",
    "budget_of",
    "budget_rows",
    "budgeted",
    "envelope_from",
    "fit_shown",
    "layout_shown",
    "pretty_sizes",
    "rate_of",
    "run_ratios",
    "with_layout",
]


def budget_of(config: TeamConfig, role: str | None, args: argparse.Namespace) -> Budget | None:
    """The budget to show: the flag's, else ``role``'s in force (or, without a role, the
    config's), else none. ``auto`` is resolved by a run from its server: said, not guessed."""
    if args.max_prompt_tokens is not None:
        return Budget(tokens=args.max_prompt_tokens, setting="--max-prompt-tokens")
    written = config.prompt_budget(role) if role else None
    value = written.max_prompt_tokens if written else config.prompt_context.max_prompt_tokens
    if value == "auto":
        print(
            "teams-runtime: note: max_prompt_tokens is auto, resolved from the model server "
            "when a run starts; give --max-prompt-tokens N to see a budget here",
            file=sys.stderr,
        )
        return None
    if not isinstance(value, int):
        return None
    where = "role" if written and written.source == "role" else "global"
    setting = f"roles.{role}." if where == "role" else ""
    return Budget(tokens=value, setting=f"{setting}prompt_context.max_prompt_tokens")


def rate_of(workspace: Workspace, config: TeamConfig, role: str | None) -> TokenRate:
    """The rate a run would count ``role``'s prompts at without a tokenizer: its model's
    ratio learned from the workspace's prompt log (as ``run_ratios`` seeds it), else the
    default."""
    model = rate_key(config.model_for(role) if role else config.model)
    return seeded_ratios(workspace.logs_dir, {model}).rate(model)


def run_ratios(
    workspace: Workspace, config: TeamConfig, roles: Iterable[str]
) -> LearnedRatios | None:
    """The learned ratios a run of ``roles`` starts with: those of the models of the roles
    with a budget, seeded from the newest of the workspace's prompt records; ``None`` (and
    nothing read) when none of them has a budget."""
    models = {
        rate_key(config.model_for(role))
        for role in roles
        if config.prompt_budget(role).max_prompt_tokens is not None
    }
    return seeded_ratios(workspace.logs_dir, models) if models else None


def fit_shown(bundle: PromptBundle, budget: Budget | None, rate: TokenRate) -> FittedPrompt:
    """``bundle`` as ``budget`` leaves it (itself without one; its estimate then 0); a prompt
    that cannot fit is the user's error, with the reason a run would fail with."""
    if budget is None:
        return FittedPrompt(bundle, 0)
    try:
        return fit_prompt(bundle, budget, rate_tokens(bundle, rate))
    except PromptTooLarge as exc:
        raise UserError(str(exc)) from None


def budget_rows(
    whole: Projection, fitted: Projection, sizes: list[int], rate: TokenRate
) -> tuple[list[int], dict[int, str]]:
    """Each event's tokens (``sizes``: every event's pretty size) and, for the events the
    selection kept and the budget did not, why (``omitted: budget``, or too large alone)."""
    separator = len(EVENT_SEPARATOR)
    tokens = [rate.tokens(size + separator) for size in sizes]
    oversized = {item.index for item in fitted.budget.oversized} if fitted.budget else set()
    kept = set(fitted.selected_indices)
    decided = {
        index: "omitted: budget (too large alone)" if index in oversized else "omitted: budget"
        for index in whole.selected_indices
        if index not in kept
    }
    return tokens, decided


def pretty_sizes(events: list[Any]) -> list[int]:
    """Every event's size as a prompt lays it out."""
    return [
        pretty_event_size(event)
        if isinstance(event, msgspec.Raw)
        else len(format_event(encode_json(event)))
        for event in events
    ]


def _record_bundle(projection: Projection) -> PromptBundle:
    """The record alone as a prompt carries it (no brief, no envelope): what ``project`` and
    ``explain`` fit to a budget without ``--role``."""
    return PromptBundle(
        role="",
        request_id=projection.request_id,
        kind="task",
        reply_kind="task",
        projection=projection,
        notice=notice_text(projection),
        head="",
        envelope=None,
    )


def budgeted(
    args: argparse.Namespace, team: TeamConfig, projection: Projection
) -> tuple[Projection, BudgetFigures]:
    """``projection`` as the budget in force for ``--role`` (or the record alone) leaves it,
    and the budget's figures (``budget_figures``; none without a budget)."""
    role = team_role(team.cast, args.role) if args.role else None
    budget = budget_of(team, role, args)
    if budget is None:
        return projection, {}
    if role is None:
        bundle = _record_bundle(projection)
    else:
        envelope = envelope_from(projection, projection.request_id, role)
        kind = team.cast.prompt_kind_of(role)
        bundle = build_prompt(
            kind, role=role, projection=projection, envelope=envelope, cast=team.cast
        )
    rate = rate_of(Workspace(args.workspace), team, role)
    fitted = fit_shown(bundle, budget, rate)
    return fitted.bundle.projection, budget_figures(budget, fitted.estimate, rate)


# The budget's figures by name: the budget (tokens), the estimate, and how it was counted.
BudgetFigures = dict[str, int | str]


def budget_figures(budget: Budget | None, estimate: int, rate: TokenRate) -> BudgetFigures:
    """The budget's figures ``prompt``, ``project`` and ``explain`` show alike (keys of
    ``--json``, as a prompt record names them): the budget in force, the prompt's estimate and
    how it was counted; none without a budget."""
    if budget is None:
        return {}
    return {
        "max_prompt_tokens": budget.tokens,
        "prompt_tokens_estimate": estimate,
        "token_count_method": rate.method,
    }


def layout_shown(config: PromptContextConfig) -> JsonObject:
    """The layout's figures a report shows: none for the default layout (its reports stay as
    they were), else ``layout`` and ``step``."""
    return {} if config.layout == "upstream" else {"layout": config.layout, "step": config.step}


def with_layout(base: PromptContextConfig, args: argparse.Namespace) -> PromptContextConfig:
    """``base`` with --layout and --step (only with the shared_prefix layout, as the config's)."""
    layout = args.layout or base.layout
    if args.step is not None and layout != "shared_prefix":
        raise UserError(
            "--step applies only with the shared_prefix layout: add --layout shared_prefix "
            "(or set prompt_context.layout: shared_prefix)."
        )
    step = base.step if args.step is None else args.step
    if (layout, step) == (base.layout, base.step):
        return base
    return msgspec.structs.replace(base, layout=layout, step=step)
