"""``teams-runtime retry``: a failed request's last step queued again (a ``retried`` event, the
request in progress again, the same work under a new envelope id), and rejected envelopes put
back in their queues once their cause is fixed. ``status`` lists both with the command to use.
On both backends, with real model processes."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml

from teams_runtime import RequestStateError
from teams_runtime.actors.context import open_context
from teams_runtime.actors.intake._retry import retry_failed, retry_with
from teams_runtime.cli import main
from teams_runtime.codecs.envelopes import MessageEnvelope
from teams_runtime.codecs.request_records import encode_record
from teams_runtime.demo import sample_record
from teams_runtime.storage import Workspace
from teams_runtime.storage.opening import blocking_storage, open_storage, workspace_config

from ...support.cli_in_process import init_nats_workspace, run_cli
from ...support.paths import FAKE_MODEL


@pytest.fixture(params=["file", "nats"])
def host(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Path]:
    """A workspace on the file storage, or on a real NATS server (a team of its own)."""
    root = tmp_path / "host"
    if request.param == "nats":
        init_nats_workspace(root, request.getfixturevalue("nats_server").settings())
    else:
        assert main(["init", str(root)]) == 0
    yield root


def _model(root: Path, mode: str, **sections: Any) -> None:
    """Answer every prompt of ``root`` with ``support/fake_model.py MODE``, one call each."""
    path = root / "team_runtime.yaml"
    config = yaml.safe_load(path.read_text())
    config["model"] = {
        "backend": "command",
        "command": [sys.executable, str(FAKE_MODEL), mode, str(root / "model-state")],
        "timeout_seconds": 60,
        "attempts": 1,
        "on_failure": "fail",
    }
    config.update(sections)
    path.write_text(yaml.safe_dump(config, sort_keys=False))


def _cli(capsys: pytest.CaptureFixture[str], root: Path, *argv: str) -> tuple[int, str, str]:
    return run_cli(capsys, *argv, "--workspace", str(root))


def _record(capsys: pytest.CaptureFixture[str], root: Path, request_id: str) -> dict[str, Any]:
    status, out, err = _cli(capsys, root, "export", request_id)
    assert status == 0, err
    record: dict[str, Any] = json.loads(out)
    return record


def _status(capsys: pytest.CaptureFixture[str], root: Path) -> tuple[dict[str, Any], str]:
    status, out, _ = _cli(capsys, root, "status", "--json")
    assert status == 0
    report: dict[str, Any] = json.loads(out)
    status, text, _ = _cli(capsys, root, "status")
    assert status == 0
    return report, text


def test_a_failed_request_is_retried_and_completes(
    host: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _model(host, "exit_1")
    submit = ["submit", "--role", "qa", "--scope", "Check the export", "--body", "CSV only"]
    assert _cli(capsys, host, *submit, "--request-id", "req-1")[0] == 0
    status, out, _ = _cli(capsys, host, "run", "--once", "--plain")
    assert "0 done, 1 failed" in out
    failed = _record(capsys, host, "req-1")
    assert failed["status"] == "failed"
    kept = failed["failed_envelope"]  # the envelope whose step failed, for retry
    assert (kept["target"], kept["scope"], kept["body"]) == ("qa", "Check the export", "CSV only")
    _, text = _status(capsys, host)
    assert (
        "failed req-1 (qa): every call of qa's model failed: the model command exited with "
        "status 1 (15 bytes on stderr); `teams-runtime retry req-1` queues its last step again"
    ) in text

    _model(host, "valid")  # the model is fixed
    status, out, err = _cli(capsys, host, "retry", "req-1", "--json")
    assert status == 0, err
    retried = json.loads(out)
    assert (retried["request_id"], retried["role"]) == ("req-1", "qa")
    assert retried["envelope_id"] != kept["envelope_id"]  # the old one's outcome is recorded
    record = _record(capsys, host, "req-1")
    assert (record["status"], record["current_role"], record["failed_envelope"]) == (
        "in_progress",
        "qa",
        None,
    )
    event = record["events"][-1]
    assert (event["type"], event["payload"]["retries_envelope"]) == ("retried", kept["envelope_id"])
    report, text = _status(capsys, host)
    assert report["roles"]["qa"]["waiting"] == 1 and "failed req-1" not in text

    status, out, _ = _cli(capsys, host, "run", "--once", "--plain")
    assert out.startswith("Finished 1 envelope: 1 done, 0 failed")
    assert _record(capsys, host, "req-1")["status"] == "completed"
    status, out, err = _cli(capsys, host, "retry", "req-1")
    assert (status, out) == (2, "")
    assert err == (
        "teams-runtime: error: request req-1 is completed, not failed: only a failed request is "
        "retried (`teams-runtime submit --reopen` gives a finished one more work).\n"
    )


def test_a_rejected_envelope_goes_back_once_its_cause_is_fixed(
    host: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _model(host, "valid")
    with blocking_storage(Workspace(host)) as storage:  # work for a request with no record yet
        storage.queue.put(MessageEnvelope(request_id="req-9", sender="user", target="qa"))
    status, out, _ = _cli(capsys, host, "run", "--once", "--plain")
    assert "0 done, 0 failed, 1 rejected" in out
    report, text = _status(capsys, host)
    (rejected,) = report["rejected"]
    assert (rejected["role"], rejected["request_id"]) == ("qa", "req-9")
    assert "no request 'req-9'" in rejected["reason"]
    assert "rejected qa:req-9 (" in text
    assert "fix the cause, then `teams-runtime retry --rejected req-9` puts it back" in text

    record = tmp_path / "req-9.json"  # the cause: the record was missing; restore it
    record.write_bytes(encode_record(sample_record(3, "req-9")))
    assert _cli(capsys, host, "import", str(record))[0] == 0
    status, out, _ = _cli(capsys, host, "retry", "--rejected", "req-9")
    assert (status, out) == (
        0,
        "Put 1 rejected envelope back in the queue; run `teams-runtime run --once` (one still "
        "unusable is set aside again).\n",
    )
    report, text = _status(capsys, host)
    assert report["rejected"] == [] and report["roles"]["qa"]["waiting"] == 1
    status, out, _ = _cli(capsys, host, "run", "--once", "--plain")
    assert out.startswith("Finished 1 envelope: 1 done, 0 failed, 0 rejected")
    status, out, _ = _cli(capsys, host, "retry", "--rejected", "--json")
    assert json.loads(out) == {"request_id": None, "requeued": 0}


def test_two_retries_at_once_queue_the_step_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "host"
    assert main(["init", str(root)]) == 0
    _model(root, "exit_1")
    assert main(["submit", "--role", "qa", "--scope", "s", "--request-id", "req-1",
                 "--workspace", str(root)]) == 0  # fmt: skip
    assert main(["run", "--once", "--plain", "--workspace", str(root)]) == 0
    outcomes: list[str] = []

    async def retry() -> None:
        try:
            retried = await retry_failed(root, "req-1", max_hops=40)
            outcomes.append("resumed" if retried.resumed else "queued")
        except RequestStateError:
            outcomes.append("refused")

    async def both() -> None:
        async with anyio.create_task_group() as group:
            group.start_soon(retry)
            group.start_soon(retry)

    anyio.run(both)
    # The second is refused by the first's write, or, reading after it, makes sure of its put.
    assert sorted(outcomes) in (["queued", "refused"], ["queued", "resumed"])
    capsys.readouterr()
    report, _ = _status(capsys, root)
    assert report["roles"]["qa"]["waiting"] == 1
    assert [e["type"] for e in _record(capsys, root, "req-1")["events"]].count("retried") == 1


def test_a_request_failed_at_the_hop_limit_is_retried_once_the_limit_is_raised(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "host"
    assert main(["init", str(root)]) == 0
    _model(root, "valid", team={"max_hops": 1})  # planner -> developer -> (stop) ...
    assert main(["submit", "--role", "planner", "--scope", "s", "--request-id", "req-1",
                 "--workspace", str(root)]) == 0  # fmt: skip
    assert main(["run", "--once", "--plain", "--workspace", str(root)]) == 0
    capsys.readouterr()
    assert _record(capsys, root, "req-1")["status"] == "failed"
    status, out, _ = _cli(capsys, root, "status")  # its hint says to raise the limit first
    assert (
        "failed req-1 (developer) at the hop limit (1 hand-off, team.max_hops 1): raise "
        "team.max_hops in team_runtime.yaml, then `teams-runtime retry req-1` queues its last "
        "step again"
    ) in out
    status, _, err = _cli(capsys, root, "retry", "req-1")
    assert status == 2
    assert "team.max_hops is 1: a retry would stop at the hop limit again; raise" in err
    _model(root, "valid", team={"max_hops": 10})
    status, out, _ = _cli(capsys, root, "retry", "req-1")
    assert status == 0 and out.startswith("Queued req-1 for developer again")
    assert _cli(capsys, root, "run", "--once", "--plain")[0] == 0
    assert _record(capsys, root, "req-1")["status"] == "completed"


def test_a_request_that_failed_before_envelopes_were_kept_is_retried_from_its_fields(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "host"
    assert main(["init", str(root)]) == 0
    _model(root, "valid")
    old = sample_record(4, "req-1") | {"status": "failed", "current_role": "qa", "scope": "Old"}
    path = tmp_path / "req-1.json"
    path.write_bytes(encode_record(old))
    assert main(["import", str(path), "--workspace", str(root)]) == 0
    capsys.readouterr()
    status, out, _ = _cli(capsys, root, "retry", "req-1")
    assert status == 0 and out.startswith("Queued req-1 for qa again")
    (queued,) = (root / ".teams_runtime" / "queue" / "qa").iterdir()
    envelope = json.loads(queued.read_text())
    assert (envelope["target"], envelope["scope"], envelope["sender"]) == ("qa", "Old", "user")


def test_retry_needs_a_request_id_unless_putting_rejected_back(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "host"
    assert main(["init", str(root)]) == 0
    capsys.readouterr()
    status, out, err = _cli(capsys, root, "retry")
    assert (status, out) == (2, "")
    assert err.startswith("teams-runtime: error: retry needs the REQUEST_ID of a failed request")
    status, out, err = _cli(capsys, root, "retry", "nope")
    assert status == 2 and "no request 'nope'" in err


@pytest.mark.parametrize("storage", ["file", "nats"])
def test_a_retry_whose_role_left_the_team_is_refused_before_anything_is_written(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    request: pytest.FixtureRequest,
    storage: str,
) -> None:
    root = tmp_path / "ws"
    if storage == "nats":
        init_nats_workspace(root, request.getfixturevalue("nats_server").settings())
    else:
        assert run_cli(capsys, "init", str(root))[0] == 0
    config = root / "team_runtime.yaml"
    text = config.read_text()
    failing = "roles:\n  qa:\n    model: {backend: command, command: [/bin/false], attempts: 1}\n"
    config.write_text(text + failing)
    ws = ("--workspace", str(root))
    run_cli(capsys, "submit", "--role", "qa", "--scope", "x", "--request-id", "r1", *ws)
    assert run_cli(capsys, "run", "--once", "--plain", *ws)[0] == 0
    # qa leaves the team (and the dry run's route) before the retry.
    roles = "orchestrator, research, planner, designer, architect, developer, version_controller"
    config.write_text(
        text.replace("route: [planner, developer, qa]", "route: [planner, developer]")
        + f"team:\n  roles: [{roles}]\n"
    )
    before = run_cli(capsys, "export", "r1", *ws)[1]
    status, _, err = run_cli(capsys, "retry", "r1", *ws)
    assert status == 2 and "Traceback" not in err
    assert f"failed at role 'qa', which the team no longer has (its roles: {roles})" in err
    assert run_cli(capsys, "export", "r1", *ws)[1] == before  # nothing written: still failed


class _Stopped(BaseException):
    """The retry's process dying between its write and its queue put."""


def test_a_retry_stopped_before_its_queue_put_is_finished_by_the_next_retry(
    host: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _model(host, "exit_1")
    assert (
        _cli(capsys, host, "submit", "--role", "qa", "--scope", "s", "--request-id", "req-1")[0]
        == 0
    )
    _cli(capsys, host, "run", "--once", "--plain")
    _model(host, "valid")

    async def stopped_retry() -> None:
        config = workspace_config(Workspace(host))
        async with (
            open_storage(Workspace(host), config) as storage,
            open_context(host, store=storage.store) as context,
        ):

            class Dies:
                async def put(self, envelope: MessageEnvelope) -> str:
                    raise _Stopped

            with pytest.raises(_Stopped):
                await retry_with(context, Dies(), "req-1", max_hops=40)  # type: ignore[arg-type]

    anyio.run(stopped_retry)
    record = _record(capsys, host, "req-1")
    assert (record["status"], record["events"][-1]["type"]) == ("in_progress", "retried")
    report, _ = _status(capsys, host)
    assert report["roles"]["qa"]["waiting"] == 0  # in progress, nothing queued: stuck before
    status, out, err = _cli(capsys, host, "retry", "req-1")
    assert status == 0, err
    assert out.startswith("req-1 was retried already: its qa step is queued")
    assert _cli(capsys, host, "retry", "req-1")[0] == 0  # again: still one envelope
    report, _ = _status(capsys, host)
    assert report["roles"]["qa"]["waiting"] == 1
    _, out, _ = _cli(capsys, host, "run", "--once", "--plain")
    assert out.startswith("Finished 1 envelope: 1 done, 0 failed")
    assert _record(capsys, host, "req-1")["status"] == "completed"
    status, _, err = _cli(capsys, host, "retry", "req-1")
    assert status == 2 and "is completed, not failed" in err
