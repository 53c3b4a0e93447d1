"""``teams-runtime status`` says why each failed request failed: a line naming the reason (from
its failing event) and the command to retry it, and the same in ``--json``'s ``failure``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from teams_runtime.cli import main
from teams_runtime.codecs.events import event_json
from teams_runtime.codecs.request_records import encode_record
from teams_runtime.demo import sample_record
from teams_runtime.policy.events import answer_timed_out, hop_limit, model_failed

from ..support.cli_in_process import run_cli

NOW = "2026-12-01T10:00:00+00:00"


def _role_failed(role: str, summary: str, error: str = "") -> dict[str, Any]:
    result = {"request_id": "req-1", "role": role, "status": "failed", "summary": summary}
    if error:
        result["error"] = error
    return {"type": "role_report", "timestamp": NOW, "actor": role, "summary": summary,
            "payload": result}  # fmt: skip


def _note() -> dict[str, Any]:
    """An event a person may add to a failed request after its failing one."""
    return {"type": "delegated", "timestamp": NOW, "actor": "user", "summary": "a note",
            "payload": {"from_role": "user", "to_role": "qa"}}  # fmt: skip


CASES = [
    pytest.param(
        [event_json(model_failed(NOW, "qa", "model command exited with status 1"))],
        {"event": "model_failed", "role": "qa",
         "reason": "every call of qa's model failed: model command exited with status 1"},
        id="model-failed",
    ),
    pytest.param(
        [_role_failed("reviewer", "The draft cites no source.\nIt cannot go out.", "no source")],
        {"event": "role_report", "role": "reviewer",
         "reason": "reviewer reported failed: The draft cites no source. It cannot go out. "
                   "(no source)"},
        id="role-reported-failed",
    ),
    pytest.param(
        [_role_failed("writer", "The writer result was rejected by contract validation after "
                      "2 repair attempts.", "contract_validation_failed")
         | {"payload": {"request_id": "req-1", "role": "writer", "status": "failed",
                        "summary": "rejected", "error": "contract_validation_failed",
                        "contract_issues": ["`summary` is missing or empty.", "`status` ..."]}}],
        {"event": "role_report", "role": "writer",
         "reason": "the contract rejected writer's answer and each repair of it: `summary` is "
                   "missing or empty. (and 1 more); the answers are in .teams_runtime/attempts/"},
        id="contract-rejected",
    ),
    pytest.param(
        [event_json(answer_timed_out(NOW, "editor", 1800.0))],
        {"event": "answer_timed_out", "role": "editor",
         "reason": "editor gave no answer within 1800 s"},
        id="answer-timed-out",
    ),
    pytest.param(
        [event_json(hop_limit(NOW, "qa", "developer", hops=40, max_hops=40)), _note()],
        {"event": "hop_limit", "role": "qa",
         "reason": "the hand-off qa -> developer would pass team.max_hops (40)"},
        id="hop-limit-then-a-note",
    ),
]  # fmt: skip


@pytest.mark.parametrize(("events", "failure"), CASES)
def test_status_names_why_a_failed_request_failed(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    events: list[dict[str, Any]],
    failure: dict[str, Any],
) -> None:
    root = tmp_path / "ws"
    assert main(["init", str(root)]) == 0
    capsys.readouterr()
    record = sample_record(3, "req-1")
    record.update(status="failed", current_role=failure["role"], hops=3)
    record["events"] = [*record["events"], *events]
    (root / ".teams_runtime" / "requests" / "req-1.json").write_bytes(encode_record(record))
    status, out, err = run_cli(capsys, "status", "--json", "--workspace", str(root))
    assert status == 0, err
    (row,) = json.loads(out)["requests"]
    assert row["failure"] == failure
    status, text, err = run_cli(capsys, "status", "--workspace", str(root))
    assert status == 0, err
    line = f"failed req-1 ({failure['role']}): {failure['reason']}; `teams-runtime retry req-1` "
    assert line + "queues its last step again" in text.splitlines()


def test_a_request_that_did_not_fail_has_no_failure(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "ws"
    assert main(["init", str(root)]) == 0
    capsys.readouterr()
    record = sample_record(3, "req-1")
    (root / ".teams_runtime" / "requests" / "req-1.json").write_bytes(encode_record(record))
    status, out, err = run_cli(capsys, "status", "--json", "--workspace", str(root))
    assert status == 0, err
    (row,) = json.loads(out)["requests"]
    assert (row["status"], row["failure"]) == ("in_progress", None)


def test_a_prompt_that_cannot_fit_is_said_so_with_what_a_retry_needs_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "ws"
    assert main(["init", str(root)]) == 0
    capsys.readouterr()
    record = sample_record(3, "req-1")
    record.update(status="failed", current_role="qa", hops=3)
    reason = "the prompt cannot fit its budget of 300 tokens (prompt_context.max_prompt_tokens)"
    failed = model_failed(NOW, "qa", reason, cause="prompt_too_large")
    record["events"] = [*record["events"], event_json(failed)]
    (root / ".teams_runtime" / "requests" / "req-1.json").write_bytes(encode_record(record))
    status, out, _ = run_cli(capsys, "status", "--json", "--workspace", str(root))
    (row,) = json.loads(out)["requests"]
    assert row["failure"] == {
        "event": "model_failed",
        "role": "qa",
        "reason": f"qa's prompt does not fit: {reason}",
        "cause": "prompt_too_large",
    }  # no model was called: not "every call of qa's model failed"
    for argv in (("status",), ("status", "req-1")):
        status, text, _ = run_cli(capsys, *argv, "--workspace", str(root))
        assert status == 0
        assert (
            "make the prompt fit first, as its reason says; then `teams-runtime retry req-1` "
            "queues its last step again"
        ) in text
