"""A team of one's own with a person in it, on both backends: ``writer`` and ``reviewer`` are
models (``fake_model.py`` in script mode, a real subprocess), ``approver`` a person
(``model.backend: human``). A request goes writer -> reviewer -> approver; ``inbox`` lists it;
``answer`` completes it, held to the approver's ``hands_to``; the record holds each role's
report once (the worked example of docs/roles.md)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml

from teams_runtime.cli import main

from ..support.cli_in_process import init_nats_workspace, run_cli
from ..support.console_team import SCRIPT, TEAM  # the writer team, a person approving

CAST = ("writer", "reviewer", "approver")


@pytest.fixture(params=["file", "nats"])
def team_root(request: pytest.FixtureRequest, tmp_path: Path, fake_model: Path) -> Path:
    """A workspace of the writer/reviewer/approver team, on either backend."""
    root = tmp_path / "ws"
    if request.param == "nats":
        init_nats_workspace(root, request.getfixturevalue("nats_server").settings())
    else:
        assert main(["init", str(root)]) == 0
    config = yaml.safe_load((root / "team_runtime.yaml").read_text())
    (root / "script.json").write_text(json.dumps(SCRIPT))
    config["team"] = {"roles": list(TEAM)}
    config["roles"] = TEAM
    config["model"] = {
        "backend": "command",
        "command": [sys.executable, str(fake_model), f"script:{root / 'script.json'}",
                    str(root / "model-state")],
        "timeout_seconds": 20,
    }  # fmt: skip
    (root / "team_runtime.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    return root


def test_a_person_approves_what_the_models_of_the_team_handed_on(
    team_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def cli(*argv: str) -> tuple[int, str, str]:
        return run_cli(capsys, *argv, "--workspace", str(team_root))

    capsys.readouterr()
    status, out, _ = cli("config", "--graph")
    assert status == 0 and "approver -> writer, or done (a person)\n" in out
    status, _, err = cli("submit", "--role", "writer", "--scope", "Write the launch note",
                         "--request-id", "req-1")  # fmt: skip
    assert status == 0, err
    status, out, err = cli("run", "--once")
    assert status == 0, err
    assert "Finished 2 envelopes: 2 done, 0 failed, 0 rejected; 2 model calls, 2 answered." in out
    assert "1 envelope put in the inbox for a person's answer" in out

    status, out, err = cli("inbox", "--json")
    assert status == 0, err
    (row,) = json.loads(out)["waiting"]
    assert (row["request_id"], row["role"], row["from_role"]) == ("req-1", "approver", "reviewer")
    status, out, err = cli("inbox", "show", "req-1")
    assert status == 0, err
    assert "Role rules (approver):\n- Approve the reviewed draft" in out  # the cast's rules

    # The approver may hand back to the writer, or finish: not to the reviewer.
    status, out, err = cli("answer", "req-1", "--status", "completed", "--summary", "Ok.",
                           "--next-role", "reviewer")  # fmt: skip
    assert (status, out) == (2, "")
    assert "`next_role` must be empty or one of: writer (approver may hand only to these)." in err
    status, out, err = cli("answer", "req-1", "--status", "completed", "--summary", "Approved.")
    assert status == 0, err
    assert out == "Recorded the approver answer to req-1 (completed); the request is completed.\n"
    status, _, err = cli("answer", "req-1", "--status", "completed", "--summary", "Again.")
    assert status == 2 and "no answer waits" in err  # answered once

    status, out, err = cli("export", "req-1")
    assert status == 0, err
    record = json.loads(out)
    reports = [e["actor"] for e in record["events"] if e.get("type") == "role_report"]
    assert reports == list(CAST)  # each role's report, once
    hand_offs = [(e["payload"]["from_role"], e["payload"]["to_role"])
                 for e in record["events"] if e["type"] == "delegated"]  # fmt: skip
    assert hand_offs == [("user", "writer"), ("writer", "reviewer"),
                         ("reviewer", "approver")]  # fmt: skip
    assert (record["status"], record["current_role"]) == ("completed", "approver")
    assert record["result"]["summary"] == "Approved."
    calls = (team_root / "model-state" / "calls.log").read_text().splitlines()
    assert [json.loads(line)["role"] for line in calls] == ["writer", "reviewer"]  # no model
    status, out, _ = cli("status", "--json")
    report = json.loads(out)
    assert (list(report["roles"]), report["waiting_answers"]) == (list(CAST), [])
