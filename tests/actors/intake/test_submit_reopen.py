"""More work for a request that has finished (completed, failed) or was cancelled needs
``submit --reopen``: without it, exit 2 naming the flag and nothing written or queued; with it
the request is reopened (a ``reopened`` event, then ``delegated``) and handled again. A
blocked request takes more work as it is. On both backends."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from teams_runtime.cli import main
from teams_runtime.demo import sample_record
from teams_runtime.storage import FileWorkQueue, Workspace
from teams_runtime.storage.files.file_store import create_record

from ...support.cli_in_process import init_nats_workspace, run_cli


def _workspace(root: Path, status: str) -> Workspace:
    assert main(["init", str(root)]) == 0
    workspace = Workspace(root)
    record = sample_record(4, "req-1") | {"status": status}
    if status == "failed":  # as a failing outcome leaves it, for `retry`
        record["failed_envelope"] = {"request_id": "req-1", "sender": "user", "target": "qa"}
    create_record(workspace.record_paths("req-1"), record)
    return workspace


def _record(workspace: Workspace) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(workspace.request_path("req-1").read_bytes())
    return data


SUBMIT = ["submit", "--role", "qa", "--scope", "check it again", "--request-id", "req-1"]


@pytest.mark.parametrize("status", ["completed", "failed", "cancelled"])
def test_more_work_for_a_finished_request_needs_reopen(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], status: str
) -> None:
    workspace = _workspace(tmp_path / "ws", status)
    before = workspace.request_path("req-1").read_bytes()
    capsys.readouterr()
    code, out, err = run_cli(capsys, *SUBMIT, "--workspace", str(workspace.root))
    assert (code, out) == (2, "")
    assert err == (
        f"teams-runtime: error: request req-1 is {status}; more work would reopen it: give "
        "--reopen to do so. Nothing was queued.\n"
    )
    assert workspace.request_path("req-1").read_bytes() == before
    assert sum(FileWorkQueue(workspace).counts().values()) == 0

    code, out, _ = run_cli(capsys, *SUBMIT, "--reopen", "--workspace", str(workspace.root))
    assert code == 0
    assert out.startswith(f"Queued req-1 for qa (reopened: it was {status}); ")
    record = _record(workspace)
    assert record["status"] == "queued" and record["current_role"] == "qa"
    assert record.get("failed_envelope") is None  # a reopened failure is not retried later
    reopened, delegated = record["events"][-2:]
    assert (reopened["type"], reopened["payload"]) == ("reopened", {"from_status": status})
    assert delegated["type"] == "delegated"
    assert FileWorkQueue(workspace).waiting()["qa"] == 1
    code, out, _ = run_cli(capsys, "run", "--once", "--plain", "--workspace", str(workspace.root))
    assert code == 0 and _record(workspace)["status"] == "completed"  # handled again


@pytest.mark.parametrize("status", ["blocked", "in_progress", "queued"])
def test_a_request_that_has_not_finished_takes_more_work_as_it_is(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], status: str
) -> None:
    workspace = _workspace(tmp_path / "ws", status)
    capsys.readouterr()
    code, out, _ = run_cli(capsys, *SUBMIT, "--json", "--workspace", str(workspace.root))
    assert code == 0
    assert json.loads(out) == {"request_id": "req-1", "role": "qa", "created": False,
                               "reopened": False}  # fmt: skip
    assert [event["type"] for event in _record(workspace)["events"][-1:]] == ["delegated"]


def test_reopen_on_nats(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], nats_server: Any
) -> None:
    root = str(init_nats_workspace(tmp_path / "host", nats_server.settings()))
    assert main([*SUBMIT, "--workspace", root]) == 0
    assert main(["cancel", "req-1", "--workspace", root]) == 0
    capsys.readouterr()
    code, out, err = run_cli(capsys, *SUBMIT, "--workspace", root)
    assert (code, out) == (2, "") and "give --reopen to do so" in err
    code, out, _ = run_cli(capsys, *SUBMIT, "--reopen", "--json", "--workspace", root)
    assert code == 0 and json.loads(out)["reopened"] is True
    code, out, _ = run_cli(capsys, "status", "--json", "--workspace", root)
    report = json.loads(out)
    assert report["requests"][0]["status"] == "queued"
    assert report["roles"]["qa"]["waiting"] == 1
