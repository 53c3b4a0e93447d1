"""One role's handling of an envelope: prompt kinds, contract repairs, model failures, envelopes
that are bad or cannot be saved. Run through the Team, with a real model CLI."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from teams_runtime.actors.team._team import RunSummary
from teams_runtime.codecs.envelopes import MessageEnvelope
from teams_runtime.codecs.model import RoleResult
from teams_runtime.exceptions import StorageError
from teams_runtime.policy.outcomes import plan_outcome
from teams_runtime.storage import FileRecordStore, FileWorkQueue, Workspace
from teams_runtime.storage.files.file_store import create_record
from teams_runtime.storage.files.threaded import ThreadedRecordStore

pytestmark = pytest.mark.anyio

RunOnce = Callable[..., Awaitable[RunSummary]]
ReadRecord = Callable[[Workspace, str], dict[str, Any]]


async def test_research_and_version_control_kinds(
    team_workspace: Callable[..., Workspace],
    seed: Callable[..., None],
    run_once: RunOnce,
    read_record: ReadRecord,
) -> None:
    workspace = team_workspace()
    seed(workspace, "req-r", "research")
    seed(workspace, "req-v", "developer")
    summary = await run_once(workspace)
    purposes = {(r.request_id, r.purpose) for r in summary.prompts}
    assert ("req-r", "research_decision") in purposes
    assert ("req-v", "version_control") in purposes
    research = read_record(workspace, "req-r")
    gate = research["result"]["proposals"]["research_decision"]
    assert gate == {"needed": False, "subject": "", "research_query": "", "reason_code": "enough"}
    assert research["status"] == "completed"
    version_control = read_record(workspace, "req-v")
    commits = [e for e in version_control["events"] if e["type"] == "version_control_completed"]
    assert [e["payload"]["commit_status"] for e in commits] == ["no_changes"]


async def test_invalid_result_is_repaired(
    team_workspace: Callable[..., Workspace],
    seed: Callable[..., None],
    run_once: RunOnce,
    read_record: ReadRecord,
) -> None:
    workspace = team_workspace("invalid_once")
    seed(workspace, "req-1", "qa")
    summary = await run_once(workspace)
    assert [r.purpose for r in summary.prompts] == ["role_task", "contract_repair"]
    record = read_record(workspace, "req-1")
    assert record["status"] == "completed"
    assert record["result"]["summary"] == "qa did its part"


async def test_not_json_answer_gets_a_repair_prompt(
    team_workspace: Callable[..., Workspace],
    seed: Callable[..., None],
    run_once: RunOnce,
    read_record: ReadRecord,
) -> None:
    workspace = team_workspace("not_json_once")
    seed(workspace, "req-1", "qa")
    summary = await run_once(workspace)
    assert [r.purpose for r in summary.prompts] == ["role_task", "contract_repair"]
    assert read_record(workspace, "req-1")["status"] == "completed"


async def test_at_most_two_repairs_then_failed_with_contract_issues(
    team_workspace: Callable[..., Workspace],
    seed: Callable[..., None],
    run_once: RunOnce,
    read_record: ReadRecord,
) -> None:
    workspace = team_workspace("always_invalid")
    seed(workspace, "req-1", "qa")
    summary = await run_once(workspace)
    assert [r.purpose for r in summary.prompts] == ["role_task"] + ["contract_repair"] * 2
    assert (summary.failed, summary.handled) == (1, 0)
    record = read_record(workspace, "req-1")
    assert record["status"] == "failed"
    issues = record["result"]["contract_issues"]
    assert "`summary` is missing or empty." in issues
    assert record["result"]["error"] == "contract_validation_failed"
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
    team_workspace: Callable[..., Workspace],
    seed: Callable[..., None],
    run_once: RunOnce,
    read_record: ReadRecord,
    mode: str,
    reason: str,
) -> None:
    workspace = team_workspace(mode, model={"max_output_bytes": 1_000_000})
    seed(workspace, "req-1", "qa")
    seed(workspace, "req-2", "planner")
    summary = await run_once(workspace)
    assert summary.failed == 2
    record = read_record(workspace, "req-1")
    assert record["status"] == "failed"
    failure = record["events"][-1]
    assert failure["type"] == "model_failed" and reason in failure["payload"]["reason"]
    assert len(summary.prompts) == 4  # two attempts per request (model.attempts: 2)
    assert sum(FileWorkQueue(workspace).counts().values()) == 0  # failed is an outcome: done


async def test_timeout_kills_the_model_and_requeue_keeps_the_envelope(
    team_workspace: Callable[..., Workspace],
    seed: Callable[..., None],
    run_once: RunOnce,
    read_record: ReadRecord,
) -> None:
    workspace = team_workspace(
        "sleep", model={"timeout_seconds": 0.5, "attempts": 1, "on_failure": "requeue"}
    )
    seed(workspace, "req-1", "qa")
    before = read_record(workspace, "req-1")
    summary = await run_once(workspace)
    assert summary.deferred == 1
    assert sum(FileWorkQueue(workspace).counts().values()) == 1  # kept for the next run
    assert read_record(workspace, "req-1") == before  # nothing recorded as done


async def test_bad_envelopes_are_set_aside_not_lost(
    team_workspace: Callable[..., Workspace], seed: Callable[..., None], run_once: RunOnce
) -> None:
    workspace = team_workspace()
    folder = workspace.role_queue("qa")
    folder.mkdir(parents=True)
    (folder / "0001-bad.json").write_text("{not json")
    (folder / "0002-bad.json").write_text('{"request_id": "x"}')
    seed(workspace, "req-1", "qa")
    summary = await run_once(workspace)
    assert (summary.rejected, summary.handled) == (2, 1)
    rejected = sorted(p.name for p in (workspace.queue_dir / "rejected").iterdir())
    assert rejected == [
        "qa-0001-bad.json",
        "qa-0001-bad.json.reason",
        "qa-0002-bad.json",
        "qa-0002-bad.json.reason",
    ]


async def test_an_envelope_for_an_unknown_request_is_rejected_without_a_prompt(
    team_workspace: Callable[..., Workspace], run_once: RunOnce
) -> None:
    workspace = team_workspace()
    FileWorkQueue(workspace).put(
        MessageEnvelope(request_id="req-gone", sender="user", target="qa", scope="x")
    )
    summary = await run_once(workspace)
    assert (summary.rejected, summary.prompts_sent) == (1, 0)
    (reason,) = (workspace.queue_dir / "rejected").glob("*.reason")
    assert reason.read_text().startswith("no request 'req-gone'")
    assert not workspace.request_path("req-gone").exists()  # never created behind our back


async def test_an_outcome_that_cannot_be_saved_keeps_its_envelope(
    team_workspace: Callable[..., Workspace], seed: Callable[..., None], run_once: RunOnce
) -> None:
    workspace = team_workspace()
    path = workspace.request_path("req-odd")
    path.parent.mkdir(parents=True)
    path.write_text('{"request_id": "req-odd", "events": "not a list"}')
    FileWorkQueue(workspace).put(
        MessageEnvelope(request_id="req-odd", sender="user", target="qa", scope="x")
    )
    seed(workspace, "req-1", "qa")
    summary = await run_once(workspace)
    assert (summary.handled, summary.deferred) == (1, 1)  # the other request was served
    assert summary.left_deferred == 1  # with no wait for its next attempt (the fixture's)
    (deferred,) = FileWorkQueue(workspace).snapshot().deferred_envelopes
    assert deferred.request_id == "req-odd" and deferred.next_attempt == summary.next_attempt
    next_run = FileWorkQueue(workspace, clock=lambda: deferred.next_attempt)
    assert next_run.restore_deferred() == 1  # due: any worker takes it again
    claims = next_run.claim("qa", 100)
    assert [claim.envelope.request_id for claim in claims if claim.envelope] == ["req-odd"]
    assert path.read_text() == '{"request_id": "req-odd", "events": "not a list"}'


async def test_a_record_naming_another_id_is_still_worked_on_as_its_file(
    team_workspace: Callable[..., Workspace],
    seed: Callable[..., None],
    run_once: RunOnce,
    read_record: ReadRecord,
) -> None:
    workspace = team_workspace()
    seed(workspace, "req-1", "qa")
    path = workspace.request_path("req-1")
    record = json.loads(path.read_bytes())
    del record["request_id"]  # an old record without its id
    path.write_text(json.dumps(record, indent=2))
    summary = await run_once(workspace)
    assert (summary.handled, summary.failed) == (1, 0)
    assert [r.request_id for r in summary.prompts] == ["req-1"]
    assert read_record(workspace, "req-1")["status"] == "completed"


async def test_a_second_delivery_after_the_whole_chain_ran_queues_nothing_again(
    team_workspace: Callable[..., Workspace],
    run_once: RunOnce,
    read_record: ReadRecord,
) -> None:
    # A worker died after its outcome and follow-up were stored, and the chain went on to the
    # end; the queue then hands the first envelope out again. Its outcome is recorded, and so
    # is its follow-up's: nothing is asked or queued again.
    workspace = team_workspace()
    first = MessageEnvelope(
        request_id="req-1", sender="user", target="planner", scope="do it", envelope_id="env-1"
    )
    create_record(workspace.record_paths("req-1"), {"request_id": "req-1", "events": []})
    FileWorkQueue(workspace).put(first)
    summary = await run_once(workspace)
    assert summary.handled == 4 and summary.prompts_sent == 4  # planner ... qa
    events = len(read_record(workspace, "req-1")["events"])
    FileWorkQueue(workspace).put(first)
    again = await run_once(workspace)
    assert (again.handled, again.prompts_sent) == (1, 0)
    assert len(read_record(workspace, "req-1")["events"]) == events


async def test_a_store_that_is_away_leaves_the_envelope_queued_not_rejected(
    team_workspace: Callable[..., Workspace],
    seed: Callable[..., None],
    run_once: RunOnce,
) -> None:
    # A backend's server away (StorageError from every read) is passing trouble: the envelope
    # stays queued for the next run, it is never set aside as bad.
    workspace = team_workspace()
    seed(workspace, "req-1", "planner", events=3)

    class AwayStore(FileRecordStore):
        def read(self, request_id: str, *, tail: int | None) -> Any:
            raise StorageError("the NATS server at nats://127.0.0.1:9 did not answer a read")

    summary = await run_once(workspace, store=ThreadedRecordStore(AwayStore(workspace)))
    assert (summary.handled, summary.rejected, summary.deferred) == (0, 0, 1)
    assert FileWorkQueue(workspace).counts()["planner"] == 1
    assert not list(workspace.queue_dir.glob("rejected/*.json"))


@pytest.mark.parametrize("status", ["in_progress", "cancelled"])
async def test_a_second_delivery_queues_the_missing_follow_up_unless_the_request_ended(
    team_workspace: Callable[..., Workspace], run_once: RunOnce, status: str
) -> None:
    # The planner's outcome (a hand-off to developer) is recorded, but its follow-up was
    # never queued (its write outlived the ask, or a crash came between). A second delivery
    # queues that follow-up, asking no model for the planner: unless the request has ended.
    workspace = team_workspace()
    first = MessageEnvelope(
        request_id="req-1", sender="user", target="planner", scope="do it", envelope_id="env-1"
    )
    result = RoleResult(request_id="req-1", role="planner", status="completed",
                        summary="planned", next_role="developer")  # fmt: skip
    plan = plan_outcome("planner", first, result, "2026-11-30T10:00:00+00:00")
    events = [{**event, "append_key": "planner/env-1"} for event in plan.events_json()]
    record = {"request_id": "req-1", **plan.updates_json(), "status": status, "events": events}
    create_record(workspace.record_paths("req-1"), record)
    FileWorkQueue(workspace).put(first)
    summary = await run_once(workspace, roles=["planner", "developer", "version_controller", "qa"])
    asked = [prompt.role for prompt in summary.prompts]
    if status == "cancelled":
        assert (summary.handled, asked) == (1, [])  # dropped: nothing handed on
    else:
        assert asked == ["developer", "version_controller", "qa"]  # the planner not again
    assert sum(FileWorkQueue(workspace).counts().values()) == 0
