"""``export`` and ``import`` between backends, ``init --backend nats``, and every command on a
workspace whose requests live on a real ``nats-server``: the same output as the file storage."""

from __future__ import annotations

import json
import sys
import unicodedata
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from teams_runtime.actors.context._actor import ContextActor
from teams_runtime.cli import main
from teams_runtime.codecs.request_records import encode_record
from teams_runtime.demo import sample_record
from teams_runtime.storage import load_team_config
from teams_runtime.storage.nats import _append_writer as append_writer
from teams_runtime.storage.nats._record_reader import RecordReader
from teams_runtime.storage.nats.connection import NatsConnection

from ..support.cli_in_process import init_nats_workspace, run_cli
from ..support.paths import FAKE_MODEL


@pytest.fixture
def record_file(tmp_path: Path) -> Path:
    """A canonical record file of 40 events (compaction has something to do)."""
    path = tmp_path / "files" / "req-1.json"
    path.parent.mkdir()
    path.write_bytes(encode_record(sample_record(40, "req-1")))
    return path


# --- init ---------------------------------------------------------------------------------------


def test_init_with_nats_writes_the_backend_block_and_no_store_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "host"
    status, out, _ = run_cli(capsys, "init", str(root), "--backend", "nats",
                             "--nats-url", "nats://10.1.2.3:4222")  # fmt: skip
    assert status == 0 and "requests and the queue on NATS at nats://10.1.2.3:4222" in out
    config = yaml.safe_load((root / "team_runtime.yaml").read_text())
    assert config["backend"] == {
        "kind": "nats",
        "nats": {"url": "nats://10.1.2.3:4222", "prefix": "teams", "replicas": 1},
    }
    assert config["prompt_context"] == {"enabled": True, "recent_events": 8, "max_events": 16}
    assert not (root / ".teams_runtime" / "requests").exists()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        pytest.param(
            ["--nats-url", "nats://h:1"], "--nats-url needs --backend nats.", id="url-alone"
        ),
        pytest.param(
            ["--backend", "nats", "--nats-url", "h:4222"],
            "team_runtime.yaml backend.nats.url 'h:4222' is not a NATS URL",
            id="bad-url",
        ),
    ],
)
def test_init_refuses_bad_backend_flags_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    status, out, err = run_cli(capsys, "init", str(tmp_path / "host"), *argv)
    assert (status, out) == (2, "")
    assert err.startswith(f"teams-runtime: error: {message}")
    assert not (tmp_path / "host").exists()


def test_an_unreachable_server_is_one_line_naming_the_url(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "host"
    assert main(["init", str(root), "--backend", "nats", "--nats-url", "nats://127.0.0.1:9"]) == 0
    capsys.readouterr()
    for argv in (["status"], ["submit", "--role", "qa", "--scope", "x"], ["export", "req-1"]):
        status, out, err = run_cli(capsys, *argv, "--workspace", str(root))
        assert (status, out) == (2, "")
        assert err.startswith(
            "teams-runtime: error: cannot reach the NATS server at nats://127.0.0.1:9 ("
        )
        assert err.count("\n") == 1


# --- export and import --------------------------------------------------------------------------


def test_a_request_moves_file_to_nats_to_file_byte_for_byte(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], nats_server: Any, record_file: Path
) -> None:
    host = init_nats_workspace(tmp_path / "host", nats_server.settings())
    capsys.readouterr()
    status, out, _ = run_cli(capsys, "import", str(record_file), "--workspace", str(host))
    assert status == 0 and out.startswith("Imported req-1 (40 events).\n")
    status, out, _ = run_cli(capsys, "import", str(record_file), "--workspace", str(host))
    assert status == 0 and "already there, identical" in out  # running it again is harmless
    exported = tmp_path / "out" / "req-1.json"
    exported.parent.mkdir()
    assert main(["export", "req-1", "--workspace", str(host), "--out", str(exported)]) == 0
    assert exported.read_bytes() == record_file.read_bytes()
    back = tmp_path / "back"
    assert main(["init", str(back)]) == 0
    assert main(["import", str(exported), "--workspace", str(back)]) == 0
    assert (back / ".teams_runtime" / "requests" / "req-1.json").read_bytes() == (
        record_file.read_bytes()
    )
    capsys.readouterr()
    status, out, _ = run_cli(capsys, "export", "req-1", "--workspace", str(back))
    assert status == 0 and out.encode() == record_file.read_bytes()


def test_import_checks_every_file_before_writing_any(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], nats_server: Any, record_file: Path
) -> None:
    host = init_nats_workspace(tmp_path / "host", nats_server.settings())
    misnamed = record_file.with_name("req-2.json")
    misnamed.write_bytes(record_file.read_bytes())  # says request_id req-1
    capsys.readouterr()
    status, out, err = run_cli(
        capsys, "import", str(record_file), str(misnamed), "--workspace", str(host)
    )
    assert (status, out) == (2, "")
    assert f"{misnamed}: its request_id 'req-1' is not its file name" in err
    capsys.readouterr()
    status, out, _ = run_cli(capsys, "status", "--workspace", str(host))
    assert "0 requests" in out  # nothing was imported
    changed = json.loads(record_file.read_bytes())
    assert main(["import", str(record_file), "--workspace", str(host)]) == 0
    changed["status"] = "edited"
    record_file.write_bytes(encode_record(changed))
    capsys.readouterr()
    status, out, err = run_cli(capsys, "import", str(record_file), "--workspace", str(host))
    assert (status, out) == (2, "")
    assert "already in the backend with other content, not overwritten: req-1" in err


# --- every command, the same output on both backends --------------------------------------------


def test_every_command_answers_the_same_on_both_backends(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], nats_server: Any, record_file: Path
) -> None:
    file_host = tmp_path / "file-host"
    assert main(["init", str(file_host)]) == 0
    nats_host = init_nats_workspace(tmp_path / "nats-host", nats_server.settings())
    lines = tmp_path / "events.jsonl"  # timestamps given: `append` would stamp the time
    lines.write_text('{"timestamp": "T", "type": "note", "actor": "me", "summary": "hi"}\n')
    outputs: dict[Path, list[str]] = {}
    named: dict[Path, str] = {}
    for host in (file_host, nats_host):
        where = ["--workspace", str(host)]
        assert main(["import", str(record_file), *where]) == 0
        for _ in range(2):
            assert main(["append", "req-1", "--from", str(lines), "--key", "k", *where]) == 0
        capsys.readouterr()
        answers = []
        for argv in (
            ["project", "req-1"],
            ["project", "req-1", "--json", "--max-events", "20"],
            ["prompt", "req-1", "--role", "qa"],
            ["prompt", "req-1", "--role", "developer", "--json", "--disable"],
            ["explain", "req-1"],
            ["export", "req-1"],
        ):
            status, out, err = run_cli(capsys, *argv, *where)
            assert status == 0, err
            if argv[0] == "explain":  # its first line names where the record is
                named[host], out = out.split(": ", 1)
            answers.append(out)
        outputs[host] = answers
    assert outputs[nats_host] == outputs[file_host]
    assert named == {  # as docs/cli.md says: the file, or the key in the heads bucket
        file_host: str(file_host / ".teams_runtime" / "requests" / "req-1.json"),
        nats_host: f"nats:{load_team_config(nats_host).backend.nats.prefix}_records/req-1",
    }
    assert json.loads(outputs[nats_host][-1])["events"][-1]["summary"] == "hi"
    assert len(json.loads(outputs[nats_host][-1])["events"]) == 41  # the keyed append once


def test_submit_run_status_cancel_on_nats(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], nats_server: Any
) -> None:
    host = init_nats_workspace(tmp_path / "host", nats_server.settings())
    where = ["--workspace", str(host)]
    status, out, _ = run_cli(capsys, "submit", "--role", "planner", "--scope", "Add CSV export",
                             "--request-id", "req-a", *where)  # fmt: skip
    assert status == 0 and "Queued req-a for planner (new request)" in out
    run_cli(capsys, "submit", "--role", "qa", "--scope", "later", "--request-id", "req-b", *where)
    status, out, _ = run_cli(capsys, "status", "--json", *where)
    report = json.loads(out)
    assert [row["request_id"] for row in report["requests"]] == ["req-a", "req-b"]
    assert report["roles"]["planner"] == {"waiting": 1, "claimed": 0, "deferred": 0}
    status, out, _ = run_cli(capsys, "cancel", "req-b", *where)
    assert status == 0 and "dropped 1 queued envelope." in out
    status, out, _ = run_cli(capsys, "run", "--once", *where)
    assert status == 0 and "Finished 3 envelopes: 3 done, 0 failed" in out
    status, out, _ = run_cli(capsys, "status", "--json", *where)
    report = json.loads(out)
    assert {row["request_id"]: row["status"] for row in report["requests"]} == {
        "req-a": "completed",
        "req-b": "cancelled",
    }
    assert all(counts == {"waiting": 0, "claimed": 0, "deferred": 0}
               for counts in report["roles"].values())  # fmt: skip
    status, out, _ = run_cli(capsys, "metrics", "--json", *where)
    assert status == 0 and json.loads(out)["totals"]["prompts"] == 3
    assert not (host / ".teams_runtime" / "requests").exists()


# --- records of any size, ids of any script, imports cut off, busy requests ----------------------


def _with_model(host: Path, mode: str) -> Path:
    """Answer every prompt of ``host`` with ``support/fake_model.py MODE``; returns its state."""
    state = host / "model-state"
    config_path = host / "team_runtime.yaml"
    config = yaml.safe_load(config_path.read_text())
    config["model"] = {
        "backend": "command",
        "command": [sys.executable, str(FAKE_MODEL), mode, str(state)],
        "timeout_seconds": 60,
    }
    config_path.write_text(yaml.safe_dump(config, sort_keys=False))
    return state


def test_a_model_answer_of_a_megabyte_is_stored_on_nats_as_on_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], nats_server: Any
) -> None:
    # A 600,000-byte summary makes a role_report of 1.2 MB, more than a NATS message holds
    # by default: it is stored, the envelope leaves the queue, the next run calls no model.
    file_host = tmp_path / "file-host"
    assert main(["init", str(file_host)]) == 0
    reports = []
    for host in (file_host, init_nats_workspace(tmp_path / "nats-host", nats_server.settings())):
        where = ["--workspace", str(host)]
        state = _with_model(host, "long_summary:600000")
        assert (
            main(["submit", "--role", "qa", "--scope", "s", "--request-id", "req-1", *where]) == 0
        )
        capsys.readouterr()
        for _ in range(2):
            status, out, err = run_cli(capsys, "run", "--once", *where)
            assert status == 0 and "Finished" in out and "deferred" not in out, err
        assert (state / "calls-req-1-qa").read_text() == "1"
        status, out, _ = run_cli(capsys, "export", "req-1", *where)
        record = json.loads(out)
        assert record["status"] == "completed" and len(record["result"]["summary"]) == 600_000
        reports.append([event for event in record["events"] if event["type"] == "role_report"])
    assert len(reports[1]) == 1 and len(json.dumps(reports[1][0])) > 1_200_000
    assert [len(json.dumps(report)) for report in reports[1]] == [
        len(json.dumps(report)) for report in reports[0]
    ]


def test_append_and_import_of_events_larger_than_a_message_on_nats(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], nats_server: Any, record_file: Path
) -> None:
    host = init_nats_workspace(tmp_path / "host", nats_server.settings())
    where = ["--workspace", str(host)]
    big = tmp_path / "big.jsonl"
    big.write_text(json.dumps({"timestamp": "T", "type": "note", "summary": "s" * 1_100_000}))
    record = sample_record(10, "req-2")
    record["events"].append({"timestamp": "T", "type": "note", "summary": "b" * 3_000_000})
    big_record = record_file.with_name("req-2.json")
    big_record.write_bytes(encode_record(record))
    status, out, err = run_cli(capsys, "import", str(record_file), str(big_record), *where)
    assert (status, err) == (0, "") and "Imported 2 of 2 requests." in out
    status, out, err = run_cli(capsys, "append", "req-1", "--from", str(big), *where)
    assert (status, err) == (0, "") and "Appended 1 event to req-1; it now has 41 events." in out
    status, out, _ = run_cli(capsys, "export", "req-2", *where)
    assert out.encode() == big_record.read_bytes()
    status, out, _ = run_cli(capsys, "export", "req-1", *where)
    assert json.loads(out)["events"][-1]["summary"] == "s" * 1_100_000


def test_an_import_the_server_refuses_half_way_leaves_no_request_behind(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    nats_server: Any,
    record_file: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The events stream of the team holds 300 KB (an operator's limit): the second request
    # does not fit. No head without its events is left: the same import works once the limit
    # is raised, the first request left as it is.
    settings = nats_server.settings()
    host = init_nats_workspace(tmp_path / "host", settings)
    prefix = settings.prefix
    nats_server.limit_events(prefix, 300_000)
    where = ["--workspace", str(host)]
    record = sample_record(10, "req-2")
    record["events"] += [{"timestamp": "T", "type": "note", "summary": "b" * 100_000}] * 5
    big_record = record_file.with_name("req-2.json")
    big_record.write_bytes(encode_record(record))
    capsys.readouterr()
    status, out, err = run_cli(capsys, "import", str(record_file), str(big_record), *where)
    assert status == 2 and out == "Imported req-1 (40 events).\n"
    assert (
        err.startswith("teams-runtime: error: req-2 was not imported (") and "Traceback" not in err
    )
    assert (
        "maximum bytes exceeded" in err and "nothing of it was written (1 request imported" in err
    )
    status, out, _ = run_cli(capsys, "status", "--json", *where)
    assert [row["request_id"] for row in json.loads(out)["requests"]] == ["req-1"]
    nats_server.limit_events(prefix, -1)
    monkeypatch.setattr(append_writer, "ABANDONED_SECONDS", 0.2)  # the grace, shortened
    status, out, err = run_cli(capsys, "import", str(record_file), str(big_record), *where)
    assert (status, err) == (0, "")
    assert out.splitlines() == [
        "req-1 is already there, identical; left as it is.",
        "Imported req-2 (15 events).",
        "Imported 1 of 2 requests.",
    ]
    status, out, _ = run_cli(capsys, "export", "req-2", *where)
    assert out.encode() == big_record.read_bytes()


def test_a_request_id_in_any_script_on_nats(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], nats_server: Any
) -> None:
    host = init_nats_workspace(tmp_path / "host", nats_server.settings())
    where = ["--workspace", str(host)]
    nfc = "요청-1.ü"
    nfd = unicodedata.normalize("NFD", nfc)
    status, out, err = run_cli(capsys, "submit", "--role", "qa", "--scope", "s",
                               "--request-id", nfd, *where)  # fmt: skip
    assert (status, err) == (0, "") and f"Queued {nfc} for qa (new request)" in out
    status, out, _ = run_cli(capsys, "status", "--json", *where)
    assert [row["request_id"] for row in json.loads(out)["requests"]] == [nfc]
    status, out, err = run_cli(capsys, "run", "--once", *where)
    assert status == 0 and "Finished 1 envelope: 1 done, 0 failed" in out, err
    for name in (nfc, nfd):
        status, out, err = run_cli(capsys, "export", name, *where)
        assert (status, err) == (0, "") and json.loads(out)["status"] == "completed"


def test_append_on_nats_waits_for_the_stores_own_answer(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    nats_server: Any,
    nats_connect: Callable[..., NatsConnection],
    record_file: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    host = init_nats_workspace(tmp_path / "host", nats_server.settings())
    where = ["--workspace", str(host)]
    assert main(["import", str(record_file), *where]) == 0
    handles: list[Any] = []
    real_handle = ContextActor.handle

    def handle(actor: ContextActor, *args: Any, **kwargs: Any) -> Any:
        handles.append(real_handle(actor, *args, **kwargs))
        return handles[-1]

    monkeypatch.setattr(ContextActor, "handle", handle)
    note = ["--type", "note", "--actor", "me", "--summary", "s"]
    assert main(["append", "req-1", *note, *where]) == 0
    # An append may wait on other writers for 60 s, and on the server for retry_seconds (60):
    # `append` waits that long beyond the ask timeout (30 s) for its answer (it gave up at 30).
    assert [handle.write_timeout for handle in handles] == [30 + 60 + 60]
    # A writer is between publishing and committing (it holds the request): the store's own
    # message, after its window (shortened to a second here).
    prefix = yaml.safe_load((host / "team_runtime.yaml").read_text())["backend"]["nats"]["prefix"]
    connection = nats_connect(nats_server.settings(prefix=prefix))  # another writer
    subject = connection.names.event_subject("req-1", None)
    headers = {"Tr-Append": "busy"}
    connection.call(lambda: connection.js.publish(subject, b"{}", headers=headers))
    monkeypatch.setattr(append_writer, "APPEND_SECONDS", 1.0)
    capsys.readouterr()
    status, out, err = run_cli(capsys, "append", "req-1", *note, *where)
    assert (status, out) == (2, "")
    assert err == (
        f"teams-runtime: error: nats:{prefix}_records/req-1: other writers kept the request "
        "busy for 1 s; nothing was appended (retry).\n"
    )


def test_project_on_nats_reads_the_head_and_the_events_it_selects(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    nats_server: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # `project` reads a request's head and the events its projection selects, never the whole
    # history (only export, explain and compaction off do): the same output as on files.
    record_path = tmp_path / "req-1.json"
    record_path.write_bytes(encode_record(sample_record(300, "req-1")))
    file_host = tmp_path / "file-host"
    assert main(["init", str(file_host)]) == 0
    nats_host = init_nats_workspace(tmp_path / "nats-host", nats_server.settings())
    outputs: dict[Path, list[str]] = {}
    for host in (file_host, nats_host):
        where = ["--workspace", str(host)]
        assert main(["import", str(record_path), *where]) == 0
        if host == nats_host:

            async def whole_history(*args: Any) -> Any:
                raise AssertionError("project read the whole history")

            monkeypatch.setattr(RecordReader, "history", whole_history)
        capsys.readouterr()
        answers = []
        for argv in (
            ["project", "req-1"],
            ["project", "req-1", "--json", "--max-events", "20"],
            ["project", "req-1", "--recent-events", "2", "--max-events", "3"],
        ):
            status, out, err = run_cli(capsys, *argv, *where)
            assert status == 0, err
            answers.append(out)
        outputs[host] = answers
    assert outputs[nats_host] == outputs[file_host]
    assert json.loads(outputs[nats_host][1])["total_events"] == 300


def test_a_worker_with_another_lease_says_so_when_its_team_starts(
    tmp_path: Path, nats_server: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """The team's queue keeps the ack wait it was made with; a worker configured otherwise
    says so in its log when it starts (it was logged before logging was set up, so never
    shown: found by an outside attack)."""
    first = init_nats_workspace(tmp_path / "host-1", nats_server.settings())
    config = first / "team_runtime.yaml"
    config.write_text(config.read_text() + "queue:\n  lease_seconds: 30\n")
    assert run_cli(capsys, "status", "--workspace", str(first))[0] == 0  # makes the queue: 30 s
    config.write_text(config.read_text().replace("lease_seconds: 30", "lease_seconds: 3"))
    status, _, err = run_cli(capsys, "run", "--once", "--plain", "--workspace", str(first))
    assert status == 0
    assert (
        "queue.lease_seconds is 3 here, but the team's queue was created with an ack wait of "
        "30 s: this worker uses 30 s (renewing every 10 s)" in err
    )


def test_writes_the_server_refuses_through_the_actor_are_one_line_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], nats_server: Any, record_file: Path
) -> None:
    # The events stream is full (an operator's limit): an append, a submit and a cancel go
    # through the ContextActor, whose answer must stay the store's own one-line error.
    settings = nats_server.settings()
    host = init_nats_workspace(tmp_path / "host", settings)
    where = ["--workspace", str(host)]
    assert main(["import", str(record_file), *where]) == 0
    nats_server.limit_events(settings.prefix, 1)
    note = ["--type", "note", "--actor", "me", "--summary", "s"]
    for argv in (
        ["append", "req-1", *note],
        ["submit", "--role", "qa", "--scope", "x", "--request-id", "req-9"],
        ["cancel", "req-1"],
    ):
        capsys.readouterr()
        status, out, err = run_cli(capsys, *argv, *where)
        assert (status, out) == (2, ""), argv
        assert err.startswith("teams-runtime: error: ") and "the NATS server at " in err
        assert "Traceback" not in err and err.count("\n") == 1, err
