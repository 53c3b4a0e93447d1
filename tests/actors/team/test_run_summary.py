"""The summary ``run --once`` prints reads true: the envelopes it finished, broken down into
done, failed and rejected (which add up to it), and the model calls it made apart from those
that got an answer. A request whose model fails twice is "1 envelope: 0 done, 1 failed" and
"2 model calls, 0 answered" (not "Handled 0 envelopes: 1 failed" and "2 prompts sent")."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from teams_runtime.storage import Workspace

from ...support.cli_in_process import run_cli

MakeWorkspace = Callable[..., Workspace]
Seed = Callable[..., None]


def _run(capsys: pytest.CaptureFixture[str], workspace: Workspace, *more: str) -> str:
    status, out, err = run_cli(
        capsys, "run", "--once", "--plain", "--roles", "qa", "--workspace", str(workspace.root),
        *more,
    )  # fmt: skip
    assert status == 0, err
    return out


def test_a_model_that_fails_every_call_is_one_failed_envelope_and_no_answer(
    team_workspace: MakeWorkspace, seed: Seed, capsys: pytest.CaptureFixture[str]
) -> None:
    workspace = team_workspace("exit_1", model={"attempts": 2, "on_failure": "fail"})
    seed(workspace, "req-1", "qa", events=3)
    out = _run(capsys, workspace)
    assert out == "Finished 1 envelope: 0 done, 1 failed, 0 rejected; 2 model calls, 0 answered.\n"


def test_an_answer_repaired_once_is_two_calls_both_answered(
    team_workspace: MakeWorkspace, seed: Seed, capsys: pytest.CaptureFixture[str]
) -> None:
    workspace = team_workspace("invalid_once")
    seed(workspace, "req-1", "qa", events=3)
    out = _run(capsys, workspace)
    assert out == "Finished 1 envelope: 1 done, 0 failed, 0 rejected; 2 model calls, 2 answered.\n"


def test_the_json_counts_add_up_as_the_line_says(
    team_workspace: MakeWorkspace, seed: Seed, capsys: pytest.CaptureFixture[str]
) -> None:
    workspace = team_workspace("valid")
    folder = workspace.role_queue("qa")
    folder.mkdir(parents=True)
    (folder / "0-broken.json").write_text("{oops")  # set aside: rejected, no model call
    seed(workspace, "req-1", "qa", events=3)
    summary = json.loads(_run(capsys, workspace, "--json"))
    assert {key: summary[key] for key in ("finished", "done", "failed", "rejected")} == {
        "finished": 2, "done": 1, "failed": 0, "rejected": 1,
    }  # fmt: skip
    assert (summary["model_calls"], summary["answered"]) == (1, 1)
