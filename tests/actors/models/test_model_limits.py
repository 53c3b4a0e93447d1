"""A 429 that limits one model holds back that model's roles only: rate limits are per model
on OpenAI-style APIs, so a healthy model on the same ``base_url`` keeps its work. A 429 names
a model by its body, by ``x-ratelimit-*`` headers, or by coming from a hosted API; anything
else that says the server cannot serve (a local server's 429 naming no model, 502/503/504, a
refused connection) still holds back the whole server. Real servers on loopback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from teams_runtime.actors.models import _openai as openai_backend
from teams_runtime.actors.models import _servers as model_servers
from teams_runtime.actors.models._openai import OpenAIBackend
from teams_runtime.actors.models._openai_reading import limits_the_model
from teams_runtime.actors.models._servers import ModelServers
from teams_runtime.actors.team._team import Team
from teams_runtime.codecs.config import OpenAIConfig
from teams_runtime.codecs.server_records import ServerAway, encode_server_away
from teams_runtime.policy.prompts import PromptBundle
from teams_runtime.storage import Workspace
from teams_runtime.storage.server_files import servers_away

from ...support.fake_openai_server import FakeOpenAIServer, Status
from ...support.waiting import eventually

pytestmark = pytest.mark.anyio

MakeBundle = Callable[..., PromptBundle]


def _rate_limited(model: str) -> Status:
    """OpenAI's 429 when a model's requests per minute are used up (no rate-limit headers:
    only the body names the model)."""
    message = (
        f"Rate limit reached for {model} in organization org-1 on requests per min (RPM): "
        "Limit 3, Used 3, Requested 1. Please try again in 20s."
    )
    error = {"message": message, "type": "requests", "param": None, "code": "rate_limit_exceeded"}
    return Status(429, body=json.dumps({"error": error}))


@pytest.fixture(autouse=True)
def quick(monkeypatch: pytest.MonkeyPatch) -> None:
    """Probe at most every 2 s, retry after 10 ms (the real schedules are checked alone)."""
    monkeypatch.setattr(model_servers, "PROBE_MAX_SECONDS", 2.0)
    monkeypatch.setattr(openai_backend, "BACKOFF_FIRST_SECONDS", 0.01)


def _lines(log_messages: list[Any], needle: str) -> list[str]:
    return [str(m).strip() for m in log_messages if needle in str(m)]


def _status(root: Path) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "teams_runtime", "status", "--workspace", str(root)],
        capture_output=True, text=True, check=True, timeout=60, env=dict(os.environ),
    )  # fmt: skip
    return done.stdout


@pytest.mark.long
async def test_a_429_naming_a_model_holds_back_only_that_models_roles(
    tmp_path: Path, openai_server: FakeOpenAIServer, seed: Callable[..., None],
    read_record: Callable[[Workspace, str], dict[str, Any]], log_messages: list[Any],
) -> None:  # fmt: skip
    # Two roles whose models share one server; designer's model is out of requests.
    (tmp_path / "team_runtime.yaml").write_text(
        "model:\n  backend: openai\n  openai:\n"
        f"    base_url: {openai_server.base_url}\n    model: model-b\n"
        "    timeout_seconds: 10\n    max_retries: 0\n"
        "roles:\n  designer:\n    model:\n      openai: {model: model-a}\n"
    )
    workspace = Workspace(tmp_path)
    openai_server.limited["model-a"] = _rate_limited("model-a")
    seed(workspace, "req-a", "designer", events=3)
    team = Team(workspace.root, keep_prompt_records=True)
    url = openai_server.base_url
    with anyio.fail_after(120):
        async with anyio.create_task_group() as group:
            await group.start(team.run)  # serving: it claims what comes while it runs
            await eventually(team.backends["designer"].is_away, "designer's model away", 60)
            # qa's work comes after model-a went away: it must not wait for model-a.
            for request_id in ("req-b1", "req-b2"):
                seed(workspace, request_id, "qa", events=3)

            def qa_done() -> bool:
                done = [read_record(workspace, r)["status"] for r in ("req-b1", "req-b2")]
                return done == ["completed"] * 2

            await eventually(qa_done, "qa's requests completed while model-a is limited", 60)
            assert team.backends["designer"].is_away()
            assert not team.backends["qa"].is_away()
            assert read_record(workspace, "req-a")["status"] != "completed"
            (away,) = servers_away(workspace)  # the file says which model
            assert (away.base_url, away.model) == (url, "model-a")
            status = await anyio.to_thread.run_sync(_status, workspace.root)
            (line,) = [line for line in status.splitlines() if "away since" in line]
            assert line.startswith(f"model model-a on model server {url} away since ")
            assert line.endswith(": its roles (designer) take no new work; 0 envelopes "
                                 "waiting, 1 claimed")  # fmt: skip
            del openai_server.limited["model-a"]  # its limits reset: designer's call goes
            await eventually(
                lambda: read_record(workspace, "req-a")["status"] == "completed",
                "designer's request completed once model-a is back",
                60,
            )
            group.cancel_scope.cancel()
    assert team.summary.failed == 0
    model_a = f"model model-a on model server {url}"
    assert _lines(log_messages, " is away") == [
        f"{model_a} is away (the model server answered 429 Too Many Requests to 1 request "
        "(max_retries 0)); its roles wait for it and take no new work"
    ]
    (back,) = _lines(log_messages, " is back")
    assert back.startswith(f"{model_a} is back after ")
    assert servers_away(workspace) == []  # its file went when it came back


def _backend(base_url: str, servers: ModelServers, model: str) -> OpenAIBackend:
    config = OpenAIConfig(base_url=base_url, model=model, timeout_seconds=10, max_retries=0)
    return OpenAIBackend(config, servers=servers)


@pytest.mark.parametrize(
    ("limited", "whole"),
    [
        pytest.param(_rate_limited("model-a"), False, id="429-naming-the-model"),
        pytest.param(
            Status(429, headers=(("x-ratelimit-limit-requests", "3"),)),
            False,
            id="429-with-rate-limit-headers",
        ),
        pytest.param(Status(429), True, id="local-429-naming-no-model"),
        pytest.param(Status(503, body=_rate_limited("model-a").body), True, id="503"),
    ],
)
async def test_which_429_holds_back_the_model_and_which_the_server(
    openai_server: FakeOpenAIServer, prompt_bundle: MakeBundle, limited: Status, whole: bool
) -> None:
    servers = ModelServers()
    model_a = _backend(openai_server.base_url, servers, "model-a")
    model_b = _backend(openai_server.base_url, servers, "model-b")
    openai_server.limited["model-a"] = limited
    replies: list[str] = []
    with anyio.fail_after(60):
        async with anyio.create_task_group() as group:

            async def call(backend: OpenAIBackend) -> None:
                replies.append((await backend.complete(prompt_bundle())).text)

            group.start_soon(call, model_a)
            await eventually(model_a.is_away, "model-a's calls to wait", 30)
            assert model_b.is_away() is whole
            if not whole:  # the server's other model is served meanwhile
                await call(model_b)
                assert len(replies) == 1 and model_a.is_away()
            del openai_server.limited["model-a"]
    assert len(replies) == 2 - whole
    assert not model_a.is_away() and not model_b.is_away()


def _config(base_url: str) -> OpenAIConfig:
    return OpenAIConfig(base_url=base_url, model="gpt-4o")


@pytest.mark.parametrize(
    ("base_url", "per_model"),
    [
        ("https://api.openai.com/v1", True),
        ("https://api.groq.com/openai/v1", True),
        ("http://203.0.113.7:8000/v1", False),  # reserved for documentation: not global
        ("http://8.8.8.8:8000/v1", True),
        ("http://127.0.0.1:8080/v1", False),
        ("http://localhost:11434/v1", False),
        ("http://[::1]:8080/v1", False),
        ("http://192.168.1.20:8000/v1", False),
        ("http://10.0.0.3:8000/v1", False),
        ("http://ollama:11434/v1", False),  # a container's name
        ("http://host.docker.internal:1234/v1", False),
        ("http://gpu-box.local:8000/v1", False),
    ],
)
def test_a_429_from_a_hosted_api_limits_the_model(base_url: str, per_model: bool) -> None:
    assert limits_the_model(httpx.Headers(), "", _config(base_url)) is per_model


@pytest.mark.parametrize(
    ("said", "named"),
    [
        ("Rate limit reached for gpt-4o in organization org-1 on tokens per min", True),
        ('{"error": {"message": "model `gpt-4o` is over capacity."}}', True),
        ("Rate limit exceeded for model gpt-4o.", True),
        ("Rate limit reached for gpt-4o-mini in organization org-1", False),
        ("Rate limit reached for openai/gpt-4o.1 in organization org-1", False),
        ("Too many requests", False),
    ],
)
def test_a_429_names_the_model_as_a_name_of_its_own(said: str, named: bool) -> None:
    config = _config("http://127.0.0.1:8080/v1")
    assert limits_the_model(httpx.Headers(), said, config) is named


def test_a_whole_servers_away_file_is_as_it_was() -> None:
    fields = {"base_url": "http://127.0.0.1:8080/v1", "away_since": "2026-12-01T12:00:03+01:00",
              "host": "h", "pid": 7, "reason": "cannot connect (ConnectError)"}  # fmt: skip
    assert json.loads(encode_server_away(ServerAway(**fields))) == fields
    with_model = json.loads(encode_server_away(ServerAway(model="model-a", **fields)))
    assert with_model == fields | {"model": "model-a"}
