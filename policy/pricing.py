"""What a model call costs: the rate card key of a role's model, and the price of the tokens a
call used by that card (``telemetry.rate_cards``, spec section 3b).

The key is ``<provider>/<model>``, exactly as a rate card is keyed:

- ``openai`` backend: ``<model.openai.provider>/<model.openai.model>`` (provider ``openai``
  unless set: ``ollama/llama3.1`` for a local Ollama, say);
- ``command`` backend: ``command/<model.name>`` (``command/default`` without a name);
- dry run: ``dry_run/dry_run`` (no card needed: it costs nothing and reports no tokens).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from teams_runtime.codecs.config import ModelConfig, RateCard, TeamConfig, TelemetryConfig
from teams_runtime.codecs.model import TokenUsage

__all__ = [
    "call_cost",
    "card_for",
    "input_cost",
    "rate_card_notes",
    "rate_key",
    "unusable_card_warnings",
]

_DRY_RUN_KEY = "dry_run/dry_run"  # needs no card: it costs nothing
_CARDS = "team_runtime.yaml telemetry.rate_cards"

_PER_MILLION = 1_000_000


def rate_key(model: ModelConfig) -> str:
    """The ``provider/model`` key the rate cards price ``model``'s calls under."""
    if model.backend == "openai" and model.openai is not None:
        return f"{model.openai.provider}/{model.openai.model}"
    if model.backend == "command":
        return f"command/{model.name or 'default'}"
    return _DRY_RUN_KEY


def card_for(telemetry: TelemetryConfig, model: ModelConfig) -> RateCard | None:
    """The card that prices ``model``'s calls; None without one, or with telemetry disabled
    (``telemetry.enabled: false``: calls are recorded, never priced)."""
    return telemetry.rate_cards.get(rate_key(model)) if telemetry.enabled else None


def input_cost(card: RateCard, input_tokens: float, cached_tokens: float = 0) -> float:
    """What ``input_tokens`` prompt tokens (``cached_tokens`` of them from the server's cache)
    cost by a token card; 0 for a per-invocation card (its price does not follow tokens).
    A card without a cached rate prices cached tokens as the others."""
    if card.input_per_million_usd is None:
        return 0.0
    cached_rate = card.cached_input_per_million_usd
    if cached_rate is None:
        cached_rate = card.input_per_million_usd
    uncached = max(input_tokens - cached_tokens, 0)
    return (uncached * card.input_per_million_usd + cached_tokens * cached_rate) / _PER_MILLION


def call_cost(card: RateCard | None, usage: TokenUsage | None, *, answered: bool) -> float | None:
    """The USD cost of one call: ``None`` without a card, or for a token card without the
    server's usage; a per-invocation card prices every call the server ``answered``."""
    if card is None:
        return None
    if card.per_invocation_usd is not None:
        return card.per_invocation_usd if answered else None
    if usage is None or card.output_per_million_usd is None:
        return None
    cached = usage.cached_prompt_tokens or 0
    output = usage.completion_tokens * card.output_per_million_usd / _PER_MILLION
    return input_cost(card, usage.prompt_tokens, cached) + output


def rate_card_notes(config: TeamConfig, roles: Sequence[str]) -> list[str]:
    """One line for each rate card that prices none of ``roles``' calls (its key matches no
    role's), and one naming the roles no card prices with the key their calls use: a key
    off by its provider half is otherwise silently never used. Nothing without rate cards."""
    cards = config.telemetry.rate_cards
    if not cards:
        return []
    keys = {role: rate_key(config.model_for(role)) for role in roles}
    notes = []
    unused = [key for key in cards if key not in keys.values()]
    if unused:
        notes.append(
            f"{_CARDS} {', '.join(unused)} {'matches' if len(unused) == 1 else 'match'} no "
            f"role's model: the roles' calls use {', '.join(sorted(set(keys.values())))} (a key "
            "is <provider>/<model>, model.openai.provider openai unless set)."
        )
    unpriced: dict[str, list[str]] = {}
    for role, key in keys.items():
        if key not in cards and key != _DRY_RUN_KEY:
            unpriced.setdefault(key, []).append(role)
    if unpriced:
        named = [f"{key} ({_which(names, roles)})" for key, names in unpriced.items()]
        notes.append(f"{_CARDS} has no card for {', '.join(named)}: their calls' cost_usd is null.")
    if not config.telemetry.enabled:
        notes.append("team_runtime.yaml telemetry.enabled is false: the rate cards price nothing.")
    return notes


def unusable_card_warnings(
    config: TeamConfig, roles: Sequence[str], silent: Collection[str] = ()
) -> list[str]:
    """One line for each token rate card that can price none of ``roles``' calls: they report
    no token usage, as a model command never does, and as the roles in ``silent`` do (their
    server sent none in the stream ``config --probe`` asked for). A token card prices a call
    by the usage it reports: without it, the call's ``cost_usd`` is null, not the card's."""
    if not config.telemetry.enabled:
        return []  # rate_card_notes says that nothing is priced
    cards = config.telemetry.rate_cards
    unpriced: dict[tuple[str, bool], list[str]] = {}  # (key, a command's?) -> roles
    for role in roles:
        model = config.model_for(role)
        card = cards.get(rate_key(model))
        if card is None or card.per_invocation_usd is not None:
            continue
        if model.backend == "command" or role in silent:
            unpriced.setdefault((rate_key(model), model.backend == "command"), []).append(role)
    return [
        f"{_CARDS} {key} prices tokens, but "
        + ("a model command reports" if command else "its server reported")
        + f" no token usage: the calls of {_which(names, roles)} are never priced by it "
        "(cost_usd null); give the card per_invocation_usd to price each call."
        for (key, command), names in unpriced.items()
    ]


def _which(names: list[str], roles: Sequence[str]) -> str:
    """``names`` of ``roles`` said shortly: ``every role``, ``every role but qa``, or them."""
    others = [role for role in roles if role not in names]
    if not others:
        return "every role"
    if len(others) < len(names):
        return f"every role but {', '.join(others)}"
    return ", ".join(names)
