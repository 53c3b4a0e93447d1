"""A model per role, end to end: upstream's scaffold as it is, and each role's model and
reasoning level reaching what answers it (the fake OpenAI server's recorded bodies, a real
model command's argv and environment)."""

from __future__ import annotations

import json
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from teams_runtime.actors.models._backends import OpenAIBackend
from teams_runtime.actors.team._team import RunSummary, Team
from teams_runtime.storage import Workspace

from ...support.fake_openai_server import FakeOpenAIServer
from ...support.fixtures import fixture_text

pytestmark = pytest.mark.anyio

RunOnce = Callable[..., Awaitable[RunSummary]]
Seed = Callable[..., None]
SCAFFOLD = fixture_text("upstream_shaped_team_runtime.yaml")
# Upstream's role_defaults for the roles a request for the planner travels through.
ROUTE_MODELS = {
    "planner": ("gpt-5.5", "xhigh"),
    "developer": ("gpt-5.5", "high"),
    "version_controller": ("local-small", "low"),
    "qa": ("gpt-5.5", "medium"),
}


def _role_of(prompt: str) -> str:
    return prompt.split("You are the ", 1)[1].split(" role", 1)[0]


async def test_upstreams_role_defaults_reach_the_server_per_role(
    tmp_path: Path, openai_server: FakeOpenAIServer, seed: Seed, run_once: RunOnce
) -> None:
    # The scaffold verbatim, and a model section (it has none) naming the server.
    (tmp_path / "team_runtime.yaml").write_text(
        SCAFFOLD
        + "\nmodel:\n  backend: openai\n  openai:\n"
        + f"    base_url: {openai_server.base_url}\n    model: local\n    timeout_seconds: 10\n"
    )
    workspace = Workspace(tmp_path)
    seed(workspace, "req-1", "planner", events=4)
    summary = await run_once(workspace)
    assert (summary.handled, summary.failed) == (4, 0)
    sent = {_role_of(seen.prompt): seen.json()["model"] for seen in openai_server.requests}
    assert sent == {role: model for role, (model, _) in ROUTE_MODELS.items()}


async def test_roles_with_the_same_model_share_one_backend(
    tmp_path: Path, openai_server: FakeOpenAIServer
) -> None:
    (tmp_path / "team_runtime.yaml").write_text(
        SCAFFOLD
        + "\nmodel:\n  backend: openai\n"
        + f"  openai: {{base_url: '{openai_server.base_url}', model: x}}\n"
    )
    team = Team(tmp_path)
    assert all(isinstance(backend, OpenAIBackend) for backend in team.backends.values())
    # gpt-5.5 at medium: orchestrator, designer, qa; at xhigh: research, planner, architect.
    assert team.backends["orchestrator"] is team.backends["qa"] is team.backends["designer"]
    assert team.backends["planner"] is team.backends["research"]
    assert team.backends["planner"] is not team.backends["qa"]
    assert len({id(backend) for backend in team.backends.values()}) == 4


async def test_a_big_planner_and_a_small_qa_on_one_server(
    tmp_path: Path, openai_server: FakeOpenAIServer, seed: Seed, run_once: RunOnce
) -> None:
    (tmp_path / "team_runtime.yaml").write_text(
        "model:\n  backend: openai\n  openai:\n"
        f"    base_url: {openai_server.base_url}\n    model: mid-8b\n    timeout_seconds: 10\n"
        "roles:\n  planner:\n    model:\n      openai: {model: big-70b}\n"
        "  qa:\n    model:\n      openai: {model: small-1b}\n"
    )
    workspace = Workspace(tmp_path)
    seed(workspace, "req-1", "planner", events=4)
    await run_once(workspace)
    sent = {_role_of(seen.prompt): seen.json()["model"] for seen in openai_server.requests}
    assert sent == {
        "planner": "big-70b",
        "developer": "mid-8b",
        "version_controller": "mid-8b",
        "qa": "small-1b",
    }


_RECORDING_MODEL = """\
import json, os, sys
log, fake_model, state = sys.argv[1], sys.argv[2], sys.argv[3]
with open(log, "a") as handle:
    handle.write(json.dumps({
        "role": os.environ["TEAMS_RUNTIME_ROLE"],
        "argv": sys.argv[4:],
        "model": os.environ["TEAMS_RUNTIME_MODEL"],
        "reasoning": os.environ["TEAMS_RUNTIME_REASONING"],
    }) + "\\n")
os.execv(sys.executable, [sys.executable, fake_model, "valid", state])
"""


async def test_a_model_command_gets_the_roles_model_and_reasoning(
    tmp_path: Path, fake_model: Path, seed: Seed, run_once: RunOnce
) -> None:
    script = tmp_path / "recording_model.py"
    script.write_text(_RECORDING_MODEL)
    log = tmp_path / "calls.jsonl"
    command = [sys.executable, str(script), str(log), str(fake_model), str(tmp_path / "state")]
    command += ["--model={model}", "-c", "effort={reasoning}", "{literal}"]
    (tmp_path / "team_runtime.yaml").write_text(
        SCAFFOLD
        + "\nmodel:\n  backend: command\n  timeout_seconds: 10\n"
        + f"  command: {json.dumps(command)}\n"
    )
    workspace = Workspace(tmp_path)
    seed(workspace, "req-1", "planner", events=4)
    summary = await run_once(workspace)
    assert (summary.handled, summary.failed) == (4, 0)
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    assert {call["role"] for call in calls} == set(ROUTE_MODELS)
    for call in calls:
        model, reasoning = ROUTE_MODELS[call["role"]]
        assert call["argv"] == [f"--model={model}", "-c", f"effort={reasoning}", "{literal}"]
        assert (call["model"], call["reasoning"]) == (model, reasoning)


async def test_a_command_without_a_model_name_gets_empty_variables(
    tmp_path: Path, fake_model: Path, seed: Seed, run_once: RunOnce, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A value inherited from the runtime's own environment must not stand in for the role's.
    monkeypatch.setenv("TEAMS_RUNTIME_MODEL", "inherited")
    script = tmp_path / "recording_model.py"
    script.write_text(_RECORDING_MODEL)
    log = tmp_path / "calls.jsonl"
    command = [sys.executable, str(script), str(log), str(fake_model), str(tmp_path / "state")]
    (tmp_path / "team_runtime.yaml").write_text(
        f"model:\n  backend: command\n  command: {json.dumps(command)}\n"
    )
    workspace = Workspace(tmp_path)
    seed(workspace, "req-1", "qa", events=2)
    await run_once(workspace)
    (call,) = [json.loads(line) for line in log.read_text().splitlines()]
    assert (call["model"], call["reasoning"]) == ("", "")
