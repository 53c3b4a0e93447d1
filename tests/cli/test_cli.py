from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import unicodedata
from pathlib import Path
from typing import Any

import pytest

from teams_runtime.cli import main
from teams_runtime.cli._run import due_words
from teams_runtime.codecs.request_records import encode_record
from teams_runtime.demo import sample_record
from teams_runtime.storage import Workspace

from ..support.cli_in_process import init_nats_workspace, run_cli


@pytest.fixture
def workspace(tmp_path: Path, worked_example: dict[str, Any]) -> Path:
    assert main(["init", str(tmp_path / "ws")]) == 0
    root = tmp_path / "ws"
    (root / ".teams_runtime" / "requests" / "request-123.json").write_bytes(
        encode_record(worked_example)
    )
    return root


def test_init_writes_the_default_config_and_store(tmp_path: Path) -> None:
    assert main(["init", str(tmp_path / "new")]) == 0
    text = (tmp_path / "new" / "team_runtime.yaml").read_text()
    assert "prompt_context:\n  enabled: true\n  recent_events: 8\n  max_events: 16\n" in text
    assert (tmp_path / "new" / ".teams_runtime" / "requests").is_dir()


def test_init_refuses_to_overwrite(workspace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = workspace / "team_runtime.yaml"
    config.write_text("prompt_context: {max_events: 9}\n")
    status, out, err = run_cli(capsys, "init", str(workspace))
    assert status == 2 and out == ""
    assert err.startswith("teams-runtime: error: ") and "already exists" in err
    assert config.read_text() == "prompt_context: {max_events: 9}\n"


def test_project_prints_notice_then_current_request(
    workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, _ = run_cli(
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
    where = ["--workspace", str(workspace)]
    status, out, _ = run_cli(capsys, "project", "request-123", *where, "--json")
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
    status, out, _ = run_cli(
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
    status, out, _ = run_cli(
        capsys, "project", "--record", str(path), "--workspace", str(tmp_path), "--json"
    )
    assert status == 0
    assert json.loads(out)["compacted"] is False  # 12 events <= default max 16


def test_explain_gives_a_decision_per_event(
    workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, _ = run_cli(
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
    status, out, _ = run_cli(
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
    status, out, err = run_cli(capsys, *argv)
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
    status, out, err = run_cli(capsys, "project", "bad", "--workspace", str(workspace))
    assert status == 2 and out == ""
    assert err.startswith(f"teams-runtime: error: {path}: ") and needle in err
    assert path.read_bytes() == content


def test_bad_config_is_a_user_error(
    workspace: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    (workspace / "team_runtime.yaml").write_text("prompt_context: {enabled: 'yes'}\n")
    monkeypatch.chdir(workspace)  # the spec's exact message: the file is ./team_runtime.yaml
    status, out, err = run_cli(capsys, "project", "request-123")
    assert status == 2 and out == ""
    assert err == (
        "teams-runtime: error: team_runtime.yaml prompt_context.enabled must be a boolean.\n"
    )
    monkeypatch.chdir(workspace.parent)  # named by the path the user gave
    status, out, err = run_cli(capsys, "config", "--workspace", "ws")
    assert status == 2 and out == ""
    assert err == (
        "teams-runtime: error: ws/team_runtime.yaml prompt_context.enabled must be a boolean.\n"
    )


def test_record_file_is_never_modified(workspace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = workspace / ".teams_runtime" / "requests" / "request-123.json"
    before = path.read_bytes()
    for command in ("project", "explain"):
        run_cli(
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
    status, out, _ = run_cli(capsys, "demo", "--keep", str(tmp_path / "demo"))
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
    status, out, _ = run_cli(capsys, "submit", "--workspace", str(root), "--role", "planner",
                             "--scope", "Add CSV export", "--request-id", "req-a")  # fmt: skip
    assert status == 0 and "Queued req-a for planner (new request)" in out
    record = json.loads((root / ".teams_runtime" / "requests" / "req-a.json").read_text())
    assert record["status"] == "queued"
    assert [e["type"] for e in record["events"]] == ["created", "delegated"]
    status, out, _ = run_cli(capsys, "submit", "--workspace", str(root), "--role", "qa",
                             "--scope", "Check it", "--request-id", "req-a")  # fmt: skip
    assert "(existing request)" in out
    status, out, _ = run_cli(capsys, "run", "--workspace", str(root), "--once")
    assert status == 0
    assert "Finished 4 envelopes: 4 done, 0 failed, 0 rejected; 4 model calls, 4 answered." in out
    record = json.loads((root / ".teams_runtime" / "requests" / "req-a.json").read_text())
    assert record["status"] == "completed"
    status, out, _ = run_cli(capsys, "prompt", "req-a", "--role", "qa", "--workspace", str(root))
    assert status == 0 and out.startswith("You are the qa role inside teams_runtime.\n")
    status, out, _ = run_cli(capsys, "prompt", "req-a", "--role", "qa", "--workspace", str(root),
                             "--json", "--kind", "repair")  # fmt: skip
    answer = json.loads(out)
    assert answer["purpose"] == "contract_repair" and "Validation errors:" in answer["prompt"]
    assert answer["compacted"] is False and answer["notice"] == {}


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        pytest.param(
            ["submit", "--role", "boss", "--scope", "x"],
            "--role: unknown role 'boss'; choose one of: orchestrator, research, planner, ",
            id="role",
        ),
        pytest.param(
            ["submit", "--role", "version_controller", "--scope", "x"],
            "--role: role 'version_controller' takes no new work: its prompt_kind is "
            "version_control, so its work comes from a hand-off that says what to commit; "
            "choose one of: ",
            id="internal-role",
        ),
        pytest.param(
            ["submit", "--role", "../x", "--scope", "x"],
            "argument --role: '../x' is not a role name: use only letters and digits",
            id="not-a-role-name",
        ),
        pytest.param(
            ["prompt", "x", "--role", "boss"],
            "--role: unknown role 'boss'; roles are: orchestrator, research, ",
            id="prompt-role",
        ),
        pytest.param(
            ["run", "--once", "--roles", "qa,boss"],
            "--roles: boss is not of the team; its roles are: orchestrator, ",
            id="run-roles",
        ),
        pytest.param(
            ["submit", "--role", "qa", "--scope", "x", "--request-id", "../x"],
            "not a safe file name",
            id="unsafe-id",
        ),
        pytest.param(["prompt", "nope", "--role", "qa"], "no request 'nope'", id="unknown"),
        pytest.param(
            ["prompt", "x", "--role", "qa", "--kind", "poem"],
            "'poem' is not a prompt kind: role_task, contract_repair",
            id="kind",
        ),
    ],
)
def test_role_commands_user_errors(
    workspace: Path, capsys: pytest.CaptureFixture[str], argv: list[str], needle: str
) -> None:
    status, out, err = run_cli(capsys, *argv, "--workspace", str(workspace))
    assert status == 2 and out == ""
    assert "teams-runtime: error: " in err and needle in err and "Traceback" not in err


def test_run_with_a_broken_config_is_a_user_error(
    workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (workspace / "team_runtime.yaml").write_text("model: {backend: command}\n")
    status, out, err = run_cli(capsys, "run", "--workspace", str(workspace), "--once")
    assert status == 2 and out == ""
    assert "model.command must be a non-empty list" in err


def test_config_prints_what_is_in_force(
    workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (workspace / "team_runtime.yaml").write_text("prompt_context: {max_events: 20}\n")
    status, out, _ = run_cli(capsys, "config", "--workspace", str(workspace))
    assert status == 0
    config = json.loads(out)
    assert config["prompt_context"] == {
        "enabled": True,
        "recent_events": 8,
        "max_events": 20,
        "max_prompt_tokens": None,
        "layout": "upstream",
        "step": 8,
    }
    assert config["model"]["backend"] == "dry_run"
    (workspace / "team_runtime.yaml").write_text("prompt_context: {max_events: 0}\n")
    status, out, err = run_cli(capsys, "config", "--workspace", str(workspace))
    assert (status, out) == (2, "")
    assert err == (
        f"teams-runtime: error: {workspace}/team_runtime.yaml prompt_context.max_events must be "
        "a positive integer.\n"
    )


def test_config_shows_each_roles_budget_and_where_it_is_written(
    workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (workspace / "team_runtime.yaml").write_text(
        "prompt_context: {max_prompt_tokens: 6000}\n"
        "roles: {qa: {prompt_context: {max_prompt_tokens: 3000}}}\n"
    )
    status, out, _ = run_cli(capsys, "config", "--workspace", str(workspace))
    roles = json.loads(out)["roles"]
    assert status == 0
    assert roles["qa"]["prompt_context"] == {"max_prompt_tokens": 3000, "from": "role"}
    assert roles["planner"]["prompt_context"] == {"max_prompt_tokens": 6000, "from": "global"}
    (workspace / "team_runtime.yaml").write_text("prompt_context: {max_events: 20}\n")
    status, out, _ = run_cli(capsys, "config", "--workspace", str(workspace))
    shown = json.loads(out)["roles"]["qa"]["prompt_context"]
    assert shown == {"max_prompt_tokens": None, "from": "none"}


def test_config_never_prints_the_password_of_the_nats_url(
    workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = "nats://alice:s3cretPW@10.0.0.5:4222,nats://alice:s3cretPW@10.0.0.6:4222"
    (workspace / "team_runtime.yaml").write_text(f"backend: {{kind: nats, nats: {{url: '{url}'}}}}")
    status, out, err = run_cli(capsys, "config", "--workspace", str(workspace))
    assert status == 0 and "s3cretPW" not in out + err and "alice" not in out + err
    assert json.loads(out)["backend"]["nats"] == {
        "url": "nats://***@10.0.0.5:4222,nats://***@10.0.0.6:4222",
        "prefix": "teams",
        "replicas": 1,
        "connect_seconds": 2.0,
        "retry_seconds": 60.0,
    }


def test_init_refuses_a_nats_port_that_cannot_exist_without_showing_the_password(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, err = run_cli(capsys, "init", str(tmp_path / "host"), "--backend", "nats",
                               "--nats-url", "nats://u:pw@h:99999")  # fmt: skip
    assert (status, out) == (2, "")
    assert err == (
        "teams-runtime: error: team_runtime.yaml backend.nats.url 'nats://***@h:99999' names "
        "port 99999, which no server can listen on; a port is between 1 and 65535.\n"
    )
    assert not (tmp_path / "host").exists()


def test_replicas_a_single_nats_server_cannot_keep_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], nats_server: Any
) -> None:
    settings = nats_server.settings()
    root = init_nats_workspace(tmp_path / "host", settings)
    config = root / "team_runtime.yaml"
    config.write_text(config.read_text().replace("replicas: 1", "replicas: 3"))
    capsys.readouterr()
    status, out, err = run_cli(capsys, "status", "--workspace", str(root))
    assert (status, out) == (2, "")
    assert err == (
        "teams-runtime: error: team_runtime.yaml backend.nats.replicas is 3, but the NATS "
        f"server at {settings.url} is not part of a cluster (replicas > 1 not supported in "
        "non-clustered mode); set replicas: 1, or run a cluster of at least 3 servers "
        "(docs/scaling.md).\n"
    )


def _tree(root: Path) -> dict[str, bytes | None]:
    """Every path under ``root`` and its bytes (``None`` for a folder)."""
    return {
        str(path.relative_to(root)): None if path.is_dir() else path.read_bytes()
        for path in sorted(root.rglob("*"))
    }


def test_run_with_its_nats_server_down_exits_2_and_leaves_the_workspace_as_it_was(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], own_nats_server: Any
) -> None:
    # A workspace that worked, whose server is down now: `run` must say so and make nothing,
    # no logs folder nor log file, before it gives up.
    root = init_nats_workspace(tmp_path / "host", own_nats_server.settings())
    argv = ["submit", "--role", "qa", "--scope", "check", "--workspace", str(root)]
    assert run_cli(capsys, *argv)[0] == 0
    own_nats_server.stop()
    before = _tree(root)
    status, out, err = run_cli(capsys, "run", "--once", "--plain", "--workspace", str(root))
    assert (status, out) == (2, "")
    assert err.startswith(
        f"teams-runtime: error: cannot reach the NATS server at {own_nats_server.url} ("
    )
    assert err.count("\n") == 1
    assert _tree(root) == before
    assert not Workspace(root).logs_dir.exists()


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
    assert "Appended 2 events to req-1; it now has 7 events." in capsys.readouterr().out
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
    assert "Appended 1 event to req-1; it now has 1 event." in out
    assert "Nothing appended to req-1: key 'k-1' was appended before; it has 1 event." in out
    events = json.loads(record.read_bytes())["events"]
    assert [(e["summary"], e["append_key"]) for e in events] == [("once", "k-1")]


# --- JSON and flags that behave alike ---------------------------------------------------------


def test_explain_json_has_a_row_per_event(
    workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, _ = run_cli(capsys, "explain", "request-123", "--workspace", str(workspace),
                             "--recent-events", "4", "--max-events", "7", "--json")  # fmt: skip
    assert status == 0
    report = json.loads(out)
    keys = ["record", "total_events", "included_events", "omitted_events", "compacted",
            "recent_events", "max_events", "enabled", "events"]  # fmt: skip
    assert list(report) == keys
    assert report["record"].endswith("request-123.json")
    assert (report["total_events"], report["included_events"], report["omitted_events"]) == (
        12,
        7,
        5,
    )
    assert report["events"][4] == {
        "index": 4,
        "type": "role_report",
        "role": "designer",
        "decision": "backfill for designer",
    }
    assert report["events"][2]["role"] is None  # not role evidence
    assert [row["decision"] for row in report["events"][-4:]] == ["tail"] * 4


def test_submit_append_cancel_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = str(tmp_path / "ws")
    assert main(["init", root]) == 0
    capsys.readouterr()
    status, out, _ = run_cli(capsys, "submit", "--workspace", root, "--role", "qa", "--scope", "x",
                             "--request-id", "req-j", "--json")  # fmt: skip
    assert status == 0
    assert json.loads(out) == {"request_id": "req-j", "role": "qa", "created": True,
                               "reopened": False}  # fmt: skip
    status, out, _ = run_cli(capsys, "submit", "--workspace", root, "--role", "qa", "--scope", "x",
                             "--request-id", "req-j", "--json")  # fmt: skip
    assert json.loads(out)["created"] is False
    append = ["append", "req-j", "--workspace", root, "--key", "k", "--type", "note",
              "--actor", "qa", "--summary", "s", "--json"]  # fmt: skip
    status, out, _ = run_cli(capsys, *append)
    assert json.loads(out) == {
        "request_id": "req-j",
        "appended": 1,
        "already_appended": False,
        "events": 4,  # created, delegated, delegated, note
    }
    status, out, _ = run_cli(capsys, *append)
    assert json.loads(out) == {
        "request_id": "req-j",
        "appended": 0,
        "already_appended": True,
        "events": 4,
    }
    status, out, _ = run_cli(capsys, "cancel", "req-j", "--workspace", root, "--json")
    assert json.loads(out) == {"request_id": "req-j", "already_cancelled": False, "dropped": 2}
    status, out, _ = run_cli(capsys, "cancel", "req-j", "--workspace", root, "--json")
    assert json.loads(out) == {"request_id": "req-j", "already_cancelled": True, "dropped": 0}
    status, out, _ = run_cli(capsys, "cancel", "req-j", "--workspace", root)
    assert out == "req-j was already cancelled; dropped 0 queued envelopes.\n"


def test_run_json_summary_in_plain_mode(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = str(tmp_path / "ws")
    assert main(["init", root]) == 0
    assert main(["submit", "--workspace", root, "--role", "qa", "--scope", "x"]) == 0
    capsys.readouterr()
    status, out, err = run_cli(capsys, "run", "--workspace", root, "--once", "--json")
    assert status == 0
    assert json.loads(out) == {"finished": 1, "done": 1, "failed": 0, "rejected": 0,
                               "deferred": 0, "waiting": 0, "answers_timed_out": 0,
                               "answers_renewed": 0, "model_calls": 1, "answered": 1,
                               "stopped": False, "queued": None,
                               "left_deferred": 0, "next_attempt_at": None,
                               "deferred_envelopes": []}  # fmt: skip
    assert "INFO" in err and "│" not in err  # stderr is not a terminal: plain lines


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param(["status", "--bogus"], id="status"),
        pytest.param(["submit", "--role", "qa", "--scope", "x", "--bogus"], id="submit"),
        pytest.param(["project", "req-1", "--bogus"], id="project"),
        pytest.param(["metrics", "--bogus", "1"], id="metrics"),
    ],
)
def test_an_unknown_flag_shows_its_subcommands_usage(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    status, out, err = run_cli(capsys, *argv, "--workspace", str(tmp_path))
    assert status == 2 and out == ""
    assert err.startswith(f"usage: teams-runtime {argv[0]} [-h]")
    unknown = " ".join(argv[argv.index("--bogus") :])
    assert err.endswith(f"\nteams-runtime: error: unrecognized arguments: {unknown}\n")
    assert not (tmp_path / ".teams_runtime").exists()


def test_prompt_takes_the_projection_flags(
    workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["prompt", "request-123", "--role", "qa", "--workspace", str(workspace), "--json"]
    status, out, _ = run_cli(capsys, *base, "--recent-events", "4", "--max-events", "7")
    assert status == 0
    answer = json.loads(out)
    assert (answer["included_events"], answer["omitted_events"]) == (7, 5)
    assert answer["notice"]["recent_events"] == 4 and answer["notice"]["max_events"] == 7
    status, out, _ = run_cli(capsys, *base, "--disable", "--max-events", "3")
    answer = json.loads(out)
    assert (answer["included_events"], answer["omitted_events"]) == (12, 0)
    status, _, err = run_cli(capsys, *base, "--recent-events", "9", "--max-events", "3")
    assert status == 2 and "recent_events 9 is greater than max_events 3" in err


def test_project_disable_ignores_the_counts(
    workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, err = run_cli(capsys, "project", "request-123", "--workspace", str(workspace),
                               "--disable", "--max-events", "3", "--json")  # fmt: skip
    assert status == 0 and err == ""
    assert json.loads(out)["included_events"] == 12


@pytest.mark.parametrize(
    ("role", "kind", "purpose", "opening"),
    [
        pytest.param("qa", "role_task", "role_task", "You are the qa role", id="qa-role_task"),
        pytest.param("qa", "task", "role_task", "You are the qa role", id="qa-old-task"),
        pytest.param("qa", "repair", "contract_repair", "You are the qa role", id="old-repair"),
        pytest.param(
            "research",
            None,
            "research_decision",
            "You are the research role",
            id="research-default",
        ),
        pytest.param(
            "research",
            "contract_repair",
            "contract_repair",
            "You are the research role",
            id="research-repair",
        ),
        pytest.param(
            "version_controller",
            "version_control",
            "version_control",
            "You are the version_controller role",
            id="vc-own",
        ),
    ],
)
def test_prompt_kinds_are_named_as_in_the_logs(
    workspace: Path,
    capsys: pytest.CaptureFixture[str],
    role: str,
    kind: str | None,
    purpose: str,
    opening: str,
) -> None:
    argv = ["prompt", "request-123", "--role", role, "--workspace", str(workspace), "--json"]
    status, out, _ = run_cli(capsys, *argv, *(["--kind", kind] if kind else []))
    assert status == 0
    answer = json.loads(out)
    assert (answer["role"], answer["kind"], answer["purpose"]) == (role, purpose, purpose)
    assert answer["prompt"].startswith(opening)


@pytest.mark.parametrize(
    ("role", "kind", "own"),
    [
        pytest.param("qa", "research_decision", "role_task", id="qa-research"),
        pytest.param("qa", "version_control", "role_task", id="qa-vc"),
        pytest.param("research", "role_task", "research_decision", id="research-task"),
        pytest.param("version_controller", "task", "version_control", id="vc-task"),
    ],
)
def test_prompt_refuses_a_kind_the_role_never_gets(
    workspace: Path, capsys: pytest.CaptureFixture[str], role: str, kind: str, own: str
) -> None:
    status, out, err = run_cli(capsys, "prompt", "request-123", "--role", role, "--kind", kind,
                               "--workspace", str(workspace), "--json")  # fmt: skip
    assert status == 2 and out == ""
    assert err.startswith("teams-runtime: error: --kind ")
    assert f"never sent to the {role} role; it gets {own} (or contract_repair)" in err


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param(["submit", "--role", "qa", "--scope", ""], id="scope"),
        pytest.param(["submit", "--role", "qa", "--scope", "   "], id="scope-blank"),
        pytest.param(
            ["append", "req-1", "--type", "", "--actor", "qa", "--summary", "s"], id="type"
        ),
        pytest.param(
            ["append", "req-1", "--type", "t", "--actor", " ", "--summary", "s"], id="actor"
        ),
        pytest.param(
            ["append", "req-1", "--type", "t", "--actor", "qa", "--summary", ""], id="summary"
        ),
    ],
)
def test_empty_text_flags_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    record = _sample(tmp_path)
    before = record.read_bytes()
    status, out, err = run_cli(capsys, *argv, "--workspace", str(tmp_path))
    assert status == 2 and out == ""
    assert "teams-runtime: error: argument --" in err and ": must not be empty" in err
    assert record.read_bytes() == before
    assert not (tmp_path / ".teams_runtime" / "queue").exists()


def test_counts_read_as_words(workspace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = workspace / ".teams_runtime" / "requests" / "one.json"
    path.write_bytes(encode_record({"request_id": "one", "events": [{"type": "created"}]}))
    status, out, _ = run_cli(capsys, "explain", "one", "--workspace", str(workspace))
    assert status == 0 and ": 1 event, 1 included, 0 omitted" in out.splitlines()[0]
    status, out, _ = run_cli(capsys, "status", "--workspace", str(workspace))
    assert out.startswith("2 requests in ")


@pytest.mark.parametrize(
    "below",
    [
        pytest.param(".", id="the-workspace"),
        pytest.param("notes/drafts", id="a-folder-below"),
        pytest.param(".teams_runtime/requests", id="inside-teams_runtime"),
    ],
)
def test_the_workspace_is_found_like_git_finds_a_repository(
    workspace: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, below: str
) -> None:
    (workspace / below).mkdir(parents=True, exist_ok=True)
    monkeypatch.chdir(workspace / below)
    status, out, _ = run_cli(capsys, "project", "request-123", "--json")
    assert status == 0 and json.loads(out)["total_events"] == 12
    status, out, _ = run_cli(capsys, "status", "--json")
    assert status == 0 and json.loads(out)["workspace"] == str(workspace.resolve())


def test_workspace_flag_wins_over_the_one_around(
    workspace: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert main(["init", str(tmp_path / "other")]) == 0
    capsys.readouterr()
    monkeypatch.chdir(workspace)
    status, out, _ = run_cli(capsys, "status", "--json", "--workspace", str(tmp_path / "other"))
    assert status == 0 and json.loads(out)["requests"] == []


def test_outside_any_workspace_is_a_user_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "plain").mkdir()
    monkeypatch.chdir(tmp_path / "plain")
    for argv in (["status"], ["submit", "--role", "qa", "--scope", "x"], ["metrics"]):
        status, out, err = run_cli(capsys, *argv)
        assert (status, out) == (2, "")
        assert err.startswith(
            f"teams-runtime: error: no team_runtime.yaml in {tmp_path / 'plain'} or any folder "
            "above it"
        )
    assert list((tmp_path / "plain").iterdir()) == []  # nothing was created


def test_metrics_on_a_folder_that_is_not_a_workspace_is_a_user_error(
    workspace: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "plain").mkdir()
    status, out, err = run_cli(capsys, "metrics", "--workspace", str(tmp_path / "plain"))
    assert (status, out) == (2, "")
    assert err == (
        f"teams-runtime: error: {tmp_path / 'plain'} is not a workspace (it has no "
        "team_runtime.yaml); pass the folder holding it with --workspace DIR.\n"
    )
    # A real workspace that has logged nothing yet is not an error: there is just no data.
    status, out, _ = run_cli(capsys, "metrics", "--workspace", str(workspace))
    assert status == 0 and out.startswith("no data: no prompt records match")


def test_an_id_in_any_script_typed_in_nfc_or_nfd_is_one_request(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    nfc = "요청-1"
    nfd = unicodedata.normalize("NFD", nfc)
    assert main(["init", str(tmp_path / "ws")]) == 0
    monkeypatch.chdir(tmp_path / "ws")
    submit = ["submit", "--role", "planner", "--scope", "x", "--request-id", nfd]
    status, _, err = run_cli(capsys, *submit)
    assert status == 0, err
    lines = "".join(json.dumps({"type": "note", "actor": "qa"}) + "\n" for _ in range(20))
    (tmp_path / "events.jsonl").write_text(lines)
    status, _, err = run_cli(capsys, "append", nfd, "--from", str(tmp_path / "events.jsonl"))
    assert status == 0, err
    assert sorted(os.listdir(".teams_runtime/requests")) == [f"{nfc}.json", f"{nfc}.json.lock"]
    for typed in (nfc, nfd):
        status, out, err = run_cli(capsys, "project", typed, "--json")
        assert status == 0, err
        shown = json.loads(out)
        assert shown["total_events"] == 22
        assert shown["notice"]["canonical_request"] == f"./.teams_runtime/requests/{nfc}.json"
        assert shown["request"]["request_id"] == nfc
    status, out, _ = run_cli(capsys, "cancel", nfd)
    assert status == 0 and os.listdir(".teams_runtime/queue/planner") == []


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
        status, out, _ = run_cli(capsys, "metrics", "--json", *argv)
        assert status == 0
        totals.append(json.loads(out)["totals"]["prompts"])
    assert totals[0] > 0 and totals[1] > 0
    assert totals[2] == totals[0] + totals[1]
    (tmp_path / "link-1").symlink_to(hosts[0])
    again = [str(hosts[0]), f"{hosts[1]}/../host-1", str(tmp_path / "link-1"), str(hosts[1])]
    status, out, err = run_cli(capsys, "metrics", "--json", *(f"--workspace={a}" for a in again))
    assert status == 0 and json.loads(out)["totals"]["prompts"] == totals[2]  # each once
    assert err == "".join(
        f"teams-runtime: note: --workspace {folder} is the folder already given as "
        f"{hosts[0]}; its logs are read once.\n"
        for folder in again[1:3]
    )


HUGE = "99999999999999999999999"  # more than a C ssize_t holds


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        pytest.param(
            [
                "prompt",
                "request-123",
                "--role",
                "qa",
                "--recent-events",
                HUGE,
                "--max-events",
                HUGE,
            ],
            f"argument --recent-events: '{HUGE}' must be at most 1000000",
            id="prompt",
        ),
        pytest.param(
            ["project", "request-123", "--max-events", HUGE],
            f"argument --max-events: '{HUGE}' must be at most 1000000",
            id="project",
        ),
        pytest.param(
            ["explain", "request-123", "--max-events", "1000001"],
            "argument --max-events: '1000001' must be at most 1000000",
            id="explain-one-past-the-limit",
        ),
        pytest.param(
            ["project", "request-123", "--max-events", "9" * 5000],
            "argument --max-events: '" + "9" * 5000 + "' must be at most 1000000",
            id="more-digits-than-int-reads",
        ),
        pytest.param(
            ["metrics", "--hours", "1e308"],
            "argument --hours: '1e308' must be at most 876000 (a century)",
            id="metrics-hours",
        ),
        pytest.param(
            ["metrics", "--since", "0001-01-01T00:00:00"],
            "argument --since: '0001-01-01T00:00:00' is too far in the past or future to compare",
            id="metrics-since",
        ),
    ],
)
def test_huge_numbers_on_the_command_line_are_user_errors(
    workspace: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    status, out, err = run_cli(capsys, *argv, "--workspace", str(workspace))
    assert (status, out) == (2, "")
    assert f"teams-runtime: error: {message}" in err and "Traceback" not in err


def test_the_largest_counts_are_usable(workspace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # The limit is generous and real: a ContextActor's digest is built for it (prompt).
    for command in (["project"], ["explain"], ["prompt", "--role", "qa"]):
        status, out, err = run_cli(
            capsys, *command, "request-123", "--workspace", str(workspace), "--json",
            "--recent-events", "1000000", "--max-events", "1000000",
        )  # fmt: skip
        assert (status, err) == (0, "")
        assert json.loads(out)["included_events"] == 12


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param(["status"], id="status"),
        pytest.param(["config"], id="config"),
        pytest.param(["project", "request-123"], id="project"),
        pytest.param(["explain", "request-123"], id="explain"),
        pytest.param(["prompt", "request-123", "--role", "qa"], id="prompt"),
        pytest.param(
            ["append", "request-123", "--type", "t", "--actor", "a", "--summary", "s"], id="append"
        ),
        pytest.param(["submit", "--role", "qa", "--scope", "s"], id="submit"),
        pytest.param(["run", "--once", "--plain"], id="run"),
        pytest.param(["cancel", "request-123"], id="cancel"),
        pytest.param(["metrics"], id="metrics"),
        pytest.param(["export", "request-123"], id="export"),
        pytest.param(["import", "request-123.json"], id="import"),
    ],
)
def test_a_removed_current_folder_is_a_user_error(
    workspace: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    argv: list[str],
) -> None:
    gone = workspace / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()
    before = sorted(workspace.rglob("*"))
    status, out, err = run_cli(capsys, *argv, "--workspace", "..")
    named = "request-123.json" if argv[0] == "import" else ".."  # the first relative path
    assert (status, out) == (2, "")
    assert err == (
        f"teams-runtime: error: the current folder no longer exists, so the relative path "
        f"{named!r} leads nowhere; cd to a folder that exists, or give absolute paths.\n"
    )
    assert sorted(workspace.rglob("*")) == before
    # Absolute paths need no current folder: the same command works with one.
    if argv[0] == "status":
        status, out, _ = run_cli(capsys, "status", "--json", "--workspace", str(workspace))
        assert status == 0 and json.loads(out)["workspace"] == str(workspace)
    status, _, err = run_cli(capsys, "status")  # no --workspace: none can be found from here
    assert status == 2 and "the current folder no longer exists; cd to a workspace" in err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        pytest.param(
            ["submit", "--role", "qa", "--scope", "s", "--request-id", ""],
            "request id must be a non-empty string.",
            id="empty-request-id",
        ),
        pytest.param(
            ["metrics", "--request-id", ""],
            "request id must be a non-empty string.",
            id="empty-metrics-filter",
        ),
        pytest.param(
            ["submit", "--role", "qa", "--scope", "\u200b"],
            "argument --scope: must not be empty or blank",
            id="zero-width-space",
        ),
        pytest.param(
            ["submit", "--role", "qa", "--scope", "\ufeff \u200d\u2060\n"],
            "argument --scope: must not be empty or blank",
            id="format-characters-and-whitespace",
        ),
        pytest.param(
            ["submit", "--role", "qa", "--scope", "\u3164\u115f\ufe0f\u034f\u2800"],
            "argument --scope: must not be empty or blank",
            id="fillers-and-selectors",
        ),
        pytest.param(
            ["append", "request-123", "--type", "\u200b", "--actor", "a", "--summary", "s"],
            "argument --type: must not be empty or blank",
            id="append-type",
        ),
        pytest.param(
            ["submit", "--role", "qa", "--scope", "s", "--request-id", "\u0301abc"],
            "request id '\u0301abc' is not a safe file name",
            id="id-starting-with-a-combining-mark",
        ),
    ],
)
def test_blank_text_and_empty_ids_are_refused(
    workspace: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    before = {path: path.read_bytes() for path in workspace.rglob("*") if path.is_file()}
    status, out, err = run_cli(capsys, *argv, "--workspace", str(workspace))
    assert (status, out) == (2, "")
    assert err.splitlines()[-1].startswith(f"teams-runtime: error: {message}"), err
    after = {path: path.read_bytes() for path in workspace.rglob("*") if path.is_file()}
    assert after == before


def test_an_id_starting_with_a_dot_is_listed_by_status(
    workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The spec allows `.` anywhere in an id: such a request must not vanish from listings."""
    where = ["--workspace", str(workspace)]
    status, _, _ = run_cli(capsys, "submit", "--role", "qa", "--scope", "s",
                           "--request-id", ".hidden", *where)  # fmt: skip
    assert status == 0
    status, out, _ = run_cli(capsys, "status", "--json", *where)
    assert ".hidden" in [row["request_id"] for row in json.loads(out)["requests"]]


def test_run_once_says_due_now_for_an_envelope_whose_time_has_passed() -> None:
    now = time.time()
    assert due_words(now + 5, now).startswith("due at ")
    # A run that waited on a held lock ends after its envelope came due: never a past time
    # given as when it is due.
    assert due_words(now - 38, now).startswith("due now (it was due at ")
    assert due_words(now, now).startswith("due now")
