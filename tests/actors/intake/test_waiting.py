"""``wait_for_request``: an app waits for a request it submitted to settle, beside the Team that
works on it, and reads how it ended (docs/python.md)."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from teams_runtime import (
    Team,
    UnknownRequestError,
    submit,
    wait_for_request,
)
from teams_runtime.cli import main
from teams_runtime.codecs.request_records import encode_record
from teams_runtime.demo import sample_record

pytestmark = pytest.mark.anyio


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A workspace as ``teams-runtime init`` makes it: the dry-run model, route planner,
    developer, qa."""
    assert main(["init", str(tmp_path / "ws")]) == 0
    return tmp_path / "ws"


async def test_waits_until_the_team_completes_the_request(root: Path) -> None:
    submitted = await submit(root, role="planner", scope="Add a CSV export")
    team = Team(root)
    with anyio.fail_after(60):
        async with anyio.create_task_group() as group:
            await group.start(team.run)
            outcome = await wait_for_request(root, submitted.request_id, poll_interval=0.05)
            group.cancel_scope.cancel()
    assert (outcome.request_id, outcome.status) == (submitted.request_id, "completed")
    assert (outcome.current_role, outcome.hops) == ("qa", 2)
    assert outcome.result["role"] == "qa" and outcome.result["status"] == "completed"


async def test_a_queued_request_is_waited_for_until_it_settles(root: Path) -> None:
    """No team runs: the wait goes on while the request is queued, and returns once it
    is failed (by anyone: here its record is written)."""
    submitted = await submit(root, role="planner", scope="Add a CSV export")
    outcome = None

    async def wait() -> None:
        nonlocal outcome
        outcome = await wait_for_request(root, submitted.request_id, poll_interval=0.01)

    with anyio.fail_after(30):
        async with anyio.create_task_group() as group:
            group.start_soon(wait)
            await anyio.sleep(0.1)  # time is the scenario: several polls find it queued
            assert outcome is None
            record = sample_record(3, submitted.request_id)
            record.update(status="failed", current_role="qa", result={})
            path = root / ".teams_runtime" / "requests" / f"{submitted.request_id}.json"
            # Written as the runtime writes: whole, then renamed over (a poll never reads half).
            temp = anyio.Path(path.with_suffix(".tmp"))
            await temp.write_bytes(encode_record(record))
            await temp.replace(path)
    assert outcome is not None
    assert (outcome.status, outcome.current_role, outcome.result) == ("failed", "qa", {})


async def test_an_unknown_request_is_an_error(root: Path) -> None:
    with anyio.fail_after(30), pytest.raises(UnknownRequestError, match=r"^no request 'req-x'"):
        await wait_for_request(root, "req-x")
