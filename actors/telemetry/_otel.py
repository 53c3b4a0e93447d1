"""The OpenTelemetry SDK behind ``actors.telemetry`` (the ``otel`` extra; imported only when
``telemetry.otel`` is true).

Spans: one per envelope a role handles (``handle <role>``, a child of the span that queued it,
through the envelope's ``traceparent``), and one per model call inside it (``chat <model>``,
with the GenAI semantic conventions' attributes). Metrics: the conventions' token-usage and
call-duration histograms, and our cost and omitted-event counters. Attributes are ids, names
and counts from the prompt record: never prompt, event or payload text.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import TYPE_CHECKING

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.metrics import Meter, MeterProvider
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import Span, SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from opentelemetry.util.types import AttributeValue

from teams_runtime.actors.telemetry._tracing import Tracing
from teams_runtime.codecs.config import ModelConfig, TeamConfig
from teams_runtime.codecs.envelopes import MessageEnvelope
from teams_runtime.codecs.prompt_records import PromptRecord

if TYPE_CHECKING:
    from teams_runtime.actors.telemetry._otel_export import EndOfRun

__all__ = ["OtelTracing", "model_name", "model_names"]

_SCOPE = "teams_runtime"
_TOKEN_BUCKETS = [float(4**power) for power in range(14)]  # 1, 4, 16, ... 67108864
_DURATION_BUCKETS = [0.01 * 2**power for power in range(14)]  # 0.01, 0.02, ... 81.92 s
_PROPAGATOR = TraceContextTextMapPropagator()


def model_name(model: ModelConfig) -> str:
    """The model a role's calls ask for, as ``gen_ai.request.model`` names it."""
    if model.backend == "openai" and model.openai is not None:
        return model.openai.model
    return model.name or model.backend


def model_names(config: TeamConfig, roles: tuple[str, ...]) -> dict[str, str]:
    """Each role's model name (``model_name``)."""
    return {role: model_name(config.model_for(role)) for role in roles}


class _EnvelopeSpan:
    """The span of one envelope, and when its last model call ended (where the next call's
    span starts when its record carries no ``latency_ms``)."""

    def __init__(self, span: Span) -> None:
        self.span = span
        self.last_end_ns = time.time_ns()

    def outcome(self, outcome: str) -> None:
        self.span.set_attribute("teams_runtime.outcome", outcome)


class OtelTracing(Tracing):
    """Spans and metrics through the given providers (``otel_export.otlp_providers`` if none)."""

    enabled = True

    def __init__(
        self,
        *,
        models: Mapping[str, str],
        tracer_provider: TracerProvider | None = None,
        meter_provider: MeterProvider | None = None,
    ) -> None:
        self._end_of_run: EndOfRun | None = None
        if tracer_provider is None or meter_provider is None:
            from teams_runtime.actors.telemetry._otel_export import otlp_providers

            made_tracer, made_meter, self._end_of_run = otlp_providers()
            tracer_provider = tracer_provider or made_tracer
            meter_provider = meter_provider or made_meter
        self._tracer_provider = tracer_provider
        self._meter_provider = meter_provider
        self._tracer = tracer_provider.get_tracer(_SCOPE)
        self._models = dict(models)
        self._current: dict[int, _EnvelopeSpan] = {}  # by span id: the envelope spans open
        meter: Meter = meter_provider.get_meter(_SCOPE)
        # The GenAI semantic conventions' two client histograms, with their advised buckets.
        self._tokens = meter.create_histogram(
            "gen_ai.client.token.usage",
            unit="{token}",
            description="Number of input and output tokens used",
            explicit_bucket_boundaries_advisory=_TOKEN_BUCKETS,
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
            "gen_ai.client.operation.duration",
            unit="s",
            description="GenAI operation duration",
            explicit_bucket_boundaries_advisory=_DURATION_BUCKETS,
        )

    @contextmanager
    def envelope_span(self, role: str, envelope: MessageEnvelope | None) -> Iterator[_EnvelopeSpan]:
        parent = None
        if envelope is not None and envelope.traceparent:
            parent = _PROPAGATOR.extract({"traceparent": envelope.traceparent})
        attributes: dict[str, AttributeValue] = {"teams_runtime.role": role}
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
        if record.latency_ms is not None:
            start = now - int(record.latency_ms * 1_000_000)
        else:  # a record without latency: the call began where the previous one ended
            start = held.last_end_ns if held is not None else now
        # The record's `model` is the rate-card key, `provider/model`: the request's model is
        # what it asked the server for (this role's model name).
        model = self._models.get(record.role) or record.model or "unknown"
        replied = _replied(record)
        attributes = _call_attributes(record, model, replied)
        span = self._tracer.start_span(
            f"chat {model}", kind=SpanKind.CLIENT, attributes=attributes, start_time=start
        )
        if not replied:
            span.set_status(Status(StatusCode.ERROR, "the model call gave no answer"))
        span.end(end_time=now)
        if held is not None:
            held.last_end_ns = now
        self._count(record, attributes, (now - start) / 1e9, replied)

    def _count(
        self,
        record: PromptRecord,
        attributes: Mapping[str, AttributeValue],
        seconds: float,
        replied: bool,
    ) -> None:
        labels = {
            key: attributes[key]
            for key in (
                "gen_ai.operation.name",
                "gen_ai.provider.name",
                "gen_ai.request.model",
                "teams_runtime.role",
                "teams_runtime.purpose",
            )
            if key in attributes
        }
        if record.prompt_tokens is not None:
            self._tokens.record(record.prompt_tokens, {**labels, "gen_ai.token.type": "input"})
        if record.completion_tokens is not None:
            self._tokens.record(record.completion_tokens, {**labels, "gen_ai.token.type": "output"})
        cost = attributes.get("teams_runtime.cost_usd")
        if isinstance(cost, float):
            self._cost.add(cost, labels)
        self._omitted.add(record.omitted_events, labels)
        failed = {} if replied else {"error.type": _error_type(record)}
        self._duration.record(seconds, {**labels, **failed})

    def close(self) -> None:
        # Flushed, not shut down: a Team may run again. Spans and metrics at once, so a
        # collector that is not there costs the run's end one export timeout, not two; and
        # the spans' flush bounded in all (EndOfRun), not one timeout per batch.
        flushes = [self._tracer_provider.force_flush]
        meter_flush = getattr(self._meter_provider, "force_flush", None)
        if callable(meter_flush):
            flushes.append(meter_flush)
        ending: AbstractContextManager[object] = (
            self._end_of_run.ending() if self._end_of_run else nullcontext()
        )
        with ending:
            threads = [threading.Thread(target=flush, name="otel-flush") for flush in flushes]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()


def _replied(record: PromptRecord) -> bool:
    """Whether an answer came back: one the contract refused (outcome ``invalid``, a repair
    follows) is an answer, so its span is no error; ``failed`` and ``server_away`` are."""
    if record.outcome is not None:
        return record.outcome in ("completed", "invalid")
    return record.answer_read is not None  # a record without an outcome (schema 1)


def _error_type(record: PromptRecord) -> str:
    """The ``error.type`` of a call that gave no reply: its outcome (``failed``,
    ``server_away``)."""
    return record.outcome or "failed"


def _provider(record: PromptRecord) -> str | None:
    """``gen_ai.provider.name``: the provider half of the record's rate-card key
    (``model.openai.provider``, ``command``, ``dry_run``); None if the record has no key."""
    key = record.model
    return key.split("/", 1)[0] if key is not None and "/" in key else None


def _call_attributes(record: PromptRecord, model: str, replied: bool) -> dict[str, AttributeValue]:
    """The GenAI and ``teams_runtime.*`` attributes of a model call: counts and ids only.
    ``gen_ai.response.finish_reasons`` is the server's, left out when it gave none (a command,
    the dry run); a failed call has ``error.type``, its outcome."""
    attributes: dict[str, AttributeValue] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": model,
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
    if record.finish_reason is not None:
        attributes["gen_ai.response.finish_reasons"] = [record.finish_reason]
    if not replied:
        attributes["error.type"] = _error_type(record)
    provider = _provider(record)
    if provider is not None:
        attributes["gen_ai.provider.name"] = provider
    optional: tuple[tuple[str, AttributeValue], ...] = (
        ("gen_ai.usage.input_tokens", record.prompt_tokens),
        ("gen_ai.usage.output_tokens", record.completion_tokens),
        ("gen_ai.usage.cache_read.input_tokens", record.cached_prompt_tokens),
        ("teams_runtime.attempt_kind", record.attempt_kind),
        ("teams_runtime.outcome", record.outcome),
        ("teams_runtime.cost_usd", record.cost_usd),
        ("teams_runtime.tool_rounds", record.tool_rounds),
        ("teams_runtime.tool_calls", record.tool_calls),
    )
    attributes.update((key, value) for key, value in optional if value is not None)
    return attributes
