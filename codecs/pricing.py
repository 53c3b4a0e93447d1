"""What a model call costs: the rate card key of a role's model, and the price of the tokens a
call used by that card (``telemetry.rate_cards``, spec section 3b).

The key is ``<provider>/<model>``, exactly as a rate card is keyed:

- ``openai`` backend: ``<model.openai.provider>/<model.openai.model>`` (provider ``openai``
  unless set: ``ollama/llama3.1`` for a local Ollama, say);
- ``command`` backend: ``command/<model.name>`` (``command/default`` without a name);
- dry run: ``dry_run/dry_run`` (no card needed: it costs nothing and reports no tokens).
"""

from __future__ import annotations

from teams_runtime.codecs.config import ModelConfig, RateCard, TelemetryConfig
from teams_runtime.codecs.model_replies import TokenUsage

__all__ = ["call_cost", "card_for", "input_cost", "rate_key"]

_PER_MILLION = 1_000_000


def rate_key(model: ModelConfig) -> str:
    """The ``provider/model`` key the rate cards price ``model``'s calls under."""
    if model.backend == "openai" and model.openai is not None:
        return f"{model.openai.provider}/{model.openai.model}"
    if model.backend == "command":
        return f"command/{model.name or 'default'}"
    return "dry_run/dry_run"


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
