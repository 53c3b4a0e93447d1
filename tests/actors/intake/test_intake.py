"""New work entering the team: a new request, more work on an existing one, refused input."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from teams_runtime.actors.intake._submit import new_request_id, submit
from teams_runtime.codecs.request_ids import check_request_id
from teams_runtime.exceptions import UnsafeRequestIdError
from teams_runtime.storage import FileWorkQueue, Workspace

pytestmark = pytest.mark.anyio

ReadRecord = Callable[[Workspace, str], dict[str, Any]]


async def test_a_new_request_is_recorded_then_queued(
    tmp_path: Path, read_record: ReadRecord
) -> None:
    workspace = Workspace(tmp_path)
    with anyio.fail_after(10):
        done = await submit(tmp_path, role="planner", scope="Add CSV export",
                            request_id="req-a", body="details", intent="implement",
                            urgency="high")  # fmt: skip
    assert (done.request_id, done.created) == ("req-a", True)
    record = read_record(workspace, "req-a")
    assert {key: record[key] for key in ("status", "scope", "body", "intent", "urgency")} == {
        "status": "queued",
        "scope": "Add CSV export",
        "body": "details",
        "intent": "implement",
        "urgency": "high",
    }
    assert (record["current_role"], record["next_role"]) == ("planner", "planner")
    assert [(e["type"], e["actor"]) for e in record["events"]] == [
        ("created", "orchestrator"),
        ("delegated", "orchestrator"),
    ]
    assert record["events"][1]["payload"] == {"from_role": "orchestrator", "to_role": "planner"}
    (claim,) = FileWorkQueue(workspace).claim("planner", 10)
    assert Path(claim.ticket).name == Path(done.envelope_path).name
    assert claim.envelope is not None
    assert (claim.envelope.sender, claim.envelope.scope) == ("user", "Add CSV export")


async def test_more_work_on_a_request_extends_its_record(
    tmp_path: Path, read_record: ReadRecord
) -> None:
    workspace = Workspace(tmp_path)
    with anyio.fail_after(10):
        await submit(tmp_path, role="planner", scope="first", request_id="req-a")
        again = await submit(tmp_path, role="qa", scope="check it", request_id="req-a")
    assert again.created is False
    record = read_record(workspace, "req-a")
    assert record["scope"] == "first"  # the request's own fields stay
    assert (record["status"], record["current_role"]) == ("queued", "qa")
    assert [e["type"] for e in record["events"]] == ["created", "delegated", "delegated"]
    assert record["events"][-1]["payload"]["to_role"] == "qa"
    counts = FileWorkQueue(workspace).counts()
    assert (counts["planner"], counts["qa"], sum(counts.values())) == (1, 1, 2)


async def test_a_request_without_an_id_gets_a_fresh_safe_one(tmp_path: Path) -> None:
    with anyio.fail_after(10):
        done = await submit(tmp_path, role="qa", scope="s")
    assert re.fullmatch(r"req-\d{8}-\d{6}-[0-9a-f]{4}", done.request_id)
    assert check_request_id(done.request_id) == done.request_id
    assert len({new_request_id() for _ in range(50)}) > 1  # not one fixed id


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        pytest.param(
            {"role": "version_controller"},
            ValueError,
            r"^role 'version_controller' takes no new work",
            id="internal-role",
        ),
        pytest.param({"role": "boss"}, ValueError, r"^unknown role 'boss'", id="unknown-role"),
        pytest.param(
            {"role": "qa", "request_id": "../x"},
            UnsafeRequestIdError,
            r"^request id '\.\./x' is not a safe file name",
            id="unsafe-id",
        ),
    ],
)
async def test_refused_submissions_write_nothing(
    tmp_path: Path, kwargs: dict[str, Any], error: type[Exception], message: str
) -> None:
    with anyio.fail_after(10), pytest.raises(error, match=message):
        await submit(tmp_path, scope="s", **kwargs)
    assert list(tmp_path.iterdir()) == []
