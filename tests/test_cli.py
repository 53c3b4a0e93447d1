from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from teams_runtime.actors.storage import Workspace
from teams_runtime.cli import main
from teams_runtime.codecs.records import encode_record
from teams_runtime.demo import sample_record


@pytest.fixture
def workspace(tmp_path: Path, worked_example: dict[str, Any]) -> Path:
    assert main(["init", str(tmp_path / "ws")]) == 0
    root = tmp_path / "ws"
    (root / ".teams_runtime" / "requests" / "request-123.json").write_bytes(
        encode_record(worked_example)
    )
    return root


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """Run the CLI in-process; argparse's own errors exit through SystemExit."""
    try:
        status = main(list(argv))
    except SystemExit as exit_:
        status = int(exit_.code or 0)
    out, err = capsys.readouterr()
    return status, out, err


def test_init_writes_the_default_config_and_store(tmp_path: Path) -> None:
    assert main(["init", str(tmp_path / "new")]) == 0
    text = (tmp_path / "new" / "team_runtime.yaml").read_text()
    assert "prompt_context:\n  enabled: true\n  recent_events: 8\n  max_events: 16\n" in text
    assert (tmp_path / "new" / ".teams_runtime" / "requests").is_dir()


def test_init_refuses_to_overwrite(workspace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = workspace / "team_runtime.yaml"
    config.write_text("prompt_context: {max_events: 9}\n")
    status, out, err = _run(capsys, "init", str(workspace))
    assert status == 2 and out == ""
    assert err.startswith("teams-runtime: error: ") and "already exists" in err
    assert config.read_text() == "prompt_context: {max_events: 9}\n"


def test_project_prints_notice_then_current_request(
    workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, _ = _run(
        capsys,
        "project",
        "request-123",
        "--workspace",
        str(workspace),
        "--recent-events",
        "4",
        "--max-events",
        "7",
    )
    assert status == 0
    notice, _, record = out.partition("\n\nCurrent request:\n")
    assert notice.startswith("Current request event-history projection:\n{\n")
    assert '"omitted_events": 5' in notice
    events = json.loads(record)["events"]
    assert [event["timestamp"] for event in events] == [
        "T05",
        "T06",
        "T08",
        "T09",
        "T10",
        "T11",
        "T12",
    ]


def test_project_json_has_the_documented_keys(
    workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (workspace / "team_runtime.yaml").write_text(
        "prompt_context:\n  recent_events: 4\n  max_events: 7\n"
    )
    status, out, _ = _run(capsys, "project", "request-123", "--workspace", str(workspace), "--json")
    assert status == 0
    result = json.loads(out)
    assert list(result) == [
        "notice",
        "total_events",
        "included_events",
        "omitted_events",
        "compacted",
        "selected_indices",
        "backfilled",
        "request",
    ]
    assert result["selected_indices"] == [4, 5, 7, 8, 9, 10, 11]
    assert result["backfilled"] == [
        {"index": 4, "role": "designer"},
        {"index": 5, "role": "planner"},
        {"index": 7, "role": "developer"},
    ]
    assert result["notice"]["max_events"] == 7


def test_project_disable_and_no_notice(workspace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = _run(
        capsys, "project", "request-123", "--workspace", str(workspace), "--disable"
    )
    assert status == 0
    assert out.startswith("Current request:\n")
    assert len(json.loads(out.removeprefix("Current request:\n"))["events"]) == 12


def test_record_outside_a_workspace_uses_defaults(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], worked_example: dict[str, Any]
) -> None:
    path = tmp_path / "r.json"
    path.write_bytes(encode_record(worked_example))
    status, out, _ = _run(
        capsys, "project", "--record", str(path), "--workspace", str(tmp_path), "--json"
    )
    assert status == 0
    assert json.loads(out)["compacted"] is False  # 12 events <= default max 16


def test_explain_gives_a_decision_per_event(
    workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, _ = _run(
        capsys,
        "explain",
        "request-123",
        "--workspace",
        str(workspace),
        "--recent-events",
        "4",
        "--max-events",
        "7",
    )
    assert status == 0
    decisions = [line.split(None, 3)[3] for line in out.splitlines()[2:]]
    assert decisions == [
        "omitted: capacity full",
        "omitted: capacity full",
        "omitted: capacity full",
        "omitted: capacity full",
        "backfill for designer",
        "backfill for planner",
        "omitted: not role evidence",
        "backfill for developer",
        "tail",
        "tail",
        "tail",
        "tail",
    ]


def test_explain_says_why_when_capacity_is_not_reached(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], worked_example: dict[str, Any]
) -> None:
    path = tmp_path / "r.json"
    path.write_bytes(encode_record(worked_example))
    status, out, _ = _run(
        capsys,
        "explain",
        "--record",
        str(path),
        "--recent-events",
        "4",
        "--max-events",
        "11",
        "--workspace",
        str(tmp_path),
    )
    assert status == 0
    decisions = [line.split(None, 3)[3] for line in out.splitlines()[2:]]
    assert decisions[3] == "omitted: role already represented"  # the older planner
    assert decisions[1] == "backfill for research"
    assert decisions[0] == "omitted: not role evidence"


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        pytest.param(["project", "../escape"], "not a safe file name", id="unsafe-id"),
        pytest.param(["project", "nope"], "no request 'nope'", id="unknown-id"),
        pytest.param(
            ["project", "request-123", "--recent-events", "20"],
            "max_events must be greater than or equal to recent_events",
            id="flags-order",
        ),
        pytest.param(
            ["project", "request-123", "--max-events", "0"],
            "positive integer",
            id="flag-not-positive",
        ),
        pytest.param(["project"], "one of the arguments", id="no-selector"),
        pytest.param(["frobnicate"], "invalid choice", id="unknown-command"),
    ],
)
def test_user_errors_exit_2_with_a_clear_message(
    workspace: Path, capsys: pytest.CaptureFixture[str], argv: list[str], needle: str
) -> None:
    if argv[0] == "project":
        argv = [*argv, "--workspace", str(workspace)]
    status, out, err = _run(capsys, *argv)
    assert status == 2
    assert out == ""
    assert "teams-runtime: error: " in err and needle in err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        pytest.param(b'{"events": [', "not valid JSON", id="torn"),
        pytest.param(b"[1, 2]", "must be a JSON object", id="array"),
        pytest.param(b'{"a": "\xff"}', "not valid UTF-8", id="bad-utf8"),
    ],
)
def test_malformed_record_is_a_user_error_and_untouched(
    workspace: Path, capsys: pytest.CaptureFixture[str], content: bytes, needle: str
) -> None:
    path = workspace / ".teams_runtime" / "requests" / "bad.json"
    path.write_bytes(content)
    status, out, err = _run(capsys, "project", "bad", "--workspace", str(workspace))
    assert status == 2 and out == ""
    assert err.startswith(f"teams-runtime: error: {path}: ") and needle in err
    assert path.read_bytes() == content


def test_bad_config_is_a_user_error(workspace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (workspace / "team_runtime.yaml").write_text("prompt_context: {enabled: 'yes'}\n")
    status, out, err = _run(capsys, "project", "request-123", "--workspace", str(workspace))
    assert status == 2 and out == ""
    assert err == (
        "teams-runtime: error: team_runtime.yaml prompt_context.enabled must be a boolean.\n"
    )


def test_record_file_is_never_modified(workspace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = workspace / ".teams_runtime" / "requests" / "request-123.json"
    before = path.read_bytes()
    for command in ("project", "explain"):
        _run(
            capsys,
            command,
            "request-123",
            "--workspace",
            str(workspace),
            "--max-events",
            "8",
            "--recent-events",
            "2",
        )
    assert path.read_bytes() == before


def test_console_script_and_module_run(tmp_path: Path) -> None:
    for command in (["teams-runtime"], [sys.executable, "-m", "teams_runtime"]):
        done = subprocess.run(
            [*command, "project", "x", "--workspace", str(tmp_path)],
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 2
        assert done.stdout == ""
        assert done.stderr.startswith("teams-runtime: error: ")
        assert "Traceback" not in done.stderr


def test_demo_runs_the_team_and_reports_every_prompt(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, _ = _run(capsys, "demo", "--keep", str(tmp_path / "demo"))
    assert status == 0
    rows = [line.split() for line in out.splitlines() if line.startswith("req-")]
    purposes = {row[2] for row in rows}
    assert {"role_task", "research_decision", "version_control"} <= purposes
    omitted = [int(row[5]) for row in rows]
    assert max(omitted) > 0 and min(omitted) == 0
    assert "prompts (" in out and "compacted)" in out and "Omitted events stay" in out
    assert (tmp_path / "demo" / ".teams_runtime" / "logs" / "prompt_context.jsonl").exists()
    assert "teams-runtime prompt req-long --role qa --workspace" in out


def test_submit_run_prompt_end_to_end(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "ws"
    assert main(["init", str(root)]) == 0
    status, out, _ = _run(capsys, "submit", "--workspace", str(root), "--role", "planner",
                          "--scope", "Add CSV export", "--request-id", "req-a")  # fmt: skip
    assert status == 0 and "Queued req-a for planner (new request)" in out
    record = json.loads((root / ".teams_runtime" / "requests" / "req-a.json").read_text())
    assert record["status"] == "queued"
    assert [e["type"] for e in record["events"]] == ["created", "delegated"]
    status, out, _ = _run(capsys, "submit", "--workspace", str(root), "--role", "qa",
                          "--scope", "Check it", "--request-id", "req-a")  # fmt: skip
    assert "(existing request)" in out
    status, out, _ = _run(capsys, "run", "--workspace", str(root), "--once")
    assert status == 0
    assert "Handled 4 envelope(s): 0 failed" in out
    record = json.loads((root / ".teams_runtime" / "requests" / "req-a.json").read_text())
    assert record["status"] == "completed"
    status, out, _ = _run(capsys, "prompt", "req-a", "--role", "qa", "--workspace", str(root))
    assert status == 0 and out.startswith("You are the qa role inside teams_runtime.\n")
    status, out, _ = _run(capsys, "prompt", "req-a", "--role", "qa", "--workspace", str(root),
                          "--json", "--kind", "repair")  # fmt: skip
    answer = json.loads(out)
    assert answer["purpose"] == "contract_repair" and "Validation errors:" in answer["prompt"]
    assert answer["compacted"] is False and answer["notice"] == {}


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        pytest.param(["submit", "--role", "boss", "--scope", "x"], "invalid choice", id="role"),
        pytest.param(
            ["submit", "--role", "qa", "--scope", "x", "--request-id", "../x"],
            "not a safe file name",
            id="unsafe-id",
        ),
        pytest.param(["prompt", "nope", "--role", "qa"], "no request 'nope'", id="unknown"),
        pytest.param(
            ["prompt", "x", "--role", "qa", "--kind", "poem"], "invalid choice", id="kind"
        ),
    ],
)
def test_role_commands_user_errors(
    workspace: Path, capsys: pytest.CaptureFixture[str], argv: list[str], needle: str
) -> None:
    status, out, err = _run(capsys, *argv, "--workspace", str(workspace))
    assert status == 2 and out == ""
    assert "teams-runtime: error: " in err and needle in err and "Traceback" not in err


def test_run_with_a_broken_config_is_a_user_error(
    workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (workspace / "team_runtime.yaml").write_text("model: {backend: command}\n")
    status, out, err = _run(capsys, "run", "--workspace", str(workspace), "--once")
    assert status == 2 and out == ""
    assert "model.command must be a non-empty list" in err


def test_config_prints_what_is_in_force(
    workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (workspace / "team_runtime.yaml").write_text("prompt_context: {max_events: 20}\n")
    status, out, _ = _run(capsys, "config", "--workspace", str(workspace))
    assert status == 0
    config = json.loads(out)
    assert config["prompt_context"] == {"enabled": True, "recent_events": 8, "max_events": 20}
    assert config["model"]["backend"] == "dry_run"
    (workspace / "team_runtime.yaml").write_text("prompt_context: {max_events: 0}\n")
    status, out, err = _run(capsys, "config", "--workspace", str(workspace))
    assert (status, out) == (2, "")
    assert err == (
        "teams-runtime: error: team_runtime.yaml prompt_context.max_events must be a positive "
        "integer.\n"
    )


def _sample(root: Path, events: int = 5) -> Path:
    path = Workspace(root).request_path("req-1")
    path.parent.mkdir(parents=True)
    path.write_bytes(encode_record(sample_record(events, "req-1")))
    return path


def test_append_from_lines_writes_all_or_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _sample(tmp_path)
    good = tmp_path / "good.jsonl"
    good.write_text('{"type": "a", "actor": "qa"}\n\n{"type": "b", "payload": {"x": 1}}\n')
    assert main(["append", "req-1", "--workspace", str(tmp_path), "--from", str(good)]) == 0
    assert "Appended 2 event(s) to req-1; it now has 7 events." in capsys.readouterr().out
    before = path.read_bytes()
    for content in ('{"type": "c"}\nnot json\n', '{"type": "c"}\n[1, 2]\n', "\n"):
        bad = tmp_path / "bad.jsonl"
        bad.write_text(content)
        assert main(["append", "req-1", "--workspace", str(tmp_path), "--from", str(bad)]) == 2
        out, err = capsys.readouterr()
        assert out == "" and err.startswith("teams-runtime: error: ")
        assert path.read_bytes() == before


def test_append_with_flags(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _sample(tmp_path)
    payload = '{"role": "qa", "status": "done"}'
    argv = ["append", "req-1", "--workspace", str(tmp_path), "--type", "role_report",
            "--actor", "qa", "--summary", "ok", "--payload", payload]  # fmt: skip
    assert main(argv) == 0
    last = json.loads(path.read_bytes())["events"][-1]
    assert (last["type"], last["actor"], last["payload"]) == (
        "role_report",
        "qa",
        {"role": "qa", "status": "done"},
    )
    assert main([*argv[:3], str(tmp_path), "--type", "x"]) == 2
    assert "missing: --actor, --summary" in capsys.readouterr().err
    assert main([*argv[:-1], "[1]"]) == 2
    assert "--payload must be a JSON object" in capsys.readouterr().err
    assert main(["append", "../evil", "--workspace", str(tmp_path), "--type", "x", "--actor", "a",
                 "--summary", "s"]) == 2  # fmt: skip
    assert "not a safe file name" in capsys.readouterr().err
    assert main(["append", "nope", "--workspace", str(tmp_path), "--type", "x", "--actor", "a",
                 "--summary", "s"]) == 2  # fmt: skip
    assert "no request 'nope'" in capsys.readouterr().err


def test_append_with_a_key_is_written_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    workspace = tmp_path / "ws"
    assert main(["init", str(workspace)]) == 0
    record = workspace / ".teams_runtime" / "requests" / "req-1.json"
    record.write_bytes(encode_record({"request_id": "req-1", "events": []}))
    argv = ["append", "req-1", "--workspace", str(workspace), "--key", "k-1",
            "--type", "note", "--actor", "qa", "--summary", "once"]  # fmt: skip
    assert main(argv) == 0
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert out.count("it now has 1 events") == 2
    events = json.loads(record.read_bytes())["events"]
    assert [(e["summary"], e["append_key"]) for e in events] == [("once", "k-1")]


def test_metrics_adds_up_several_workspace_folders(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    hosts = [tmp_path / "host-1", tmp_path / "host-2"]
    for number, host in enumerate(hosts, start=1):
        assert main(["init", str(host)]) == 0
        for request in range(number):  # one request on the first host, two on the second
            assert main(["submit", "--workspace", str(host), "--role", "qa", "--scope", "x",
                         "--request-id", f"req-{request}"]) == 0  # fmt: skip
        assert main(["run", "--once", "--workspace", str(host)]) == 0
    capsys.readouterr()
    totals = []
    for argv in (["--workspace", str(hosts[0])], ["--workspace", str(hosts[1])],
                 ["--workspace", str(hosts[0]), "--workspace", str(hosts[1])]):  # fmt: skip
        status, out, _ = _run(capsys, "metrics", "--json", *argv)
        assert status == 0
        totals.append(json.loads(out)["totals"]["prompts"])
    assert totals[0] > 0 and totals[1] > 0
    assert totals[2] == totals[0] + totals[1]
