"""Where the OpenTelemetry SDK sends a team's spans and metrics (OTLP/HTTP), how long a run's
end waits for it, and what the SDK says when it cannot.

- Each export gives up after ``EXPORT_TIMEOUT_SECONDS`` (retries included) unless
  ``OTEL_EXPORTER_OTLP_TIMEOUT`` (or a per-signal ``..._TRACES_TIMEOUT``/``..._METRICS_TIMEOUT``)
  says otherwise: the SDK's own 10 s per signal, twice over, made a run with no collector end
  some 20 s late.
- A run's end waits for its export at most one export timeout in all (``EndOfRun``): the SDK's
  flush sends every buffered batch, each with its own timeout (with
  ``OTEL_BSP_MAX_EXPORT_BATCH_SIZE=1`` and no collector, one timeout per span). Past it, the
  batches not sent are dropped and counted in one line.
- The metrics are exported when the team's run ends (``OtelTracing.close``), not once more at
  exit: the SDK's exit-time shutdown would send the same cumulative figures again.
- The SDK's log lines (a retry line per attempt, with the endpoint's raw error) go through
  loguru instead, one line per kind of problem for the process: the first of each says what
  happened, in the SDK's words with errors named by their type; repeats are not logged.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence

from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import MetricReader, PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from teams_runtime._logs import logger

__all__ = ["EXPORT_TIMEOUT_SECONDS", "EndOfRun", "export_timeout", "otlp_providers"]

EXPORT_TIMEOUT_SECONDS = 3.0
_LONGEST_ARGUMENT = 80  # characters of an SDK message's text argument kept in our line


def export_timeout(signal: str) -> float | None:
    """The export timeout for ``signal`` (``TRACES``, ``METRICS``) in seconds: ours, or
    ``None`` when a variable sets it (the exporter then reads it, as the SDK documents)."""
    for name in (f"OTEL_EXPORTER_OTLP_{signal}_TIMEOUT", "OTEL_EXPORTER_OTLP_TIMEOUT"):
        if os.environ.get(name, "").strip():
            return None
    return EXPORT_TIMEOUT_SECONDS


def _timeout_in_force(signal: str) -> float:
    """The export timeout the exporter of ``signal`` uses, in seconds."""
    ours = export_timeout(signal)
    if ours is not None:
        return ours
    for name in (f"OTEL_EXPORTER_OTLP_{signal}_TIMEOUT", "OTEL_EXPORTER_OTLP_TIMEOUT"):
        with contextlib.suppress(ValueError):
            return max(float(os.environ.get(name, "")), 0.0)
    return EXPORT_TIMEOUT_SECONDS


class EndOfRun(SpanExporter):
    """An exporter that drops what it is given once a run's end has waited its budget.

    Between runs it passes every batch on. ``ending()`` bounds a flush: batches handed over
    after ``budget_seconds`` are dropped at once (counted), so the flush's wait is the budget
    and at most one export under way, whatever the number of batches."""

    def __init__(self, inner: SpanExporter, budget_seconds: float) -> None:
        self._inner = inner
        self._budget = budget_seconds
        self._until: float | None = None
        self._dropped = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        until = self._until
        if until is not None and time.monotonic() >= until:
            self._dropped += len(spans)
            return SpanExportResult.FAILURE
        return self._inner.export(spans)

    def shutdown(self) -> None:
        self._inner.shutdown()

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return self._inner.force_flush(timeout_millis)

    @contextlib.contextmanager
    def ending(self) -> Iterator[Callable[[], float]]:
        """Bound the exports of the block by the budget; yields the seconds left of it."""
        self._until = until = time.monotonic() + self._budget
        try:
            yield lambda: max(until - time.monotonic(), 0.0)
        finally:
            self._until = None
            dropped, self._dropped = self._dropped, 0
            if dropped:
                logger.warning(
                    "OpenTelemetry: {} spans not sent: a run's end waits at most {:g} s for its "
                    "export",
                    dropped,
                    self._budget,
                )


def otlp_providers() -> tuple[TracerProvider, MeterProvider, EndOfRun]:
    """Providers exporting over OTLP/HTTP, and the span exporter that bounds a run's end; the
    exporters read the endpoint, headers, timeout and protocol settings from the standard
    ``OTEL_EXPORTER_OTLP_*`` variables."""
    _route_sdk_logs()
    # OTEL_SERVICE_NAME (or OTEL_RESOURCE_ATTRIBUTES) wins; otherwise the runtime's name.
    given = {} if os.environ.get("OTEL_SERVICE_NAME") else {"service.name": "teams-runtime"}
    resource = Resource.create(given)
    tracer_provider = TracerProvider(resource=resource)
    spans = EndOfRun(
        OTLPSpanExporter(timeout=export_timeout("TRACES")), _timeout_in_force("TRACES")
    )
    tracer_provider.add_span_processor(BatchSpanProcessor(spans))
    metrics = OTLPMetricExporter(timeout=export_timeout("METRICS"))
    readers: list[MetricReader] = [PeriodicExportingMetricReader(metrics)]
    # No shutdown at exit: the run's end exported the metrics already (see the docstring).
    meter_provider = MeterProvider(
        resource=resource, metric_readers=readers, shutdown_on_exit=False
    )
    return tracer_provider, meter_provider, spans


class _OnePerKind(logging.Handler):
    """The SDK's warnings and errors as loguru lines: the first of each kind (its logger and
    message template), content-free; the rest are dropped."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self._seen: set[tuple[str, str]] = set()
        self._seen_lock = threading.Lock()

    def emit(self, record: logging.LogRecord) -> None:
        kind = (record.name, str(record.msg))
        with self._seen_lock:
            if kind in self._seen:
                return
            self._seen.add(kind)
        text = str(record.msg)
        arguments = _arguments(record)
        # Arguments that do not fit the template leave the template alone.
        with contextlib.suppress(TypeError, ValueError):
            text = text % tuple(_plain(value) for value in arguments) if arguments else text
        level = "ERROR" if record.levelno >= logging.ERROR else "WARNING"
        logger.log(level, "OpenTelemetry SDK: {} (repeats are not logged)", text)


def _arguments(record: logging.LogRecord) -> tuple[object, ...]:
    args = record.args
    if args is None:
        return ()
    return args if isinstance(args, tuple) else (args,)


def _plain(value: object) -> object:
    """An SDK message argument as our line shows it: an error by its type (its text holds the
    endpoint's raw answer), a long text cut, numbers as they are."""
    if isinstance(value, BaseException):
        return type(value).__name__
    if isinstance(value, str) and len(value) > _LONGEST_ARGUMENT:
        return value[:_LONGEST_ARGUMENT] + "..."
    return value


def _route_sdk_logs() -> None:
    """Send the ``opentelemetry`` loggers' lines through ``_OnePerKind`` (once a process), and
    no longer to stderr by Python's last-resort handler."""
    sdk = logging.getLogger("opentelemetry")
    if not any(isinstance(handler, _OnePerKind) for handler in sdk.handlers):
        sdk.addHandler(_OnePerKind())
        sdk.propagate = False
