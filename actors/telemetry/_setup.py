"""Which tracing a team gets: none, or the OpenTelemetry SDK's (``telemetry.otel``). Apart from
``_tracing`` so that the SDK module, which builds on it, is imported from here only."""

from __future__ import annotations

from types import ModuleType

from teams_runtime.actors.telemetry._tracing import NO_TRACING, Tracing
from teams_runtime.codecs.config import TeamConfig
from teams_runtime.exceptions import ConfigError
from teams_runtime.storage.install_hint import extra_install_command

__all__ = ["check_otel", "tracing_for"]


def _sdk() -> ModuleType:
    """The SDK's module (``actors.telemetry._otel``); ``ConfigError`` naming the install command
    if the ``otel`` extra is not installed."""
    try:
        from teams_runtime.actors.telemetry import _otel as otel_tracing
    except ImportError as exc:
        raise ConfigError(
            "team_runtime.yaml telemetry.otel is true, but OpenTelemetry is not installed "
            f"({exc.name or 'opentelemetry'} is missing): {extra_install_command('otel')}"
        ) from None
    return otel_tracing


def check_otel(config: TeamConfig) -> None:
    """Refuse, as ``tracing_for`` would, a config with ``telemetry.otel`` true on a host
    without the ``otel`` extra (``config`` says so before ``run`` has to)."""
    if config.telemetry.otel:
        _sdk()


def tracing_for(config: TeamConfig, roles: tuple[str, ...]) -> Tracing:
    """The team's tracing: ``NO_TRACING`` unless ``telemetry.otel`` is true; then the SDK's,
    exporting over OTLP/HTTP where the ``OTEL_EXPORTER_OTLP_*`` variables say. Raises
    ``ConfigError`` (with the install command) if the ``otel`` extra is not installed."""
    if not config.telemetry.otel:
        return NO_TRACING
    sdk = _sdk()
    tracing: Tracing = sdk.OtelTracing(models=sdk.model_names(config, roles))
    return tracing
