"""Mistakes found at start: a role whose command is missing or not executable, or whose key's
variable is not set, stops ``config`` and ``run`` (exit 2, one line naming the role and the
key) before anything is claimed or sent."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from teams_runtime import ConfigError
from teams_runtime.actors.team._team import Team
from teams_runtime.storage import FileWorkQueue, Workspace

from ...support.cli_in_process import run_cli
from ...support.fake_openai_server import FakeOpenAIServer

Seed = Callable[..., None]
MISSING_KEY = "TEAMS_RUNTIME_TEST_KEY_NOT_SET"


def _write(root: Path, config: dict[str, object]) -> Workspace:
    (root / "team_runtime.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    return Workspace(root)


def _nothing_claimed(workspace: Workspace) -> None:
    queue = FileWorkQueue(workspace)
    assert {role: count for role, count in queue.waiting().items() if count} == {"planner": 1}
    assert not any(queue.snapshot().claimed.values())
    assert not (workspace.runtime_dir / "attempts").exists()


def test_run_with_a_missing_command_exits_2_before_any_claim(
    tmp_path: Path, seed: Seed, read_record: Callable[..., dict[str, object]],
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    workspace = _write(tmp_path, {"model": {"backend": "command", "command": ["./nonexistent"]}})
    seed(workspace, "req-1", "planner", events=3)
    before = read_record(workspace, "req-1")
    status, out, err = run_cli(capsys, "run", "--once", "--plain", "--workspace", str(tmp_path))
    assert (status, out) == (2, "")
    assert err == (
        "teams-runtime: error: every role (8 roles): model.command[0] './nonexistent' names a "
        f"file that does not exist ({tmp_path}/nonexistent); correct the path or put the "
        "program there, then start again.\n"
    )
    _nothing_claimed(workspace)
    assert read_record(workspace, "req-1") == before


def test_config_refuses_what_run_refuses(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _write(tmp_path, {"model": {"backend": "command", "command": ["no-such-model-cli-here"]}})
    status, out, err = run_cli(capsys, "config", "--workspace", str(tmp_path))
    assert (status, out) == (2, "")
    assert err == (
        "teams-runtime: error: every role (8 roles): model.command[0] 'no-such-model-cli-here' "
        "is not found on PATH; install it, or write its path (./no-such-model-cli-here if it is "
        "in the workspace), then start again.\n"
    )


def test_a_command_that_is_not_executable_names_the_role(
    tmp_path: Path, seed: Seed, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "model.sh").write_text("#!/bin/sh\necho '{}'\n")  # no execute bit
    model = {"backend": "command", "command": ["true"]}
    workspace = _write(
        tmp_path, {"model": model, "roles": {"qa": {"model": {"command": ["./model.sh"]}}}}
    )
    seed(workspace, "req-1", "planner", events=3)
    status, _, err = run_cli(capsys, "run", "--once", "--plain", "--workspace", str(tmp_path))
    assert status == 2
    assert err == (
        "teams-runtime: error: role qa: model.command[0] './model.sh' is not an executable file; "
        f"make it one (chmod +x {tmp_path}/model.sh), then start again.\n"
    )
    _nothing_claimed(workspace)


def test_an_unset_key_variable_names_the_role_and_the_key(
    tmp_path: Path, openai_server: FakeOpenAIServer, seed: Seed,
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    monkeypatch.delenv(MISSING_KEY, raising=False)
    openai = {"base_url": openai_server.base_url, "model": "m"}
    roles = {
        role: {"model": {"openai": {"api_key_env": MISSING_KEY}}} for role in ("planner", "qa")
    }
    workspace = _write(tmp_path, {"model": {"backend": "openai", "openai": openai}, "roles": roles})
    seed(workspace, "req-1", "planner", events=3)
    for command in ("config", "run"):
        status, out, err = run_cli(capsys, command, "--workspace", str(tmp_path))
        assert (status, out) == (2, "")
        assert err == (
            f"teams-runtime: error: roles planner, qa: the environment variable {MISSING_KEY} "
            "(model.openai.api_key_env) is not set; export the model server's key in it, then "
            "start again.\n"
        )
    assert openai_server.requests == []
    _nothing_claimed(workspace)


def test_only_the_served_roles_are_checked(tmp_path: Path) -> None:
    model = {"backend": "command", "command": ["true"]}
    _write(tmp_path, {"model": model, "roles": {"qa": {"model": {"command": ["./missing"]}}}})
    Team(tmp_path, roles=["planner", "developer"])  # qa is not served here: no refusal
    with pytest.raises(
        ConfigError,
        match=r"^role qa: model\.command\[0\] './missing' names a file that does not exist",
    ):
        Team(tmp_path, roles=["qa"])


def test_a_command_found_through_model_env_path_passes(tmp_path: Path) -> None:
    tools = tmp_path / "tools"
    tools.mkdir()
    cli = tools / "my-model-cli"
    cli.write_text("#!/bin/sh\n")
    cli.chmod(0o755)
    env = {"PATH": f"{tools}{os.pathsep}{os.environ.get('PATH', '')}"}
    _write(tmp_path, {"model": {"backend": "command", "command": ["my-model-cli"], "env": env}})
    assert Team(tmp_path).backends["qa"].name == "command"


def test_config_prints_each_roles_model_and_notes_upstreams_sections_on_stderr(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "team_runtime.yaml").write_text(
        "sprint: {id: s1}\nrole_defaults: {qa: {model: small, reasoning: low}}\n"
        "model: {backend: command, command: ['true']}\n"
    )
    status, out, err = run_cli(capsys, "config", "--json", "--workspace", str(tmp_path))
    assert status == 0
    shown = json.loads(out)  # stdout is the JSON alone
    assert shown["roles"]["qa"]["model"]["name"] == "small"
    assert shown["roles"]["qa"]["model"]["reasoning"] == "low"
    assert shown["roles"]["planner"]["model"]["name"] == ""
    assert shown["roles"]["planner"]["model"]["structured_output"] == "json_schema"
    assert shown["model"]["structured_output"] == "json_schema"
    assert err == (
        "teams-runtime: note: team_runtime.yaml sprint is checked but not used: teams-runtime "
        "runs no sprints.\n"
        "teams-runtime: note: team_runtime.yaml role_defaults gives the model name of qa "
        "(small): that is the model each asks for; set roles.<role>.model to ask for another.\n"
    )
