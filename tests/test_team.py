from __future__ import annotations

import json
import sys
from itertools import pairwise
from pathlib import Path
from typing import Any

import anyio
import pytest
from loguru import logger

from teams_runtime import PromptContextConfig
from teams_runtime.actors.storage import FileWorkQueue, Workspace, load_team_config
from teams_runtime.actors.storage.record_files import create_record
from teams_runtime.actors.team import RunSummary, Team
from teams_runtime.codecs.messages import MessageEnvelope
from teams_runtime.codecs.roles import ROLES
from teams_runtime.demo import sample_record
from teams_runtime.monitoring import PROMPT_LOG_NAME, configure_logging, stop_logging

pytestmark = pytest.mark.anyio

FAKE_MODEL = Path(__file__).with_name("fake_model.py")


def _workspace(
    root: Path, mode: str = "valid", *, extra: str = "", prompt_context: str = ""
) -> Workspace:
    command = json.dumps([sys.executable, str(FAKE_MODEL), mode, str(root / "model-state")])
    root.mkdir(parents=True, exist_ok=True)
    (root / "team_runtime.yaml").write_text(
        f"prompt_context: {{{prompt_context}}}\n"
        f"model:\n  backend: command\n  command: {command}\n  timeout_seconds: 10\n{extra}"
    )
    return Workspace(root)


def _seed(workspace: Workspace, request_id: str, role: str, events: int = 30) -> None:
    create_record(workspace.record_paths(request_id), sample_record(events, request_id))
    FileWorkQueue(workspace).put(
        MessageEnvelope(request_id=request_id, sender="user", target=role, scope="do it")
    )


def _record(workspace: Workspace, request_id: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(workspace.request_path(request_id).read_bytes())
    return data


async def _run_once(workspace: Workspace, **kwargs: Any) -> RunSummary:
    with anyio.fail_after(60):
        return await Team(workspace.root, keep_prompt_records=True, **kwargs).run(once=True)


async def test_every_role_gets_the_same_prompt_context(tmp_path: Path) -> None:
    workspace = _workspace(tmp_path, prompt_context="recent_events: 3, max_events: 5")
    team = Team(workspace.root)
    async with anyio.create_task_group() as group:
        await group.start(lambda task_status: team.run(once=False, task_status=task_status))
        assert set(team.roles) == set(ROLES)
        configs = {id(actor.prompt_context) for actor in team.roles.values()}
        assert configs == {id(team.config.prompt_context)}
        assert team.config.prompt_context == PromptContextConfig(recent_events=3, max_events=5)
        group.cancel_scope.cancel()


async def test_a_request_travels_the_route_and_completes(tmp_path: Path) -> None:
    workspace = _workspace(tmp_path)
    _seed(workspace, "req-1", "planner")
    summary = await _run_once(workspace)
    assert (summary.handled, summary.failed) == (4, 0)
    record = _record(workspace, "req-1")
    assert record["status"] == "completed"
    assert record["current_role"] == "qa"
    assert record["result"]["role"] == "qa"
    new = record["events"][30:]
    assert [(e["type"], e["actor"]) for e in new] == [
        ("role_report", "planner"),
        ("delegated", "planner"),
        ("role_report", "developer"),
        ("version_control_requested", "developer"),
        ("version_control_completed", "version_controller"),
        ("delegated", "version_controller"),
        ("role_report", "qa"),
    ]
    assert new[0]["payload"]["summary"] == "planner did its part"
    assert new[4]["payload"]["commit_status"] == "no_changes"
    assert record["version_control"]["requested_by"] == "developer"
    assert sum(FileWorkQueue(workspace).counts().values()) == 0
    assert [r.purpose for r in summary.prompts] == [
        "role_task",
        "role_task",
        "version_control",
        "role_task",
    ]
    assert all(r.compacted and r.included_events <= 16 for r in summary.prompts)
    assert summary.prompts_sent == 4


async def test_research_and_version_control_kinds(tmp_path: Path) -> None:
    workspace = _workspace(tmp_path)
    _seed(workspace, "req-r", "research")
    _seed(workspace, "req-v", "developer")
    summary = await _run_once(workspace)
    purposes = {(r.request_id, r.purpose) for r in summary.prompts}
    assert ("req-r", "research_decision") in purposes
    research = _record(workspace, "req-r")
    gate = research["result"]["proposals"]["research_decision"]
    assert gate == {"needed": False, "subject": "", "research_query": "", "reason_code": "enough"}
    assert research["status"] == "completed"


async def test_invalid_result_is_repaired(tmp_path: Path) -> None:
    workspace = _workspace(tmp_path, "invalid_once")
    _seed(workspace, "req-1", "qa")
    summary = await _run_once(workspace)
    assert [r.purpose for r in summary.prompts] == ["role_task", "contract_repair"]
    record = _record(workspace, "req-1")
    assert record["status"] == "completed"
    assert record["result"]["summary"] == "qa did its part"


async def test_not_json_answer_gets_a_repair_prompt(tmp_path: Path) -> None:
    workspace = _workspace(tmp_path, "not_json_once")
    _seed(workspace, "req-1", "qa")
    summary = await _run_once(workspace)
    assert [r.purpose for r in summary.prompts] == ["role_task", "contract_repair"]
    assert _record(workspace, "req-1")["status"] == "completed"


async def test_at_most_two_repairs_then_failed_with_contract_issues(tmp_path: Path) -> None:
    workspace = _workspace(tmp_path, "always_invalid")
    _seed(workspace, "req-1", "qa")
    summary = await _run_once(workspace)
    assert [r.purpose for r in summary.prompts] == ["role_task"] + ["contract_repair"] * 2
    record = _record(workspace, "req-1")
    assert record["status"] == "failed"
    issues = record["result"]["contract_issues"]
    assert "`summary` is missing or empty." in issues
    assert record["events"][-1]["type"] == "role_report"
    assert sum(FileWorkQueue(workspace).counts().values()) == 0


@pytest.mark.parametrize(
    ("mode", "reason"),
    [
        pytest.param("exit_1", "exited with status 1", id="non-zero-exit"),
        pytest.param("empty", "printed nothing", id="empty-output"),
        pytest.param("garbage", "not UTF-8", id="not-utf8"),
        pytest.param("huge", "more than 1000000 bytes", id="huge-output"),
    ],
)
async def test_model_failures_fail_the_request_with_a_reason(
    tmp_path: Path, mode: str, reason: str
) -> None:
    workspace = _workspace(tmp_path, mode, extra="  max_output_bytes: 1000000\n")
    _seed(workspace, "req-1", "qa")
    _seed(workspace, "req-2", "planner")
    summary = await _run_once(workspace)
    assert summary.failed == 2
    record = _record(workspace, "req-1")
    assert record["status"] == "failed"
    failure = record["events"][-1]
    assert failure["type"] == "model_failed" and reason in failure["payload"]["reason"]
    assert len(summary.prompts) == 4  # two attempts per request (model.attempts: 2)


async def test_timeout_kills_the_model_and_requeue_keeps_the_envelope(tmp_path: Path) -> None:
    workspace = _workspace(tmp_path, "sleep", extra="  attempts: 1\n  on_failure: requeue\n")
    text = (
        (tmp_path / "team_runtime.yaml")
        .read_text()
        .replace("timeout_seconds: 10", "timeout_seconds: 0.5")
    )
    (tmp_path / "team_runtime.yaml").write_text(text)
    _seed(workspace, "req-1", "qa")
    before = _record(workspace, "req-1")
    summary = await _run_once(workspace)
    assert summary.deferred == 1
    assert sum(FileWorkQueue(workspace).counts().values()) == 1  # kept for the next run
    assert _record(workspace, "req-1") == before  # nothing recorded as done


async def test_one_role_at_a_time_per_request_and_requests_in_parallel(tmp_path: Path) -> None:
    workspace = _workspace(tmp_path, "slow_valid")
    for n in range(3):
        _seed(workspace, f"req-{n}", "planner")
        FileWorkQueue(workspace).put(  # a second envelope for the same request, another role
            MessageEnvelope(request_id=f"req-{n}", sender="user", target="qa", scope="check")
        )
    await _run_once(workspace)
    log = (tmp_path / "model-state" / "calls.log").read_text()
    calls = [json.loads(line) for line in log.splitlines()]
    by_request: dict[str, list[dict[str, Any]]] = {}
    for call in calls:
        by_request.setdefault(call["request_id"], []).append(call)
    for request_calls in by_request.values():
        spans = sorted((c["start"], c["end"]) for c in request_calls)
        assert all(earlier[1] <= later[0] for earlier, later in pairwise(spans))
    spans = sorted((c["start"], c["end"]) for c in calls)
    overlapping = any(a[1] > b[0] for a, b in pairwise(spans))
    assert overlapping  # different requests did run at the same time


async def test_bad_envelopes_are_set_aside_not_lost(tmp_path: Path) -> None:
    workspace = _workspace(tmp_path)
    folder = workspace.role_queue("qa")
    folder.mkdir(parents=True)
    (folder / "0001-bad.json").write_text("{not json")
    (folder / "0002-bad.json").write_text('{"request_id": "x"}')
    _seed(workspace, "req-1", "qa")
    summary = await _run_once(workspace)
    assert (summary.rejected, summary.handled) == (2, 1)
    rejected = sorted(p.name for p in (workspace.queue_dir / "rejected").iterdir())
    assert rejected == [
        "qa-0001-bad.json",
        "qa-0001-bad.json.reason",
        "qa-0002-bad.json",
        "qa-0002-bad.json.reason",
    ]


async def test_compaction_is_logged_in_the_role_log(tmp_path: Path) -> None:
    workspace = _workspace(tmp_path)
    _seed(workspace, "req-1", "qa", events=40)
    configure_logging(workspace, console_level="ERROR")
    try:
        await _run_once(workspace)
    finally:
        stop_logging()
        logger.disable("teams_runtime")
    lines = (workspace.logs_dir / "qa.log").read_text().splitlines()
    compacted = [line for line in lines if "prompt_context_compacted" in line]
    assert len(compacted) == 1
    assert compacted[0].endswith(
        "[qa] prompt_context_compacted request_id=req-1 purpose=role_task total_events=40 "
        "included_events=12 omitted_events=28 recent_events=8 max_events=16"
    )
    text = (workspace.logs_dir / PROMPT_LOG_NAME).read_text()
    records = [json.loads(line) for line in text.splitlines()]
    assert [(r["role"], r["omitted_events"], r["eligible"]) for r in records] == [("qa", 28, True)]


def test_config_is_read_once_at_start(tmp_path: Path) -> None:
    workspace = _workspace(tmp_path, prompt_context="max_events: 20")
    team = Team(workspace.root)
    (tmp_path / "team_runtime.yaml").write_text("prompt_context: {max_events: 30}\n")
    assert team.config.prompt_context.max_events == 20
    assert load_team_config(tmp_path).prompt_context.max_events == 30  # a restart would see it


async def test_an_outcome_that_cannot_be_saved_keeps_its_envelope(tmp_path: Path) -> None:
    workspace = _workspace(tmp_path)
    path = workspace.request_path("req-odd")
    path.parent.mkdir(parents=True)
    path.write_text('{"request_id": "req-odd", "events": "not a list"}')
    FileWorkQueue(workspace).put(
        MessageEnvelope(request_id="req-odd", sender="user", target="qa", scope="x")
    )
    _seed(workspace, "req-1", "qa")
    summary = await _run_once(workspace)
    assert (summary.handled, summary.deferred) == (1, 1)  # the other request was served
    claims = FileWorkQueue(workspace).claim("qa", 100)
    assert [claim.envelope.request_id for claim in claims if claim.envelope] == ["req-odd"]
    assert path.read_text() == '{"request_id": "req-odd", "events": "not a list"}'


async def test_a_record_naming_another_id_is_still_worked_on_as_its_file(tmp_path: Path) -> None:
    workspace = _workspace(tmp_path)
    _seed(workspace, "req-1", "qa")
    path = workspace.request_path("req-1")
    record = json.loads(path.read_bytes())
    del record["request_id"]  # an old record without its id
    path.write_text(json.dumps(record, indent=2))
    summary = await _run_once(workspace)
    assert (summary.handled, summary.failed) == (1, 0)
    assert [r.request_id for r in summary.prompts] == ["req-1"]
    assert _record(workspace, "req-1")["status"] == "completed"
