"""A request's epochs: a cancel, a failure, a reopen and a retry move a request to its next
epoch, and work made for an older one (a person's answer still waiting, a model call still
under way) never comes back: it is refused, or recorded as a content-free ``stale_outcome``
that hands nothing on and changes nothing."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from teams_runtime.storage import Workspace

from ...support.cli_in_process import init_nats_workspace, run_cli
from ...support.waiting import eventually_sync

PERSON_QA = "roles:\n  qa:\n    model: {backend: human}\n"


@pytest.fixture(params=["file", "nats"])
def person_workspace(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    """A dry-run workspace whose qa is a person, on either backend."""
    root = tmp_path / "ws"
    if request.param == "nats":
        init_nats_workspace(root, request.getfixturevalue("nats_server").settings())
    else:
        assert run_cli(request.getfixturevalue("capsys"), "init", str(root))[0] == 0
    config = root / "team_runtime.yaml"
    config.write_text(config.read_text() + PERSON_QA)
    return root


def _json(capsys: pytest.CaptureFixture[str], *argv: str) -> Any:
    status, out, err = run_cli(capsys, *argv)
    assert status == 0, err
    return json.loads(out)


def _record(capsys: pytest.CaptureFixture[str], root: Path, request_id: str) -> dict[str, Any]:
    status, out, err = run_cli(capsys, "export", request_id, "--workspace", str(root))
    assert status == 0, err
    record: dict[str, Any] = json.loads(out)
    return record


def test_an_answer_asked_for_before_a_cancel_and_reopen_is_refused(
    person_workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ws = ("--workspace", str(person_workspace))
    run_cli(capsys, "submit", "--role", "qa", "--scope", "check", "--request-id", "req-1", *ws)
    assert run_cli(capsys, "run", "--once", "--plain", *ws)[0] == 0
    (old,) = _json(capsys, "inbox", "--json", *ws)["waiting"]
    # Cancelled and reopened before anything reads the inbox: the old answer still waits.
    assert run_cli(capsys, "cancel", "req-1", *ws)[0] == 0
    reopen = ("submit", "--role", "qa", "--scope", "again", "--request-id", "req-1", "--reopen")
    assert run_cli(capsys, *reopen, *ws)[0] == 0
    before = _record(capsys, person_workspace, "req-1")
    status, _, err = run_cli(
        capsys, "answer", old["envelope_id"], "--status", "completed", "--summary", "ok", *ws
    )
    assert status == 2
    assert "was cancelled, failed, reopened or retried since this answer was asked for" in err
    after = _record(capsys, person_workspace, "req-1")
    assert after == before  # nothing written
    assert before["epoch"] == 2  # the cancel's, then the reopen's
    # The new work waits for its answer, which is taken.
    assert run_cli(capsys, "run", "--once", "--plain", *ws)[0] == 0
    (new,) = _json(capsys, "inbox", "--json", *ws)["waiting"]
    assert new["envelope_id"] != old["envelope_id"]
    answer = ("answer", new["envelope_id"], "--status", "completed", "--summary", "ok")
    assert run_cli(capsys, *answer, *ws)[0] == 0
    reports = [e for e in _record(capsys, person_workspace, "req-1")["events"]
               if e["type"] == "role_report"]  # fmt: skip
    assert len(reports) == 1


def test_a_model_call_under_way_when_its_request_is_cancelled_and_reopened_hands_nothing_on(
    tmp_path: Path,
    team_workspace: Callable[..., Workspace],
    capsys: pytest.CaptureFixture[str],
) -> None:
    workspace = team_workspace("slow:3")
    ws = ("--workspace", str(workspace.root))
    run_cli(capsys, "submit", "--role", "planner", "--scope", "s", "--request-id", "req-1", *ws)
    worker = subprocess.Popen(
        [sys.executable, "-P", "-m", "teams_runtime", "run", "--once", "--plain", *ws],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        calls = workspace.root / "model-state"
        eventually_sync(lambda: any(calls.glob("calls-req-1-planner*")), "the planner call", 20)
        assert run_cli(capsys, "cancel", "req-1", *ws)[0] == 0
        reopen = ("submit", "--role", "qa", "--scope", "again", "--request-id", "req-1")
        assert run_cli(capsys, *reopen, "--reopen", *ws)[0] == 0
        _, err = worker.communicate(timeout=60)
    finally:
        if worker.poll() is None:
            worker.kill()
    assert worker.returncode == 0, err
    record = _record(capsys, workspace.root, "req-1")
    kinds = [(e["type"], e["actor"]) for e in record["events"]]
    assert ("stale_outcome", "planner") in kinds
    assert ("role_report", "planner") not in kinds  # no evidence of the older epoch
    # The only hand-offs: the first submit's and the reopen's; the planner's went nowhere.
    hand_offs = [e["payload"]["to_role"] for e in record["events"] if e["type"] == "delegated"]
    assert hand_offs == ["planner", "qa"]
    stale = next(e for e in record["events"] if e["type"] == "stale_outcome")
    assert stale["payload"] == {
        "envelope_id": stale["payload"]["envelope_id"],
        "epoch": 0,
        "current_epoch": 2,
    }
    # The reopened work (qa's) was done, as the current epoch's.
    assert record["status"] == "completed" and record["current_role"] == "qa"


def test_status_shows_no_answer_of_an_older_epoch_as_waiting(
    person_workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ws = ("--workspace", str(person_workspace))
    run_cli(capsys, "submit", "--role", "qa", "--scope", "check", "--request-id", "req-1", *ws)
    assert run_cli(capsys, "run", "--once", "--plain", *ws)[0] == 0
    assert len(_json(capsys, "status", "--json", *ws)["waiting_answers"]) == 1
    assert run_cli(capsys, "cancel", "req-1", *ws)[0] == 0
    reopen = ("submit", "--role", "planner", "--scope", "again", "--request-id", "req-1")
    assert run_cli(capsys, *reopen, "--reopen", *ws)[0] == 0
    # Read only, before anything tidied the inbox: the old answer waits no more.
    assert _json(capsys, "status", "--json", *ws)["waiting_answers"] == []
