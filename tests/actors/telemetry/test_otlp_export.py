"""A real OTLP/HTTP export: two `run --once` worker processes, each serving some of the roles,
hand one request's hops to each other through the file queue, and both export their spans to a
receiver this test runs on loopback (POST /v1/traces, protobuf, decoded with
opentelemetry-proto). The hops form one trace across the two processes. With no collector
there, a run says so in a few lines of its own; `ab` sends nothing."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from teams_runtime.actors.telemetry._otel_export import EXPORT_TIMEOUT_SECONDS, export_timeout
from teams_runtime.cli import main


class _Receiver:
    """An OTLP/HTTP receiver on 127.0.0.1: keeps each span with its resource's attributes."""

    def __init__(self) -> None:
        self.spans: list[dict[str, Any]] = []
        self.metrics: list[dict[str, Any]] = []  # each metric of each POST /v1/metrics
        self.paths: list[str] = []
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                with receiver._lock:
                    receiver.paths.append(self.path)
                if self.path == "/v1/traces":
                    assert self.headers.get("Content-Type") == "application/x-protobuf"
                    receiver.keep(body)
                    answer = ExportTraceServiceResponse().SerializeToString()
                else:
                    receiver.keep_metrics(body)
                    answer = ExportMetricsServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def keep(self, body: bytes) -> None:
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        for resource_spans in request.resource_spans:
            resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    with self._lock:
                        self.spans.append(
                            {
                                "name": span.name,
                                "trace_id": span.trace_id.hex(),
                                "span_id": span.span_id.hex(),
                                "parent": span.parent_span_id.hex(),
                                "attributes": {a.key: _value(a.value) for a in span.attributes},
                                "worker": resource.get("worker"),
                            }
                        )

    def keep_metrics(self, body: bytes) -> None:
        request = ExportMetricsServiceRequest()
        request.ParseFromString(body)
        for resource_metrics in request.resource_metrics:
            for scope_metrics in resource_metrics.scope_metrics:
                for metric in scope_metrics.metrics:
                    kind = metric.WhichOneof("data")
                    points = getattr(metric, kind).data_points
                    with self._lock:
                        self.metrics.append(
                            {
                                "name": metric.name,
                                "kind": kind,
                                "unit": metric.unit,
                                "points": [
                                    {a.key: _value(a.value) for a in point.attributes}
                                    for point in points
                                ],
                            }
                        )


def _value(value: Any) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_value(item) for item in value.array_value.values]
    return getattr(value, kind) if kind else None


@pytest.fixture
def receiver() -> Iterator[_Receiver]:
    receiver = _Receiver()
    thread = threading.Thread(target=receiver.server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        receiver.server.shutdown()
        receiver.server.server_close()


def _finished(process: subprocess.Popen[str], team: tuple[subprocess.Popen[str], ...]) -> int:
    """``process``'s exit status; if it does not end within 120 s, every worker of ``team`` is
    stopped (none is left to the next test) and the failure shows what each wrote."""
    try:
        _, stderr = process.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        logs = []
        for worker in team:
            worker.kill()
            logs.append(worker.communicate()[1] or "")
        pytest.fail("a worker did not finish within 120 s; their logs:\n" + "\n---\n".join(logs))
    assert process.returncode == 0, stderr
    return process.returncode


def _worker(root: Path, roles: str, name: str, endpoint: str) -> subprocess.Popen[str]:
    return _command(root, ["run", "--once", "--plain", "--roles", roles], name, endpoint)


def _command(
    root: Path, argv: list[str], name: str, endpoint: str, **more_env: str
) -> subprocess.Popen[str]:
    env = {key: value for key, value in os.environ.items() if "proxy" not in key.lower()}
    env.update(more_env)
    env.update(
        OTEL_EXPORTER_OTLP_ENDPOINT=endpoint,
        OTEL_RESOURCE_ATTRIBUTES=f"worker={name}",
        OTEL_METRIC_EXPORT_INTERVAL="3600000",  # no periodic export: only the run's end
        NO_PROXY="127.0.0.1",
    )
    command = [sys.executable, "-P", "-m", "teams_runtime", *argv]
    return subprocess.Popen(
        [*command, "--workspace", str(root)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _otel_workspace(root: Path) -> Path:
    assert main(["init", str(root)]) == 0
    config = yaml.safe_load((root / "team_runtime.yaml").read_text())
    config["telemetry"] = {"otel": True}
    (root / "team_runtime.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    return root


def test_two_workers_export_one_trace_per_request_over_otlp_http(
    tmp_path: Path, receiver: _Receiver
) -> None:
    root = _otel_workspace(tmp_path / "ws")
    assert main(["submit", "--workspace", str(root), "--role", "planner", "--scope", "a"]) == 0
    # Worker a serves the first hop, worker b the rest: each waits until the team is idle.
    first = _worker(root, "planner", "a", receiver.url)
    rest = _worker(root, "developer,qa", "b", receiver.url)
    for process in (first, rest):
        assert _finished(process, (first, rest)) == 0
    # Both have exported at exit (the SDK flushes when the process ends).
    assert "/v1/traces" in receiver.paths and "/v1/metrics" in receiver.paths
    spans = receiver.spans
    envelopes = {
        span["attributes"]["teams_runtime.role"]: span
        for span in spans
        if span["name"].startswith("handle ")
    }
    assert set(envelopes) == {"planner", "developer", "qa"}  # the dry run's route
    assert envelopes["planner"]["worker"] == "a"
    assert {envelopes[role]["worker"] for role in ("developer", "qa")} == {"b"}
    assert len({span["trace_id"] for span in spans}) == 1  # one request, one trace
    # The second worker's first hop continues the first worker's span.
    assert envelopes["developer"]["parent"] == envelopes["planner"]["span_id"]
    assert envelopes["planner"]["parent"] == ""
    calls = [span for span in spans if span["name"].startswith("chat ")]
    assert len(calls) == 3
    by_id = {span["span_id"]: span for span in envelopes.values()}
    for call in calls:
        attributes = call["attributes"]
        assert attributes["gen_ai.operation.name"] == "chat"
        assert attributes["gen_ai.request.model"] == "dry_run"
        assert attributes["gen_ai.provider.name"] == "dry_run"
        # The dry run is no model server: it says no finish reason, so none is exported.
        assert "gen_ai.response.finish_reasons" not in attributes
        assert attributes["teams_runtime.request_id"].startswith("req-")
        assert by_id[call["parent"]]["worker"] == call["worker"]
    # Metrics: once per worker, at the end of its run (not again at exit), named as the GenAI
    # conventions name them; the dry run reports no tokens, so no token points.
    assert receiver.paths.count("/v1/metrics") == 2
    names = {(metric["name"], metric["kind"], metric["unit"]) for metric in receiver.metrics}
    assert ("gen_ai.client.operation.duration", "histogram", "s") in names
    assert ("teams_runtime.omitted_events", "sum", "{event}") in names
    durations = [m for m in receiver.metrics if m["name"] == "gen_ai.client.operation.duration"]
    for point in (point for metric in durations for point in metric["points"]):
        assert point["gen_ai.provider.name"] == "dry_run"
        assert point["gen_ai.operation.name"] == "chat"


def _closed_port() -> int:
    """A loopback port nothing listens on (bound, then closed: connections are refused)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_with_no_collector_a_run_says_so_in_a_line_per_kind(tmp_path: Path) -> None:
    """No collector: the run ends as usual (exit 0) and stderr holds a line of ours for each
    kind of export problem, not the SDK's retry lines with the connection's raw error."""
    root = _otel_workspace(tmp_path / "ws")
    assert main(["submit", "--workspace", str(root), "--role", "planner", "--scope", "a"]) == 0
    process = _command(
        root, ["run", "--once", "--plain"], "a", f"http://127.0.0.1:{_closed_port()}"
    )
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 0, stderr
    assert "HTTPConnectionPool" not in stderr and "Traceback" not in stderr
    ours = [line for line in stderr.splitlines() if "OpenTelemetry SDK: " in line]
    assert ours and len(ours) == len(set(ours)) <= 4  # retries and failures, spans and metrics
    assert all(line.endswith("(repeats are not logged)") for line in ours)
    assert any("Failed to export spans batch" in line for line in ours)


def test_a_runs_end_waits_one_export_timeout_in_all_not_one_per_batch(tmp_path: Path) -> None:
    """A batch a span and no collector: the SDK's flush gives each batch its own timeout
    (three requests' hops leave some 16 spans to flush: half a minute and more). The run's end
    waits the timeout once, drops the rest and says how many spans went unsent."""
    root = _otel_workspace(tmp_path / "ws")
    for scope in ("a", "b", "c"):
        assert (
            main(["submit", "--workspace", str(root), "--role", "planner", "--scope", scope]) == 0
        )
    endpoint = f"http://127.0.0.1:{_closed_port()}"
    started = time.monotonic()
    process = _command(
        root, ["run", "--once", "--plain"], "a", endpoint, OTEL_BSP_MAX_EXPORT_BATCH_SIZE="1"
    )
    _, stderr = process.communicate(timeout=120)
    took = time.monotonic() - started
    assert process.returncode == 0, stderr
    unsent = re.search(
        r"OpenTelemetry: (\d+) spans not sent: a run's end waits at most 3 s", stderr
    )
    assert unsent is not None and int(unsent.group(1)) > 3, stderr
    # The budget, the one export under way when it ran out, and the worker's own start and end.
    assert took < 3 * EXPORT_TIMEOUT_SECONDS + 5, took


def test_the_export_timeout_is_ours_unless_a_variable_sets_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("OTEL_EXPORTER_OTLP_TIMEOUT", "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_METRICS_TIMEOUT", raising=False)
    assert export_timeout("TRACES") == export_timeout("METRICS") == EXPORT_TIMEOUT_SECONDS
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "20")
    assert (export_timeout("TRACES"), export_timeout("METRICS")) == (None, EXPORT_TIMEOUT_SECONDS)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "7")
    assert export_timeout("METRICS") is None  # the exporter reads the variable itself


def test_ab_sends_no_spans_from_either_arm(tmp_path: Path, receiver: _Receiver) -> None:
    """`ab` on the configured models (here the dry run, not `--dry-run`) with otel on: the
    arms are measurements, so nothing reaches the collector."""
    root = _otel_workspace(tmp_path / "ws")
    process = _command(root, ["ab", "--requests", "1"], "ab", receiver.url)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 0, stderr
    assert receiver.paths == []
