"""``config --probe``: one tiny request to each distinct model server and model the roles use,
and what it answered (the model it answers as, usage in the stream, the response_format it
takes)."""

from __future__ import annotations

import contextlib
import json
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

from ...support.cli_in_process import run_cli
from ...support.fake_openai_server import FakeOpenAIServer, Raw, Status
from ...support.paths import PROJECT_ROOT

# llama-cpp-python's answer to a json_schema response_format (a validation error naming it).
REFUSED = Status(
    500, body='{"error": {"message": "response_format.type: Input should be \'json_object\'"}}'
)


def _stream(model: str, *, usage: bool) -> Raw:
    events = [
        {"model": model, "choices": [{"index": 0, "delta": {"content": '{"ok": true}'}}]},
        {"model": model, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
    ]
    if usage:
        events.append(
            {"model": model, "choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 5}}
        )
    body = "".join(f"data: {json.dumps(event)}\n\n" for event in events) + "data: [DONE]\n\n"
    return Raw(body.encode())


def _workspace(root: Path, model: dict[str, object]) -> Path:
    (root / "team_runtime.yaml").write_text(yaml.safe_dump({"model": model}, sort_keys=False))
    return root


def test_probe_reports_what_the_server_answered(
    tmp_path: Path, openai_server: FakeOpenAIServer, capsys: pytest.CaptureFixture[str]
) -> None:
    openai = {"base_url": openai_server.base_url, "model": "asked-for"}
    _workspace(tmp_path, {"backend": "openai", "openai": openai})
    openai_server.then(_stream("qwen2.5-0.5b-instruct", usage=True))
    status, out, _ = run_cli(capsys, "config", "--probe", "--workspace", str(tmp_path))
    assert status == 0
    roles = (
        "orchestrator, research, planner, designer, architect, developer, qa, version_controller"
    )
    assert out == (
        f"{openai_server.base_url} ({roles}; asked for asked-for): answered as model "
        "qwen2.5-0.5b-instruct; usage reported in the stream; response_format json_schema "
        "accepted; window unknown: the server says none (set model.openai.context_tokens); no "
        "tokenizer endpoint.\n"
    )
    (seen,) = openai_server.requests  # one request for all eight roles: one server
    body = seen.json()
    assert body["model"] == "asked-for" and body["stream"] is True
    assert body["response_format"]["type"] == "json_schema"


@pytest.mark.parametrize(
    ("flavour", "words"),
    [
        pytest.param(
            "llama.cpp",
            "window 4096 tokens (llama.cpp /props n_ctx), 2 slots; tokenizer llama.cpp /tokenize",
            id="llama.cpp",
        ),
        pytest.param(
            "vllm",
            "window 4096 tokens (vLLM /v1/models max_model_len); tokenizer vLLM /tokenize",
            id="vllm",
        ),
        pytest.param(
            "ollama",
            "window 4096 tokens (Ollama /api/ps context_length); no tokenizer endpoint",
            id="ollama",
        ),
        pytest.param(
            "llama-cpp-python",
            "window 8192 tokens (model.openai.context_tokens); tokenizer llama-cpp-python "
            "/extras/tokenize/count",
            id="llama-cpp-python",
        ),
    ],
)
def test_probe_says_each_servers_window_and_tokenizer(
    tmp_path: Path,
    openai_server: FakeOpenAIServer,
    capsys: pytest.CaptureFixture[str],
    flavour: str,
    words: str,
) -> None:
    openai_server.flavour, openai_server.slots = flavour, 2
    openai = {"base_url": openai_server.base_url, "model": openai_server.model_name}
    _workspace(tmp_path, {"backend": "openai", "openai": {**openai, "context_tokens": 8192}})
    openai_server.then(_stream("served", usage=True))
    status, out, _ = run_cli(capsys, "config", "--probe", "--workspace", str(tmp_path))
    assert status == 0
    assert out.endswith(f"; {words}.\n"), out
    status, out, _ = run_cli(capsys, "config", "--probe", "--json", "--workspace", str(tmp_path))
    (result,) = json.loads(out)
    assert result["context_tokens"] == (8192 if flavour == "llama-cpp-python" else 4096)
    assert result["slots"] == (2 if flavour == "llama.cpp" else None)
    assert result["window_source"] in words
    assert (result["tokenizer"] is None) == ("no tokenizer" in words)


def test_probe_says_each_roles_budget_as_a_run_resolves_it(
    tmp_path: Path, openai_server: FakeOpenAIServer, capsys: pytest.CaptureFixture[str]
) -> None:
    openai_server.flavour = "llama.cpp"  # its window: 4096 tokens (/props n_ctx)
    openai = {"base_url": openai_server.base_url, "model": openai_server.model_name}
    config = {
        "team": {"roles": ["planner", "developer", "qa", "research", "designer"]},
        "model": {"backend": "openai", "openai": openai},
        "prompt_context": {"max_prompt_tokens": "auto"},
        "roles": {
            "developer": {"model": {"openai": {"max_tokens": 512}}},
            "qa": {"prompt_context": {"max_prompt_tokens": 1500}},
            "research": {"prompt_context": {"max_prompt_tokens": 5000}},
            "designer": {"prompt_context": {"max_prompt_tokens": "none"}},
        },
    }
    (tmp_path / "team_runtime.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    openai_server.then(_stream("served", usage=True))
    status, out, _ = run_cli(capsys, "config", "--probe", "--workspace", str(tmp_path))
    assert status == 0
    assert out.splitlines()[1:] == [
        "  planner: max_prompt_tokens auto (global): 3072 prompt tokens, the window "
        "4096 less max_tokens 1024 (the default reserve) sent with each prompt",
        "  developer: max_prompt_tokens auto (global): 3584 prompt tokens, the window 4096 less "
        "max_tokens 512 (model.openai.max_tokens) sent with each prompt",
        "  qa: max_prompt_tokens 1500 (role)",
        "  research: max_prompt_tokens 5000 (role): warning: larger than the server's window of "
        "4096 tokens, so a prompt within the budget can still be refused; lower it, or write "
        "auto",
        "  designer: max_prompt_tokens none (role)",
    ]
    openai_server.then(_stream("served", usage=True))
    status, out, _ = run_cli(capsys, "config", "--probe", "--json", "--workspace", str(tmp_path))
    (result,) = json.loads(out)
    assert result["budgets"]["planner"] == {
        "max_prompt_tokens": "auto",
        "from": "global",
        "window": 4096,
        "prompt_tokens": 3072,
        "max_tokens": 1024,
        "reserve": "default",
    }
    assert result["budgets"]["qa"] == {"max_prompt_tokens": 1500, "from": "role", "window": 4096}
    assert result["budgets"]["research"]["warning"].startswith("warning: larger than")


def test_an_auto_budget_without_a_window_is_said_to_be_none(
    tmp_path: Path, openai_server: FakeOpenAIServer, capsys: pytest.CaptureFixture[str]
) -> None:
    openai = {"base_url": openai_server.base_url, "model": "asked-for"}
    config = {"team": {"roles": ["qa"]}, "model": {"backend": "openai", "openai": openai}}
    config["prompt_context"] = {"max_prompt_tokens": "auto"}
    (tmp_path / "team_runtime.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    openai_server.then(_stream("served", usage=True))
    status, out, _ = run_cli(capsys, "config", "--probe", "--workspace", str(tmp_path))
    assert status == 0
    assert out.splitlines()[1] == (
        "  qa: max_prompt_tokens auto (global): no budget, the window is unknown (set "
        "model.openai.context_tokens)"
    )


def test_a_server_that_refuses_json_schema_is_asked_with_the_next_form(
    tmp_path: Path, openai_server: FakeOpenAIServer, capsys: pytest.CaptureFixture[str]
) -> None:
    openai = {"base_url": openai_server.base_url, "model": "m"}
    _workspace(tmp_path, {"backend": "openai", "openai": openai})
    openai_server.then(REFUSED, _stream("local", usage=False))
    status, out, _ = run_cli(capsys, "config", "--probe", "--json", "--workspace", str(tmp_path))
    assert status == 0
    (result,) = json.loads(out)
    assert result["answered_as"] == "local"
    assert result["usage"] is False  # llama-cpp-python reports none in streams
    assert result["response_format"] == "json_object"
    forms = [seen.json()["response_format"]["type"] for seen in openai_server.requests]
    assert forms == ["json_schema", "json_object"]


def test_one_request_per_distinct_server(
    tmp_path: Path, openai_server: FakeOpenAIServer, capsys: pytest.CaptureFixture[str]
) -> None:
    with FakeOpenAIServerContext() as other:
        (tmp_path / "team_runtime.yaml").write_text(
            yaml.safe_dump(
                {
                    "model": {
                        "backend": "openai",
                        "openai": {"base_url": openai_server.base_url, "model": "big"},
                    },
                    "roles": {
                        "qa": {"model": {"openai": {"base_url": other.base_url, "model": "small"}}}
                    },
                }
            )
        )
        openai_server.then(_stream("big-served", usage=True))
        other.then(_stream("small-served", usage=True))
        status, out, _ = run_cli(capsys, "config", "--probe", "--workspace", str(tmp_path))
        assert status == 0
        first, second = out.splitlines()
        assert (
            first.startswith(f"{openai_server.base_url} (orchestrator,") and "big-served" in first
        )
        assert (
            second.startswith(f"{other.base_url} (qa; asked for small)")
            and "small-served" in second
        )
        assert (len(openai_server.requests), len(other.requests)) == (1, 1)


def test_one_request_per_model_a_server_is_asked_for(
    tmp_path: Path, openai_server: FakeOpenAIServer, capsys: pytest.CaptureFixture[str]
) -> None:
    """One server, two models (a big planner, a small qa): each model is asked once, and a
    model the server does not serve is said apart from the one it does."""
    openai = {"base_url": openai_server.base_url, "model": "big"}
    small = {"model": {"openai": {"model": "small"}}}
    (tmp_path / "team_runtime.yaml").write_text(
        yaml.safe_dump({"model": {"backend": "openai", "openai": openai}, "roles": {"qa": small}})
    )
    not_served = Status(404, body='{"error": {"message": "model not found"}}')
    openai_server.then(_stream("big", usage=True), not_served)
    status, out, _ = run_cli(capsys, "config", "--probe", "--json", "--workspace", str(tmp_path))
    assert status == 1  # one of them gave no reply
    results = {result["model"]: result for result in json.loads(out)}
    assert sorted(results) == ["big", "small"]
    assert results["small"]["roles"] == ["qa"] and "qa" not in results["big"]["roles"]
    asked = sorted(seen.json()["model"] for seen in openai_server.requests)
    assert asked == ["big", "small"]
    answered = [r for r in results.values() if r["problem"] is None]
    refused = [r for r in results.values() if r["problem"] == "it answered 404"]
    assert len(answered) == len(refused) == 1


def test_a_server_that_is_not_there_is_said_and_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    _workspace(tmp_path, {"backend": "openai", "openai": {"base_url": url, "model": "m"}})
    status, out, _ = run_cli(capsys, "config", "--probe", "--workspace", str(tmp_path))
    assert status == 1
    assert out.startswith(f"{url} (orchestrator,") and out.endswith(": no answer (ConnectError)\n")
    server = FakeOpenAIServer(port=port).start()  # started, on the port the config names
    try:
        status, out, _ = run_cli(capsys, "config", "--probe", "--workspace", str(tmp_path))
    finally:
        server.stop()
    assert (status, server.port) == (0, port)
    assert out.startswith(f"{url} (orchestrator,") and ": answered, naming no model;" in out


def test_the_fake_server_runs_as_a_program_on_a_chosen_port(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`python tests/support/fake_openai_server.py --port N`: what a person tries first."""
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    program = PROJECT_ROOT / "tests" / "support" / "fake_openai_server.py"
    server = subprocess.Popen(
        [sys.executable, "-P", str(program), "--port", str(port), "--flavour", "llama.cpp"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert server.stdout is not None
        url = f"http://127.0.0.1:{port}/v1"
        assert server.stdout.readline() == f"listening on {url}\n"
        _workspace(tmp_path, {"backend": "openai", "openai": {"base_url": url, "model": "m"}})
        status, out, _ = run_cli(capsys, "config", "--probe", "--workspace", str(tmp_path))
        assert status == 0 and "response_format json_schema accepted" in out, out
    finally:
        server.send_signal(signal.SIGTERM)
        server.communicate(timeout=30)  # waits, and closes its pipe
    assert server.returncode == 0


def test_nothing_to_probe_without_a_server(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _workspace(tmp_path, {"backend": "dry_run"})
    status, out, _ = run_cli(capsys, "config", "--probe", "--workspace", str(tmp_path))
    assert (status, out) == (
        0,
        "No role uses an OpenAI-compatible server (model.backend openai): nothing to probe.\n",
    )


class FakeOpenAIServerContext:
    """A second fake server, started and stopped around a block."""

    def __enter__(self) -> FakeOpenAIServer:
        self.server = FakeOpenAIServer().start()
        return self.server

    def __exit__(self, *_: object) -> None:
        self.server.stop()


class _EndlessStream:
    """A server that answers every request with an event stream that never ends: one
    content delta every 50 ms, until the client goes (or 30 s pass)."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.base_url = f"http://127.0.0.1:{self.listener.getsockname()[1]}/v1"
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        with contextlib.suppress(OSError):
            connection, _ = self.listener.accept()
            with connection:
                connection.recv(65536)
                connection.sendall(
                    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                    b"Transfer-Encoding: chunked\r\n\r\n"
                )
                event = b'data: {"model": "m", "choices": [{"delta": {"content": "x"}}]}\n\n'
                chunk = f"{len(event):x}\r\n".encode() + event + b"\r\n"
                until = time.monotonic() + 30
                while time.monotonic() < until:
                    connection.sendall(chunk)
                    time.sleep(0.05)  # the server's pace, not a wait for a condition

    def close(self) -> None:
        self.listener.close()


def test_a_server_that_streams_without_end_is_given_up_on_at_the_timeout(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server = _EndlessStream()
    try:
        openai = {"base_url": server.base_url, "model": "m", "timeout_seconds": 1}
        _workspace(tmp_path, {"backend": "openai", "openai": openai})
        started = time.monotonic()
        status, out, _ = run_cli(capsys, "config", "--probe", "--workspace", str(tmp_path))
    finally:
        server.close()
    assert status == 1
    assert out.endswith(": no answer within 1 s\n"), out
    assert time.monotonic() - started < 15  # its timeout, not the stream's 30 s
