"""What a team reports about itself: tracing hooks, the OpenTelemetry SDK behind them, and the
prompt log."""

from __future__ import annotations

from teams_runtime.actors.telemetry._prompt_log import (
    RECORD_KEY,
    CallFacts,
    attempt_kind_of,
    log_prompt,
)
from teams_runtime.actors.telemetry._setup import check_otel, tracing_for
from teams_runtime.actors.telemetry._tracing import (
    NO_TRACING,
    Tracing,
    active,
    stamping,
    traced_envelope,
)

__all__ = [
    "NO_TRACING",
    "RECORD_KEY",
    "CallFacts",
    "Tracing",
    "active",
    "attempt_kind_of",
    "check_otel",
    "log_prompt",
    "stamping",
    "traced_envelope",
    "tracing_for",
]
