"""OpenTelemetry spans and metrics of a real Team run, caught by the SDK's in-memory exporter
and metric reader: the GenAI attributes, one envelope span per hop with its model calls as
children, the trace carried from hop to hop in the queued envelopes, and no text anywhere."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Awaitable, Callable
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
import yaml
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from teams_runtime.actors.team._team import RunSummary
from teams_runtime.actors.telemetry._otel import OtelTracing, model_names
from teams_runtime.actors.telemetry._setup import tracing_for
from teams_runtime.actors.telemetry._tracing import NO_TRACING
from teams_runtime.codecs.config import parse_team_config
from teams_runtime.codecs.roles import ROLES
from teams_runtime.exceptions import ConfigError
from teams_runtime.storage import Workspace, load_team_config

from ...support.fake_openai_server import FakeOpenAIServer, Status, Text, ToolCalls

pytestmark = pytest.mark.anyio

RunOnce = Callable[..., Awaitable[RunSummary]]


class _Caught:
    """An ``OtelTracing`` whose spans and metrics stay in memory."""

    def __init__(self, workspace: Workspace) -> None:
        self.spans = InMemorySpanExporter()
        tracer_provider = TracerProvider()
        tracer_provider.add_span_processor(SimpleSpanProcessor(self.spans))
        self.metrics = InMemoryMetricReader()
        self.tracing = OtelTracing(
            models=model_names(load_team_config(workspace.root), ROLES),
            tracer_provider=tracer_provider,
            meter_provider=MeterProvider(metric_readers=[self.metrics]),
        )

    def finished(self) -> list[ReadableSpan]:
        return list(self.spans.get_finished_spans())

    def points(self) -> dict[str, list[Any]]:
        data = self.metrics.get_metrics_data()
        assert data is not None
        return {
            metric.name: list(metric.data.data_points)
            for resource in data.resource_metrics
            for scope in resource.scope_metrics
            for metric in scope.metrics
        }


def _strings(value: Any) -> list[str]:
    """Every string inside a decoded JSON value."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [text for item in value.values() for text in _strings(item)]
    if isinstance(value, list):
        return [text for item in value for text in _strings(item)]
    return []


def _all_text(spans: list[ReadableSpan]) -> str:
    return json.dumps(
        [[span.name, dict(span.attributes or {}), [e.name for e in span.events]] for span in spans],
        default=str,
    )


async def test_each_model_call_is_a_genai_span_inside_its_envelope_span(
    openai_workspace: Callable[..., Workspace],
    seed: Callable[..., None],
    run_once: RunOnce,
    read_record: Callable[[Workspace, str], dict[str, Any]],
) -> None:
    workspace = openai_workspace()
    seed(workspace, "req-otel", "qa", events=30)
    caught = _Caught(workspace)
    summary = await run_once(workspace, tracing=caught.tracing)
    assert summary.handled == 1 and summary.prompts_sent == 1
    spans = caught.finished()
    (call,) = [span for span in spans if span.name.startswith("chat ")]
    (envelope,) = [span for span in spans if span.name.startswith("handle ")]
    assert (call.name, envelope.name) == ("chat fake-coder", "handle qa")
    attributes = dict(call.attributes or {})
    (record,) = summary.prompts
    assert record.prompt_tokens and record.completion_tokens  # the server reported them
    assert attributes == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",  # the rate-card key's provider (the default)
        "gen_ai.request.model": "fake-coder",
        "gen_ai.usage.input_tokens": record.prompt_tokens,
        "gen_ai.usage.output_tokens": record.completion_tokens,
        "gen_ai.response.finish_reasons": ("stop",),
        "teams_runtime.role": "qa",
        "teams_runtime.purpose": "role_task",
        "teams_runtime.request_id": "req-otel",
        "teams_runtime.total_events": 30,
        "teams_runtime.included_events": record.included_events,
        "teams_runtime.omitted_events": record.omitted_events,
        "teams_runtime.compacted": True,
        "teams_runtime.prompt_chars": record.prompt_chars,
        "teams_runtime.full_history_chars": record.full_history_chars,
        "teams_runtime.attempt_kind": "primary",  # from the prompt record (schema 2)
        "teams_runtime.outcome": "completed",
    }
    assert record.omitted_events > 0
    # The call is a child of its envelope's span, in the same trace.
    assert call.parent is not None and call.parent.span_id == envelope.context.span_id
    assert call.context.trace_id == envelope.context.trace_id
    assert envelope.parent is None  # the first hop: a submitted envelope carries no trace
    assert dict(envelope.attributes or {})["teams_runtime.outcome"] == "done"
    assert envelope.start_time is not None and call.start_time is not None
    assert envelope.start_time <= call.start_time <= (call.end_time or 0)
    # No text: nothing of the record's events, the envelope's scope or the answer.
    text = _all_text(spans)
    stored = read_record(workspace, "req-otel")
    words = [value for value in _strings(stored["events"]) if len(value) > 12]
    assert words and not [value for value in words if value in text]
    assert "do it" not in text and stored["result"]["summary"] not in text
    # Metrics, as the GenAI conventions name them: a token histogram by gen_ai.token.type,
    # one duration in seconds; and ours: omitted events.
    points = caught.points()
    tokens = {p.attributes["gen_ai.token.type"]: (p.count, p.sum) for p in points[_TOKENS]}
    assert tokens == {"input": (1, record.prompt_tokens), "output": (1, record.completion_tokens)}
    for point in points[_TOKENS]:
        assert point.explicit_bounds[:3] == (1, 4, 16)  # the conventions' advised buckets
        assert point.attributes["gen_ai.provider.name"] == "openai"
        assert point.attributes["gen_ai.operation.name"] == "chat"
    [duration] = points["gen_ai.client.operation.duration"]
    assert duration.count == 1 and duration.explicit_bounds[0] == 0.01
    assert 0 < duration.sum < 60  # seconds, not milliseconds
    assert [p.value for p in points["teams_runtime.omitted_events"]] == [record.omitted_events]
    assert "teams_runtime.cost" not in points  # no cost known: nothing counted
    assert "gen_ai.client.token.usage.total" not in points


_TOKENS = "gen_ai.client.token.usage"


async def test_only_a_call_that_gave_no_answer_is_an_error_span(
    openai_workspace: Callable[..., Workspace],
    openai_server: FakeOpenAIServer,
    seed: Callable[..., None],
    run_once: RunOnce,
) -> None:
    """A failed call, then an answer the contract refuses (an answer all the same: tokens,
    cost), then the repair that passes: only the first span is an error."""
    workspace = openai_workspace()
    seed(workspace, "req-bad", "qa", events=3)
    openai_server.then(Status(400), Text("not json at all"))
    caught = _Caught(workspace)
    summary = await run_once(workspace, tracing=caught.tracing)
    assert [r.outcome for r in summary.prompts] == ["failed", "invalid", "completed"]
    calls = sorted(
        (span for span in caught.finished() if span.name.startswith("chat ")),
        key=lambda span: span.start_time or 0,
    )
    seen = [
        (
            dict(span.attributes or {})["teams_runtime.outcome"],
            span.status.status_code,
            dict(span.attributes or {}).get("error.type"),
        )
        for span in calls
    ]
    assert seen == [
        ("failed", StatusCode.ERROR, "failed"),
        ("invalid", StatusCode.UNSET, None),
        ("completed", StatusCode.UNSET, None),
    ]
    invalid = dict(calls[1].attributes or {})
    assert invalid["gen_ai.usage.output_tokens"] > 0  # the refused answer's tokens count
    assert "error" not in invalid["gen_ai.response.finish_reasons"]
    durations = caught.points()["gen_ai.client.operation.duration"]
    errors = sorted((p.attributes.get("error.type", ""), p.count) for p in durations)
    assert errors == [("", 1), ("", 1), ("failed", 1)]  # on the failed call's duration only


@pytest.mark.parametrize("sent", ["stop", "length", "content_filter", "tool_calls", None])
async def test_the_call_span_carries_the_servers_finish_reason(
    openai_workspace: Callable[..., Workspace],
    openai_server: FakeOpenAIServer,
    seed: Callable[..., None],
    run_once: RunOnce,
    sent: str | None,
) -> None:
    workspace = openai_workspace()
    seed(workspace, "req-otel", "qa", events=3)
    openai_server.finish_reason = sent  # None: a null finish_reason, then [DONE]
    caught = _Caught(workspace)
    await run_once(workspace, tracing=caught.tracing)
    (call,) = [span for span in caught.finished() if span.name.startswith("chat ")]
    attributes = dict(call.attributes or {})
    if sent is None:  # unknown: left out, as the convention's optional attribute
        assert "gen_ai.response.finish_reasons" not in attributes
    else:
        assert attributes["gen_ai.response.finish_reasons"] == (sent,)
    assert "error.type" not in attributes and call.status.status_code is StatusCode.UNSET


async def test_a_failed_calls_span_is_an_error_with_its_type_and_finish_reason(
    openai_workspace: Callable[..., Workspace],
    openai_server: FakeOpenAIServer,
    seed: Callable[..., None],
    run_once: RunOnce,
) -> None:
    workspace = openai_workspace(model={"attempts": 2})
    seed(workspace, "req-otel", "qa", events=3)
    openai_server.finish_reason = "length"
    openai_server.then(Text(""))  # the model's tokens all spent before any reply text
    caught = _Caught(workspace)
    await run_once(workspace, tracing=caught.tracing)
    calls = sorted(
        (span for span in caught.finished() if span.name.startswith("chat ")),
        key=lambda span: span.start_time or 0,
    )
    failed, retried = (dict(span.attributes or {}) for span in calls)
    assert calls[0].status.status_code is StatusCode.ERROR
    assert (failed["error.type"], failed["teams_runtime.outcome"]) == ("failed", "failed")
    assert failed["gen_ai.response.finish_reasons"] == ("length",)
    assert calls[1].status.status_code is StatusCode.UNSET and "error.type" not in retried
    assert retried["teams_runtime.attempt_kind"] == "retry"


async def test_a_requests_hops_form_one_trace_through_the_queued_envelopes(
    team_workspace: Callable[..., Workspace], seed: Callable[..., None], run_once: RunOnce
) -> None:
    workspace = team_workspace()
    seed(workspace, "req-1", "planner")
    caught = _Caught(workspace)
    summary = await run_once(workspace, tracing=caught.tracing)
    assert summary.handled == 4
    spans = caught.finished()
    envelopes = sorted(
        (span for span in spans if span.name.startswith("handle ")),
        key=lambda span: span.start_time or 0,
    )
    assert [span.name for span in envelopes] == [
        "handle planner",
        "handle developer",
        "handle version_controller",
        "handle qa",
    ]
    assert len({span.context.trace_id for span in spans}) == 1
    # Each hop's span is a child of the span of the hop that queued it.
    for before, after in pairwise(envelopes):
        assert after.parent is not None and after.parent.span_id == before.context.span_id
    calls = [span for span in spans if span.name.startswith("chat ")]
    assert len(calls) == 4
    by_id = {span.context.span_id: span for span in envelopes}
    for call in calls:
        assert call.parent is not None
        parent = by_id[call.parent.span_id]
        assert parent.name == f"handle {dict(call.attributes or {})['teams_runtime.role']}"
        # The command backend reports no tokens and no finish reason: both are left out.
        assert "gen_ai.usage.input_tokens" not in dict(call.attributes or {})
        assert "gen_ai.response.finish_reasons" not in dict(call.attributes or {})


def test_without_otel_there_is_no_tracing_and_with_it_the_sdk_is_used() -> None:
    off = parse_team_config("telemetry: {enabled: true}\n", "team_runtime.yaml")
    assert tracing_for(off, ("qa",)) is NO_TRACING
    on = parse_team_config("telemetry: {otel: true}\n", "team_runtime.yaml")
    assert isinstance(tracing_for(on, ("qa",)), OtelTracing)
    with pytest.raises(ConfigError, match=r"telemetry\.otel must be a boolean\.$"):
        parse_team_config("telemetry: {otel: 1}\n", "team_runtime.yaml")


@pytest.mark.parametrize(
    "command",
    [pytest.param(["run", "--once"], id="run"), pytest.param(["config"], id="config")],
)
def test_otel_without_the_extra_is_a_user_error_naming_the_install(
    tmp_path: Path, command: list[str]
) -> None:
    """A fresh interpreter in which ``opentelemetry`` cannot be imported, as without the
    extra: `run` exits 2 with the install command, and so does `config`, which checks what
    `run` would refuse."""
    root = tmp_path / "ws"
    (root).mkdir()
    (root / "team_runtime.yaml").write_text(yaml.safe_dump({"telemetry": {"otel": True}}))
    blocker = tmp_path / "blocker"
    blocker.mkdir()
    (blocker / "sitecustomize.py").write_text(
        "import sys\n"
        "class _NoOtel:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] == 'opentelemetry':\n"
        "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
        "sys.meta_path.insert(0, _NoOtel())\n"
    )
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(blocker), env.get("PYTHONPATH", "")])
    done = subprocess.run(
        [sys.executable, "-P", "-m", "teams_runtime", *command, "--workspace", str(root)],
        capture_output=True,
        text=True,
        env=env,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(
        "teams-runtime: error: team_runtime.yaml telemetry.otel is true, but OpenTelemetry is "
        "not installed (opentelemetry is missing): pip install"
    )
    assert "[otel]" in done.stderr and "Traceback" not in done.stderr


def test_a_run_without_otel_never_imports_opentelemetry(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    probe = (
        "import sys\nfrom teams_runtime.cli import main\n"
        f"assert main(['init', {str(root)!r}]) == 0\n"
        f"assert main(['submit', '--workspace', {str(root)!r}, '--role', 'planner',"
        " '--scope', 'x']) == 0\n"
        f"assert main(['run', '--once', '--plain', '--workspace', {str(root)!r}]) == 0\n"
        "print(sorted(name for name in sys.modules if name.startswith('opentelemetry')))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "[]"


async def test_the_call_span_counts_its_tool_rounds_and_calls_and_holds_no_result(
    openai_workspace: Callable[..., Workspace],
    openai_server: FakeOpenAIServer,
    seed: Callable[..., None],
    run_once: RunOnce,
) -> None:
    workspace = openai_workspace(model={"tools": {"read_events": True}})
    seed(workspace, "req-otel", "qa", events=30)
    openai_server.then(ToolCalls((("read_events", '{"index": 2}'), ("read_record", "{}"))))
    caught = _Caught(workspace)
    await run_once(workspace, tracing=caught.tracing)
    (call,) = [span for span in caught.finished() if span.name.startswith("chat ")]
    attributes = dict(call.attributes or {})
    assert (attributes["teams_runtime.tool_rounds"], attributes["teams_runtime.tool_calls"]) == (
        1,
        2,
    )
    assert '"timestamp"' not in _all_text(caught.finished())  # no event's text in any span
