"""A deliverable end to end (issue 33): a writer team whose writer is asked for its ``output``
(``roles.writer.output: true``) runs a request writer -> reviewer -> approver (a person) on a
real model command (``fake_model.py`` in script mode). The writer's first answer gives back the
contract's placeholder and is repaired; its draft then outlives the reviewer's and the
approver's answers in the request's ``result``, and ``status REQUEST_ID`` and ``export
--output-only`` show it."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from teams_runtime.cli import main

from ..support.cli_in_process import run_cli

DRAFT = "Launch note\n\nThe runtime ships today. Ünïcode kept.\n"
TEAM: dict[str, Any] = {
    "writer": {"hands_to": ["reviewer"], "output": True},
    "reviewer": {"hands_to": ["writer", "approver", ""]},
    "approver": {"hands_to": ["writer", ""], "model": {"backend": "human"}},
}
PLACEHOLDER = "one or two sentences on what you did and found"
SCRIPT: dict[str, Any] = {
    "writer": ["reviewer"],
    # The first answer copies the example's placeholder, as small models do; the repair's
    # answer says what it did and gives the draft.
    "writer:fields": [
        {"summary": PLACEHOLDER, "output": DRAFT},
        {"summary": "Wrote the launch note.", "output": DRAFT},
    ],
    "reviewer": ["approver"],
    "reviewer:fields": [{"summary": "Reads well; over to the approver."}],
}


def _workspace(tmp_path: Path, fake_model: Path, model: dict[str, Any] | None = None) -> Path:
    root = tmp_path / "ws"
    assert main(["init", str(root)]) == 0
    config = yaml.safe_load((root / "team_runtime.yaml").read_text())
    (root / "script.json").write_text(json.dumps(SCRIPT))
    config["team"] = {"roles": list(TEAM)}
    config["roles"] = TEAM
    config["model"] = model or {
        "backend": "command",
        "command": [sys.executable, str(fake_model), f"script:{root / 'script.json'}",
                    str(root / "model-state")],
        "timeout_seconds": 20,
    }  # fmt: skip
    (root / "team_runtime.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    return root


def _prompt(root: Path, role: str, call: int) -> str:
    return (root / "model-state" / f"prompt-req-1-{role}-{call}.txt").read_text()


def test_a_writer_teams_completed_request_keeps_the_draft_in_its_result(
    tmp_path: Path, fake_model: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _workspace(tmp_path, fake_model)

    def cli(*argv: str) -> tuple[int, str, str]:
        return run_cli(capsys, *argv, "--workspace", str(root))

    capsys.readouterr()
    assert cli("submit", "--role", "writer", "--scope", "Write the launch note",
               "--request-id", "req-1")[0] == 0  # fmt: skip
    status, out, err = cli("run", "--once")
    assert status == 0, err
    # The writer's contract names `output`; the reviewer's (not asked for one) does not.
    writer = _prompt(root, "writer", 1)
    assert (
        '"output": "your work itself: the text (or JSON object) the next role takes up"' in writer
    )
    assert "- Put your work itself (the draft, the plan, the answer) in `output`" in writer
    reviewer = _prompt(root, "reviewer", 1)
    assert '"output": "your work' not in reviewer.split("Current request:")[0]
    # The placeholder answer got a repair saying so; the reviewer read the draft in `result`.
    repair = _prompt(root, "writer", 2)
    assert (
        f'- `summary` repeats the example\'s placeholder "{PLACEHOLDER}": write your own ' in repair
    )
    current = json.loads(reviewer.split("Current request:\n", 1)[1].split("\n\nIncoming")[0])
    assert current["result"]["output"] == DRAFT

    # The approver (a person) approves without an output of its own: the draft stays.
    status, out, err = cli("answer", "req-1", "--status", "completed", "--summary", "Approved.")
    assert status == 0, err
    status, out, err = cli("export", "req-1")
    record = json.loads(out)
    result = record["result"]
    assert (result["role"], result["summary"], result["output"]) == ("approver", "Approved.", DRAFT)
    reports = [e["payload"] for e in record["events"] if e["type"] == "role_report"]
    assert [("output" in report) for report in reports] == [True, False, False]  # as given

    status, out, err = cli("status", "req-1", "--json")
    assert status == 0, err
    shown = json.loads(out)
    assert (shown["status"], shown["hops"], shown["last_role"]) == ("completed", 2, "approver")
    assert (shown["summary"], shown["output"]) == ("Approved.", DRAFT)
    status, out, err = cli("status", "req-1")
    assert out.startswith("request req-1: completed, 2 hand-offs, ")
    assert "\nlast role: approver\nsummary: Approved.\noutput:\n" + DRAFT in out
    status, out, err = cli("export", "req-1", "--output-only")
    assert (status, out) == (0, DRAFT)


def test_a_persons_answer_gives_its_own_output(
    tmp_path: Path, fake_model: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _workspace(tmp_path, fake_model)

    def cli(*argv: str) -> tuple[int, str, str]:
        return run_cli(capsys, *argv, "--workspace", str(root))

    capsys.readouterr()
    assert cli("submit", "--role", "writer", "--scope", "s", "--request-id", "req-1")[0] == 0
    assert cli("run", "--once")[0] == 0
    edited = tmp_path / "final.md"
    edited.write_text("The final note, as the approver edited it.\n", encoding="utf-8")
    status, out, err = cli("answer", "req-1", "--status", "completed", "--summary",
                           "Approved with edits.", "--output-file", str(edited))  # fmt: skip
    assert status == 0, err
    status, out, err = cli("status", "req-1", "--json")
    assert json.loads(out)["output"] == "The final note, as the approver edited it.\n"
    # An answer's output is held to the contract too: the placeholder is refused.
    assert cli("submit", "--role", "writer", "--scope", "s", "--request-id", "req-2")[0] == 0
    assert cli("run", "--once")[0] == 0
    status, out, err = cli("answer", "req-2", "--status", "completed", "--summary", "Fine.",
                           "--output", "your work itself: the text (or JSON object) the next "
                           "role takes up")  # fmt: skip
    assert status == 2
    assert "`output` repeats the example's placeholder" in err


def test_a_dry_run_writer_team_shows_the_writers_output(
    tmp_path: Path, fake_model: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _workspace(tmp_path, fake_model, model={"backend": "dry_run"})
    config = yaml.safe_load((root / "team_runtime.yaml").read_text())
    config["roles"]["approver"] = {"hands_to": ["writer", ""]}  # a model, in the dry run too
    (root / "team_runtime.yaml").write_text(yaml.safe_dump(config, sort_keys=False))

    def cli(*argv: str) -> tuple[int, str, str]:
        return run_cli(capsys, *argv, "--workspace", str(root))

    capsys.readouterr()
    assert cli("submit", "--role", "writer", "--scope", "s", "--request-id", "req-1")[0] == 0
    status, out, err = cli("run", "--once")
    assert status == 0, err
    status, out, err = cli("status", "req-1", "--json")
    shown = json.loads(out)
    assert shown["status"] == "completed"
    assert shown["output"] == "Dry run: the writer role's work."
    assert shown["last_role"] != "writer"  # a later role finished; the writer's work stayed


def test_status_and_export_say_when_a_request_has_no_output(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "ws"
    assert main(["init", str(root)]) == 0  # the default team: no role is asked for an output
    capsys.readouterr()
    ws = ("--workspace", str(root))
    submit = ("submit", "--role", "qa", "--scope", "s", "--request-id", "req-1")
    assert run_cli(capsys, *submit, *ws)[0] == 0
    assert run_cli(capsys, "run", "--once", *ws)[0] == 0
    status, out, err = run_cli(capsys, "status", "req-1", *ws)
    assert status == 0, err
    assert out.endswith("\noutput: none\n")
    status, out, err = run_cli(capsys, "export", "req-1", "--output-only", *ws)
    assert (status, err) == (
        2,
        "teams-runtime: error: request req-1 has no output (result.output) yet.\n",
    )
    status, out, err = run_cli(capsys, "status", "req-9", *ws)
    assert status != 0 and "req-9" in err


def test_status_of_a_failed_request_says_why_and_keeps_its_output(
    tmp_path: Path, fake_model: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _workspace(tmp_path, fake_model)

    def cli(*argv: str) -> tuple[int, str, str]:
        return run_cli(capsys, *argv, "--workspace", str(root))

    capsys.readouterr()
    assert cli("submit", "--role", "writer", "--scope", "s", "--request-id", "req-1")[0] == 0
    assert cli("run", "--once")[0] == 0
    assert cli("answer", "req-1", "--status", "failed", "--summary", "Not usable.")[0] == 0
    status, out, err = cli("status", "req-1", "--json")
    shown = json.loads(out)
    assert (shown["status"], shown["output"]) == ("failed", DRAFT)
    assert shown["failure"]["reason"] == "approver reported failed: Not usable."
    status, out, err = cli("status", "req-1")
    assert status == 0, err
    assert (
        "\nfailed: approver reported failed: Not usable.\n"
        "`teams-runtime retry req-1` queues its last step again\noutput:\n" in out
    )
