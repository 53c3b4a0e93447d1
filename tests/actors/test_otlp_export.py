"""A real OTLP/HTTP export: two `run --once` worker processes, each serving some of the roles,
hand one request's hops to each other through the file queue, and both export their spans to a
receiver this test runs on loopback (POST /v1/traces, protobuf, decoded with
opentelemetry-proto). The hops form one trace across the two processes."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from teams_runtime.cli import main


class _Receiver:
    """An OTLP/HTTP receiver on 127.0.0.1: keeps each span with its resource's attributes."""

    def __init__(self) -> None:
        self.spans: list[dict[str, Any]] = []
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
                else:  # /v1/metrics: taken, not looked at here
                    answer = b""
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


def _worker(root: Path, roles: str, name: str, endpoint: str) -> subprocess.Popen[str]:
    env = {key: value for key, value in os.environ.items() if "proxy" not in key.lower()}
    env.update(
        OTEL_EXPORTER_OTLP_ENDPOINT=endpoint,
        OTEL_RESOURCE_ATTRIBUTES=f"worker={name}",
        NO_PROXY="127.0.0.1",
    )
    command = [sys.executable, "-m", "teams_runtime", "run", "--once", "--plain"]
    return subprocess.Popen(
        [*command, "--roles", roles, "--workspace", str(root)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_two_workers_export_one_trace_per_request_over_otlp_http(
    tmp_path: Path, receiver: _Receiver
) -> None:
    root = tmp_path / "ws"
    assert main(["init", str(root)]) == 0
    config = yaml.safe_load((root / "team_runtime.yaml").read_text())
    config["telemetry"] = {"otel": True}
    (root / "team_runtime.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    assert main(["submit", "--workspace", str(root), "--role", "planner", "--scope", "a"]) == 0
    # Worker a serves the first hop, worker b the rest: each waits until the team is idle.
    first = _worker(root, "planner", "a", receiver.url)
    rest = _worker(root, "developer,qa", "b", receiver.url)
    for process in (first, rest):
        _, stderr = process.communicate(timeout=120)
        assert process.returncode == 0, stderr
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
        # The dry run is no model server: it says no finish reason, so none is exported.
        assert "gen_ai.response.finish_reasons" not in attributes
        assert attributes["teams_runtime.request_id"].startswith("req-")
        assert by_id[call["parent"]]["worker"] == call["worker"]
