"""The OpenTelemetry SDK behind ``actors.tracing`` (the ``otel`` extra; imported only when
``telemetry.otel`` is true).

Spans: one per envelope a role handles (``handle <role>``, a child of the span that queued it,
through the envelope's ``traceparent``), and one per model call inside it (``chat <model>``,
with the GenAI semantic conventions' attributes). Metrics: token, cost and omitted-event
counters and a call-duration histogram. Attributes are ids, names and counts from the prompt
record: never prompt, event or payload text.

Prompt-record fields that another release adds (``model``, ``latency_ms``, ``cost_usd``,
``cached_prompt_tokens``, ``outcome``, ``finish_reason``) are read by name when present.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.metrics import Meter, MeterProvider
from opentelemetry.sdk.metrics import MeterProvider as SdkMeterProvider
from opentelemetry.sdk.metrics.export import MetricReader, PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import Span, SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from teams_runtime.actors.tracing import Tracing
from teams_runtime.codecs.config import ModelConfig, TeamConfig
from teams_runtime.codecs.envelopes import MessageEnvelope
from teams_runtime.codecs.prompt_records import PromptRecord

__all__ = ["OtelTracing", "default_providers", "model_name", "model_names"]

_SCOPE = "teams_runtime"
_PROPAGATOR = TraceContextTextMapPropagator()


def model_name(model: ModelConfig) -> str:
    """The model a role's calls ask for, as ``gen_ai.request.model`` names it."""
    if model.backend == "openai" and model.openai is not None:
        return model.openai.model
    return model.name or model.backend


def model_names(config: TeamConfig, roles: tuple[str, ...]) -> dict[str, str]:
    """Each role's model name (``model_name``)."""
    return {role: model_name(config.model_for(role)) for role in roles}


def default_providers() -> tuple[TracerProvider, SdkMeterProvider]:
    """Providers exporting over OTLP/HTTP; the exporters read the endpoint, headers, timeout
    and protocol settings from the standard ``OTEL_EXPORTER_OTLP_*`` variables."""
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    # OTEL_SERVICE_NAME (or OTEL_RESOURCE_ATTRIBUTES) wins; otherwise the runtime's name.
    given = {} if os.environ.get("OTEL_SERVICE_NAME") else {"service.name": "teams-runtime"}
    resource = Resource.create(given)
    tracer_provider = TracerProvider(resource=resource)
    tracer_provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    readers: list[MetricReader] = [PeriodicExportingMetricReader(OTLPMetricExporter())]
    return tracer_provider, SdkMeterProvider(resource=resource, metric_readers=readers)


class _EnvelopeSpan:
    """The span of one envelope, and when its last model call ended (where the next call's
    span starts when its record carries no ``latency_ms``)."""

    def __init__(self, span: Span) -> None:
        self.span = span
        self.last_end_ns = time.time_ns()

    def outcome(self, outcome: str) -> None:
        self.span.set_attribute("teams_runtime.outcome", outcome)


class OtelTracing(Tracing):
    """Spans and metrics through the given providers (``default_providers`` if none)."""

    enabled = True

    def __init__(
        self,
        *,
        models: Mapping[str, str],
        tracer_provider: TracerProvider | None = None,
        meter_provider: MeterProvider | None = None,
    ) -> None:
        if tracer_provider is None or meter_provider is None:
            made_tracer, made_meter = default_providers()
            tracer_provider = tracer_provider or made_tracer
            meter_provider = meter_provider or made_meter
        self._tracer_provider = tracer_provider
        self._meter_provider = meter_provider
        self._tracer = tracer_provider.get_tracer(_SCOPE)
        self._models = dict(models)
        self._current: dict[int, _EnvelopeSpan] = {}  # by span id: the envelope spans open
        meter: Meter = meter_provider.get_meter(_SCOPE)
        self._tokens = meter.create_counter(
            "gen_ai.client.token.usage.total",
            unit="{token}",
            description="Tokens the model servers reported, by gen_ai.token.type",
        )
        self._cost = meter.create_counter(
            "teams_runtime.cost", unit="USD", description="What the model calls cost"
        )
        self._omitted = meter.create_counter(
            "teams_runtime.omitted_events",
            unit="{event}",
            description="Events compaction left out of the prompts",
        )
        self._duration = meter.create_histogram(
            "gen_ai.client.operation.duration", unit="s", description="Model call duration"
        )

    @contextmanager
    def envelope_span(self, role: str, envelope: MessageEnvelope | None) -> Iterator[_EnvelopeSpan]:
        parent = None
        if envelope is not None and envelope.traceparent:
            parent = _PROPAGATOR.extract({"traceparent": envelope.traceparent})
        attributes: dict[str, Any] = {"teams_runtime.role": role}
        if envelope is not None:
            attributes.update(
                {
                    "teams_runtime.request_id": envelope.request_id,
                    "teams_runtime.envelope_id": envelope.envelope_id,
                    "teams_runtime.sender": envelope.sender,
                }
            )
        with self._tracer.start_as_current_span(
            f"handle {role}", context=parent, kind=SpanKind.CONSUMER, attributes=attributes
        ) as span:
            held = _EnvelopeSpan(span)
            key = span.get_span_context().span_id
            self._current[key] = held
            try:
                yield held
            finally:
                del self._current[key]

    def traceparent(self) -> str | None:
        carrier: dict[str, str] = {}
        _PROPAGATOR.inject(carrier, context=otel_context.get_current())
        return carrier.get("traceparent")

    def model_call(self, record: PromptRecord) -> None:
        now = time.time_ns()
        held = self._current.get(trace.get_current_span().get_span_context().span_id)
        latency_ms = _field(record, "latency_ms")
        if isinstance(latency_ms, int | float):
            start = now - int(latency_ms * 1_000_000)
        else:  # a record without latency: the call began where the previous one ended
            start = held.last_end_ns if held is not None else now
        # The record's `model` is the rate-card key, `provider/model`: the request's model is
        # what it asked the server for (this role's model name).
        model = self._models.get(record.role) or _field(record, "model") or "unknown"
        answered = _answered(record)
        attributes = _call_attributes(record, str(model), answered)
        span = self._tracer.start_span(
            f"chat {model}", kind=SpanKind.CLIENT, attributes=attributes, start_time=start
        )
        if not answered:
            span.set_attribute("error.type", str(_field(record, "outcome") or "failed"))
            span.set_status(Status(StatusCode.ERROR, "the model call gave no answer"))
        span.end(end_time=now)
        if held is not None:
            held.last_end_ns = now
        self._count(record, str(model), attributes, (now - start) / 1e9)

    def _count(
        self, record: PromptRecord, model: str, attributes: Mapping[str, Any], seconds: float
    ) -> None:
        labels = {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": model,
            "teams_runtime.role": record.role,
            "teams_runtime.purpose": record.purpose,
        }
        if record.prompt_tokens is not None:
            self._tokens.add(record.prompt_tokens, {**labels, "gen_ai.token.type": "input"})
        if record.completion_tokens is not None:
            self._tokens.add(record.completion_tokens, {**labels, "gen_ai.token.type": "output"})
        cost = attributes.get("teams_runtime.cost_usd")
        if isinstance(cost, float):
            self._cost.add(cost, labels)
        self._omitted.add(record.omitted_events, labels)
        self._duration.record(seconds, labels)

    def close(self) -> None:
        # Flushed, not shut down: a Team may run again (the SDK shuts down at exit itself).
        self._tracer_provider.force_flush()
        flush = getattr(self._meter_provider, "force_flush", None)
        if callable(flush):
            flush()


def _answered(record: PromptRecord) -> bool:
    """Whether an answer came back: one the contract refused (outcome ``invalid``, a repair
    follows) is an answer, so its span is no error; ``failed`` and ``server_away`` are."""
    outcome = _field(record, "outcome")
    if outcome is not None:
        return outcome in ("completed", "invalid")
    return record.answer_read is not None  # a record without an outcome (schema 1)


def _field(record: PromptRecord, name: str) -> Any:
    """A record field that a later schema may add: its value, or None."""
    return getattr(record, name, None)


def _call_attributes(record: PromptRecord, model: str, answered: bool) -> dict[str, Any]:
    """The GenAI and ``teams_runtime.*`` attributes of a model call: counts and ids only."""
    finish = _field(record, "finish_reason") or ("stop" if answered else "error")
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": model,
        "gen_ai.response.finish_reasons": [str(finish)],
        "teams_runtime.role": record.role,
        "teams_runtime.purpose": record.purpose,
        "teams_runtime.request_id": record.request_id,
        "teams_runtime.total_events": record.total_events,
        "teams_runtime.included_events": record.included_events,
        "teams_runtime.omitted_events": record.omitted_events,
        "teams_runtime.compacted": record.compacted,
        "teams_runtime.prompt_chars": record.prompt_chars,
        "teams_runtime.full_history_chars": record.full_history_chars,
    }
    if record.prompt_tokens is not None:
        attributes["gen_ai.usage.input_tokens"] = record.prompt_tokens
    if record.completion_tokens is not None:
        attributes["gen_ai.usage.output_tokens"] = record.completion_tokens
    for name, key in (
        ("cached_prompt_tokens", "gen_ai.usage.cache_read.input_tokens"),
        ("attempt_kind", "teams_runtime.attempt_kind"),
        ("outcome", "teams_runtime.outcome"),
    ):
        value = _field(record, name)
        if value is not None:
            attributes[key] = value
    cost = _field(record, "cost_usd")
    if isinstance(cost, int | float):
        attributes["teams_runtime.cost_usd"] = float(cost)
    return attributes
