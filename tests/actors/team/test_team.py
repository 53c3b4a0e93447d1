"""The Team supervisor: every role started with the same config, requests travelling the route,
one role at a time per request, the config read once."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from functools import partial
from itertools import pairwise
from pathlib import Path
from typing import Any

import anyio
import pytest

from teams_runtime.actors.models._backends import DryRunBackend
from teams_runtime.actors.team import RoleStatus
from teams_runtime.actors.team._team import RunSummary, Team
from teams_runtime.codecs.config import DryRunConfig, PromptContextConfig
from teams_runtime.codecs.envelopes import MessageEnvelope
from teams_runtime.codecs.roles import ROLES
from teams_runtime.storage import FileWorkQueue, Workspace, load_team_config

from ...support.waiting import eventually

pytestmark = pytest.mark.anyio

RunOnce = Callable[..., Awaitable[RunSummary]]


async def test_every_role_gets_the_same_prompt_context(
    team_workspace: Callable[..., Workspace], seed: Callable[..., None], run_once: RunOnce
) -> None:
    workspace = team_workspace(prompt_context={"recent_events": 3, "max_events": 5})
    for role in ROLES:
        seed(workspace, f"req-{role}", role, events=30)
    # No route: every role replies once and finishes, so each prompt is a role's own.
    summary = await run_once(workspace, backend=DryRunBackend(DryRunConfig(route=[])))
    assert summary.handled == len(ROLES)
    assert {record.role for record in summary.prompts} == set(ROLES)
    seen = {(r.enabled, r.recent_events, r.max_events) for r in summary.prompts}
    assert seen == {(True, 3, 5)}
    for record in summary.prompts:  # and the selection followed it: 3 recent + backfill <= 5
        assert (record.total_events, record.compacted) == (30, True)
        assert 3 <= record.included_events <= 5


async def test_the_roles_and_their_config_are_in_place_once_started(
    team_workspace: Callable[..., Workspace],
) -> None:
    workspace = team_workspace(prompt_context={"recent_events": 3, "max_events": 5})
    team = Team(workspace.root)
    with anyio.fail_after(30):
        async with anyio.create_task_group() as group:
            await group.start(lambda task_status: team.run(once=False, task_status=task_status))
            assert set(team.roles) == set(ROLES)
            assert team.config.prompt_context == PromptContextConfig(recent_events=3, max_events=5)
            group.cancel_scope.cancel()


async def test_a_request_travels_the_route_and_completes(
    team_workspace: Callable[..., Workspace],
    seed: Callable[..., None],
    run_once: RunOnce,
    read_record: Callable[[Workspace, str], dict[str, Any]],
) -> None:
    workspace = team_workspace()
    seed(workspace, "req-1", "planner")
    summary = await run_once(workspace)
    assert (summary.handled, summary.failed) == (4, 0)
    record = read_record(workspace, "req-1")
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


async def test_one_role_at_a_time_per_request_and_requests_in_parallel(
    tmp_path: Path,
    team_workspace: Callable[..., Workspace],
    seed: Callable[..., None],
    run_once: RunOnce,
) -> None:
    workspace = team_workspace("slow_valid")
    for n in range(3):
        seed(workspace, f"req-{n}", "planner")
        FileWorkQueue(workspace).put(  # a second envelope for the same request, another role
            MessageEnvelope(request_id=f"req-{n}", sender="user", target="qa", scope="check")
        )
    await run_once(workspace)
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


def test_config_is_read_once_at_start(
    tmp_path: Path, team_workspace: Callable[..., Workspace]
) -> None:
    workspace = team_workspace(prompt_context={"max_events": 20})
    team = Team(workspace.root)
    (tmp_path / "team_runtime.yaml").write_text("prompt_context: {max_events: 30}\n")
    assert team.config.prompt_context.max_events == 20
    assert load_team_config(tmp_path).prompt_context.max_events == 30  # a restart would see it


async def test_status_shows_the_request_being_handled_then_the_outcome(
    team_workspace: Callable[..., Workspace], seed: Callable[..., None]
) -> None:
    workspace = team_workspace("slow:1")
    seed(workspace, "req-status", "qa", events=5)
    seed(workspace, "req-waiting", "qa", events=5)
    team = Team(workspace.root, concurrency=1)
    with anyio.fail_after(60):
        async with anyio.create_task_group() as group:
            await group.start(partial(team.run, once=True))

            async def qa_at_work() -> RoleStatus | None:
                (qa,) = [status for status in await team.status() if status.role == "qa"]
                return qa if qa.working else None

            qa = await eventually(qa_at_work, "the first status that shows qa at work")
            (work,) = qa.working
            assert work.request_id in {"req-status", "req-waiting"}
            assert work.since <= anyio.current_time()
            assert (qa.handled, qa.failed, qa.queued) == (0, 0, 1)  # one slot: the other waits
    statuses = {status.role: status for status in await team.status()}
    assert set(statuses) == set(ROLES)
    assert (statuses["qa"].handled, statuses["qa"].failed, statuses["qa"].queued) == (2, 0, 0)
    assert all(not status.working for status in statuses.values())
