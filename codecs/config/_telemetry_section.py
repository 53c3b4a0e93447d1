"""Upstream's ``telemetry`` section: whether usage is priced, and the rate card of each exact
``provider/model`` (spec section 3b, with upstream's messages). Checked and kept on
``TeamConfig.telemetry``. Each prompt record's ``cost_usd`` is priced by the card of its
``model`` key (``policy.pricing``), and ``metrics`` sums them.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping

import msgspec

from teams_runtime.codecs.config._value_messages import nearest
from teams_runtime.exceptions import ConfigError

__all__ = ["RateCard", "TelemetryConfig", "telemetry_from_block"]

_PREFIX = "team_runtime.yaml telemetry"
_TOKEN_RATES = ("input_per_million_usd", "cached_input_per_million_usd", "output_per_million_usd")
_FIELDS = (*_TOKEN_RATES, "per_invocation_usd")
# A provider, a slash, a model: no spaces, no wildcard (a card prices one model exactly).
_EXACT_KEY = re.compile(r"[^/\s*]+/[^\s*]*[^/\s*]")


class RateCard(msgspec.Struct, frozen=True, kw_only=True):
    """The price of one ``provider/model``: token rates (USD per million tokens) or a price per
    call. Exactly one of the two kinds is set (``telemetry_from_block`` checks it)."""

    input_per_million_usd: float | None = None
    cached_input_per_million_usd: float | None = None
    output_per_million_usd: float | None = None
    per_invocation_usd: float | None = None


class TelemetryConfig(msgspec.Struct, frozen=True, kw_only=True):
    """The ``telemetry`` section: ``enabled``, rate cards keyed by ``provider/model``, and
    ``otel``: whether each envelope and model call is also an OpenTelemetry span (the ``otel``
    extra; ``actors.telemetry._tracing``)."""

    enabled: bool = True
    rate_cards: dict[str, RateCard] = {}
    otel: bool = False


def _rate_card(key: object, block: object) -> RateCard:
    prefix = f"{_PREFIX}.rate_cards.{key if key != '' else '<empty>'}"
    if not isinstance(key, str) or not _EXACT_KEY.fullmatch(key):
        raise ConfigError(f"{prefix} must use an exact provider/model key.")
    if not isinstance(block, Mapping):
        raise ConfigError(f"{prefix} must be a mapping.")
    for field in block:
        if field not in _FIELDS:
            close = nearest(str(field), list(_FIELDS))
            hint = f"did you mean {close}?" if close else f"the settings are: {', '.join(_FIELDS)}."
            raise ConfigError(f"{prefix}.{field} is not a setting; {hint}")
    given = {field: value for field, value in block.items() if value is not None}
    token = [field for field in _TOKEN_RATES if field in given]
    if token and "per_invocation_usd" in given:
        raise ConfigError(f"{prefix} cannot mix token and per-invocation pricing.")
    if not given:
        raise ConfigError(f"{prefix} must define token rates or per_invocation_usd.")
    if token and not {"input_per_million_usd", "output_per_million_usd"} <= set(token):
        raise ConfigError(f"{prefix} token pricing requires input and output rates.")
    for field, value in given.items():
        if type(value) not in (int, float) or not math.isfinite(value) or value < 0:
            raise ConfigError(f"{prefix}.{field} must be a non-negative finite number.")
    return RateCard(**{field: float(value) for field, value in given.items()})


def telemetry_from_block(block: object) -> TelemetryConfig:
    """Check a ``telemetry`` block (its keys already checked); ``null`` or ``{}`` gives the
    defaults (``enabled: true``, no rate cards, ``otel: false``)."""
    if block is None:
        return TelemetryConfig()
    if not isinstance(block, Mapping):
        raise ConfigError(f"{_PREFIX} must be a mapping.")
    enabled = block.get("enabled", True)
    if type(enabled) is not bool:
        raise ConfigError(f"{_PREFIX}.enabled must be a boolean.")
    otel = block.get("otel", False)
    if type(otel) is not bool:
        raise ConfigError(f"{_PREFIX}.otel must be a boolean.")
    cards = block.get("rate_cards")
    if cards is None:
        cards = {}
    if not isinstance(cards, Mapping):
        raise ConfigError(f"{_PREFIX}.rate_cards must be a mapping.")
    return TelemetryConfig(
        enabled=enabled,
        rate_cards={str(key): _rate_card(key, card) for key, card in cards.items()},
        otel=otel,
    )
