"""``prompt``, ``project`` and ``explain`` under another layout: ``--layout`` and ``--step``
override the config's, as ``--max-events`` does; the default output stays as it was."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from teams_runtime.cli import main
from teams_runtime.demo import sample_record
from teams_runtime.storage import Workspace
from teams_runtime.storage.files.file_store import create_record

from ..support.cli_in_process import run_cli


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    assert main(["init", str(tmp_path)]) == 0
    create_record(Workspace(tmp_path).record_paths("req-1"), sample_record(30, "req-1"))
    return tmp_path


def test_prompt_shows_the_shared_prefix_layout_when_asked(
    workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["prompt", "req-1", "--role", "qa", "--workspace", str(workspace)]
    status, default, _ = run_cli(capsys, *argv)
    assert status == 0 and default.startswith("You are the qa role")
    status, shared, _ = run_cli(capsys, *argv, "--layout", "shared_prefix")
    assert status == 0 and shared.startswith("You are a role of a team inside teams_runtime")
    assert shared.index('"events"') < shared.index("You are the qa role")
    status, out, _ = run_cli(capsys, *argv, "--layout", "shared_prefix", "--step", "4", "--json")
    report = json.loads(out)
    assert (report["layout"], report["step"], report["notice"]["step"]) == ("shared_prefix", 4, 4)
    status, out, _ = run_cli(capsys, *argv, "--json")
    assert "layout" not in json.loads(out)  # the default layout's report as it was


def test_explain_and_project_select_with_the_step(
    workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    where = ["--workspace", str(workspace)]
    status, out, _ = run_cli(capsys, "explain", "req-1", "--layout", "shared_prefix", *where)
    assert status == 0
    assert "max_events=16, enabled=true, layout=shared_prefix, step=8)" in out.splitlines()[0]
    tail = [line for line in out.splitlines()[2:] if line.endswith("tail")]
    assert len(tail) == 14  # 30 events: the tail starts at 16, 22 rounded down to 8s
    status, out, _ = run_cli(
        capsys, "project", "req-1", "--layout", "shared_prefix", "--json", *where
    )
    assert status == 0 and json.loads(out)["selected_indices"][-14:] == list(range(16, 30))
    status, out, _ = run_cli(capsys, "project", "req-1", "--layout", "shared_prefix", *where)
    assert out.startswith("Current request:\n") and "The `events` array above" in out


def test_a_step_without_the_shared_prefix_layout_is_refused(
    workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, _, err = run_cli(
        capsys, "explain", "req-1", "--step", "4", "--workspace", str(workspace)
    )
    assert status == 2
    assert "--step applies only with the shared_prefix layout: add --layout shared_prefix" in err
    status, _, err = run_cli(
        capsys, "explain", "req-1", "--layout", "cache", "--workspace", str(workspace)
    )
    assert status == 2 and "invalid choice: 'cache'" in err
