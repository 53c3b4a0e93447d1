"""``prompt``, ``project`` and ``explain`` under a token budget: ``--max-prompt-tokens N``
(or the config's), each event's tokens and what the budget decided, read and never written."""

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
    create_record(Workspace(tmp_path).record_paths("req-1"), sample_record(40, "req-1"))
    return tmp_path


def test_explain_shows_each_events_tokens_and_what_the_budget_left_out(
    workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    where = ["--workspace", str(workspace)]
    status, out, _ = run_cli(capsys, "explain", "req-1", "--json", *where)
    plain = json.loads(out)
    assert status == 0 and "tokens" not in plain["events"][0]  # no budget: as before
    status, out, _ = run_cli(
        capsys, "explain", "req-1", "--role", "qa", "--max-prompt-tokens", "2500", "--json", *where
    )
    shown = json.loads(out)
    assert status == 0 and shown["max_prompt_tokens"] == 2500
    assert shown["prompt_tokens_estimate"] <= 2500
    assert all(row["tokens"] > 0 for row in shown["events"])
    decisions = [row["decision"] for row in shown["events"]]
    assert "omitted: budget" in decisions
    kept = [row for row in shown["events"] if row["decision"] in ("tail",) or "backfill" in row[
        "decision"]]  # fmt: skip
    assert len(kept) == shown["included_events"] < plain["included_events"]
    status, out, _ = run_cli(capsys, "explain", "req-1", "--max-prompt-tokens", "2500", *where)
    assert "max_prompt_tokens=2500" in out.splitlines()[0]
    assert out.splitlines()[1].split() == ["index", "type", "role", "tokens", "decision"]


def test_prompt_shows_the_prompt_as_the_budget_makes_it(
    workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    where = ["--workspace", str(workspace)]
    argv = ["prompt", "req-1", "--role", "qa", "--json", *where]
    status, out, _ = run_cli(capsys, *argv)
    whole = json.loads(out)
    assert status == 0 and "max_prompt_tokens" not in whole
    status, out, _ = run_cli(capsys, *argv, "--max-prompt-tokens", "2500")
    fitted = json.loads(out)
    assert (fitted["max_prompt_tokens"], fitted["token_count_method"]) == (2500, "default")
    assert fitted["notice"]["max_prompt_tokens"] == 2500
    assert len(fitted["prompt"]) < len(whole["prompt"])
    assert fitted["prompt"].startswith("You are the qa role inside teams_runtime.")


def test_the_configs_budget_is_used_and_one_that_cannot_fit_is_an_error(
    workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = workspace / "team_runtime.yaml"
    config.write_text(
        config.read_text() + "roles: {qa: {prompt_context: {max_prompt_tokens: 300}}}\n"
    )
    status, out, err = run_cli(
        capsys, "prompt", "req-1", "--role", "qa", "--workspace", str(workspace)
    )
    assert (status, out) == (2, "")
    assert err.startswith(
        "teams-runtime: error: the prompt cannot fit its budget of 300 tokens "
        "(roles.qa.prompt_context.max_prompt_tokens) even without any event"
    )
    status, out, _ = run_cli(capsys, "project", "req-1", "--workspace", str(workspace))
    assert status == 0 and "max_prompt_tokens" not in out  # the role's budget is qa's alone


@pytest.mark.parametrize("value", ["0", "-3", "many", "100000001"])
def test_a_budget_flag_that_is_not_a_budget_is_refused(
    workspace: Path, capsys: pytest.CaptureFixture[str], value: str
) -> None:
    status, _, err = run_cli(
        capsys, "project", "req-1", "--max-prompt-tokens", value, "--workspace", str(workspace)
    )
    assert status == 2 and "--max-prompt-tokens" in err


def test_the_three_commands_name_the_budget_alike(
    workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    figures = ("max_prompt_tokens", "prompt_tokens_estimate", "token_count_method")
    budget = ["--max-prompt-tokens", "2500", "--json", "--workspace", str(workspace)]
    for command in (["prompt", "--role", "qa"], ["project"], ["explain"]):
        status, out, _ = run_cli(capsys, *command, "req-1", *budget)
        shown = json.loads(out)
        assert status == 0 and [shown.get(key) is not None for key in figures] == [True] * 3
        assert (shown["max_prompt_tokens"], shown["token_count_method"]) == (2500, "default")
        status, out, _ = run_cli(capsys, *command, "req-1", *budget[2:])
        assert status == 0 and not set(figures) & set(json.loads(out))  # no budget: none
