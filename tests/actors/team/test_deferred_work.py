"""Deferred work returns by itself, on both backends: a serving worker queues deferred
envelopes again when their next attempt comes (no restart), a redelivered envelope whose
outcome was written after its ask timed out queues its follow-up without asking the model,
`run --once` waits for the envelopes it deferred up to its bound and says what it left, and
`status` lists deferred envelopes with their next attempt."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import AsyncExitStack
from datetime import datetime
from typing import Any

import anyio
import msgspec
import pytest

from teams_runtime.actors.team._team import Team
from teams_runtime.cli._status_report import status_report
from teams_runtime.codecs.config import NatsSettings
from teams_runtime.codecs.envelopes import MessageEnvelope
from teams_runtime.demo import sample_record
from teams_runtime.exceptions import StorageError
from teams_runtime.storage import (
    FileRecordStore,
    FileWorkQueue,
    RecordStore,
    StorageQueue,
    Workspace,
)
from teams_runtime.storage._deferrals import RetrySchedule
from teams_runtime.storage.blocking import BlockingQueue, BlockingRecordStore
from teams_runtime.storage.files.threaded import ThreadedQueue, ThreadedRecordStore
from teams_runtime.storage.nats.blocking_faces import blocking_queue, blocking_store
from teams_runtime.storage.nats.connection import NatsConnection, open_connection
from teams_runtime.storage.nats.nats_queue import NatsWorkQueue
from teams_runtime.storage.nats.nats_store import NatsRecordStore

from ...support.cli_in_process import run_cli
from ...support.waiting import eventually

ROUTE = ["planner", "developer", "version_controller", "qa"]  # what fake_model answers
FAST = RetrySchedule(first=0.2, cap=0.4)  # deferred envelopes due again within a fraction


class Storage:
    """One backend for a test: its team_runtime.yaml sections, and store and queue objects
    (each a worker of its own on NATS, with its own connection)."""

    def __init__(
        self,
        settings: NatsSettings | None,
        connect: Callable[[NatsSettings], NatsConnection] | None = None,
    ) -> None:
        self.settings = settings
        self._connect = connect  # `nats_connect`: each connection closed when the test ends
        self._reader: BlockingRecordStore | None = None

    def sections(self) -> dict[str, Any]:
        if self.settings is None:
            return {}
        nats = {"url": self.settings.url, "prefix": self.settings.prefix}
        return {"backend": {"kind": "nats", "nats": nats}}

    def _connection(self) -> NatsConnection:
        assert self.settings is not None and self._connect is not None
        return self._connect(self.settings)

    async def worker(
        self,
        workspace: Workspace,
        stack: AsyncExitStack,
        after_append: Callable[[], None] | None = None,
        **options: Any,
    ) -> tuple[RecordStore, StorageQueue]:
        """A Team's store, whose every append calls ``after_append`` once it is written, and
        queue (``options`` go to it): on NATS a connection of their own on the caller's loop,
        closed with ``stack``."""
        if self.settings is None:

            class FileStore(FileRecordStore):
                def append(self, *args: Any, **kwargs: Any) -> Any:
                    answer = super().append(*args, **kwargs)
                    if after_append is not None:
                        after_append()
                    return answer

            queue = ThreadedQueue(FileWorkQueue(workspace, **options))
            return ThreadedRecordStore(FileStore(workspace)), queue

        class NatsStore(NatsRecordStore):
            async def append(self, *args: Any, **kwargs: Any) -> Any:
                answer = await super().append(*args, **kwargs)
                if after_append is not None:
                    after_append()
                return answer

        connection = await stack.enter_async_context(open_connection(self.settings))
        return await NatsStore.open(connection), NatsWorkQueue(connection, **options)

    def queue(self, workspace: Workspace, **options: Any) -> BlockingQueue:
        """The queue as another process sees it (blocking)."""
        if self.settings is not None:
            return blocking_queue(self._connection(), **options)
        return FileWorkQueue(workspace, **options)

    def seed(self, workspace: Workspace, request_id: str, role: str) -> None:
        self.record(workspace, None)  # the reader: a store made once
        assert self._reader is not None
        self._reader.create(request_id, sample_record(3, request_id))
        self.queue(workspace).put(
            MessageEnvelope(request_id=request_id, sender="user", target=role, scope="do it")
        )

    def record(self, workspace: Workspace, request_id: str | None) -> dict[str, Any]:
        if self._reader is None:
            if self.settings is None:
                self._reader = FileRecordStore(workspace)
            else:
                self._reader = blocking_store(self._connection())
        if request_id is None:
            return {}
        record: dict[str, Any] = json.loads(self._reader.load(request_id))
        return record


@pytest.fixture(params=["file", "nats"])
def backend(request: pytest.FixtureRequest) -> Iterator[Storage]:
    nats = request.param == "nats"
    if nats:
        settings = request.getfixturevalue("nats_server").settings()
        yield Storage(settings, request.getfixturevalue("nats_connect"))
    else:
        yield Storage(None)


def _calls(workspace: Workspace) -> list[str]:
    log = workspace.root / "model-state" / "calls.log"
    return [json.loads(line)["role"] for line in log.read_text().splitlines()]


def _reports(record: dict[str, Any]) -> list[str]:
    """Who reported after the 3 seeded events."""
    reports = ("role_report", "version_control_completed")
    return [event["actor"] for event in record["events"][3:] if event.get("type") in reports]


@pytest.mark.anyio
async def test_a_serving_worker_takes_back_an_envelope_whose_write_outlived_its_ask(
    backend: Storage, team_workspace: Callable[..., Workspace]
) -> None:
    # The planner's outcome is written, but its worker does not hear so: on files the write
    # stalls past the ask's deadline (a slow disk), on NATS the answer is lost (the server
    # went away after committing). The envelope is deferred; its next attempt comes by
    # itself, finds the outcome, queues the follow-up it lacked, and asks no model again.
    workspace = team_workspace(sections=backend.sections())
    backend.seed(workspace, "req-1", "planner")
    first = [True]

    def unheard_once() -> None:
        if first.pop() if first else False:
            if backend.settings is None:
                time.sleep(0.6)  # the scenario, a slow disk: past the ask's 0.2 s
            else:
                raise StorageError("the NATS server went away before it answered")

    async with AsyncExitStack() as stack:
        store, queue = await backend.worker(workspace, stack, unheard_once, retry=FAST)
        team = Team(workspace.root, store=store, queue=queue, ask_timeout=0.2)
        await _serve_until_done(team, backend, workspace)
    assert team.summary.deferred == 1
    assert _calls(workspace) == ROUTE  # the planner was asked once
    assert backend.record(workspace, "req-1")["status"] == "completed"
    assert sum(backend.queue(workspace).counts().values()) == 0


async def _serve_until_done(team: Team, backend: Storage, workspace: Workspace) -> None:
    with anyio.fail_after(90):
        async with anyio.create_task_group() as group:
            group.start_soon(team.run)  # serving: never restarted
            await eventually(  # another process's view: the record, polled
                lambda: _reports(backend.record(workspace, "req-1")) == ROUTE, "every report", 60
            )
            group.cancel_scope.cancel()


@pytest.mark.anyio
async def test_run_once_waits_for_what_it_deferred_then_leaves_what_is_not_due_in_time(
    backend: Storage, team_workspace: Callable[..., Workspace]
) -> None:
    workspace = team_workspace(sections=backend.sections())
    backend.seed(workspace, "req-1", "qa")
    backend.seed(workspace, "req-2", "qa")
    failures = {"req-1": 2}  # req-1's outcome fails twice; req-2's always

    def away() -> None:
        raise StorageError("the server went away")

    class Flaky:
        def __init__(self, store: Any) -> None:
            self._store = store

        def __getattr__(self, name: str) -> Any:
            return getattr(self._store, name)

        async def append(self, request_id: str, *args: Any, **kwargs: Any) -> Any:
            if request_id == "req-2" or failures.get(request_id, 0) > 0:
                failures[request_id] = failures.get(request_id, 0) - 1
                away()
            return await self._store.append(request_id, *args, **kwargs)

    async with AsyncExitStack() as stack:
        store, queue = await backend.worker(workspace, stack, retry=FAST)
        team = Team(workspace.root, store=Flaky(store), queue=queue, deferred_wait=2.0)
        started = time.monotonic()
        with anyio.fail_after(60):
            summary = await team.run(once=True)
    # It waited for req-2 until the next attempt fell past its 2 s (at most 0.4 s early).
    assert time.monotonic() - started >= 2.0 - FAST.cap
    assert (summary.handled, summary.left_deferred) == (1, 1)
    assert summary.deferred >= 2 + 3  # req-1 twice; req-2 at 0.2, 0.4, 0.4 s... until the bound
    assert _reports(backend.record(workspace, "req-1")) == ["qa"]
    assert _reports(backend.record(workspace, "req-2")) == []
    (left,) = backend.queue(workspace).snapshot().deferred_envelopes
    assert left.request_id == "req-2" and left.next_attempt == summary.next_attempt
    assert left.deferrals == summary.deferred - 2


def test_status_lists_deferred_envelopes_with_their_next_attempt(
    backend: Storage, team_workspace: Callable[..., Workspace], capsys: pytest.CaptureFixture[str]
) -> None:
    workspace = team_workspace(sections=backend.sections())
    backend.seed(workspace, "req-1", "qa")
    queue = backend.queue(workspace)
    (claim,) = queue.claim("qa", 1)
    due = queue.release(claim)
    report = status_report(workspace)
    assert report["roles"]["qa"] == {"waiting": 0, "claimed": 0, "deferred": 1}
    (deferred,) = report["deferred"]
    assert claim.envelope is not None
    assert deferred == {
        "role": "qa",
        "request_id": "req-1",
        "envelope_id": claim.envelope.envelope_id,
        "deferrals": 1,
        "next_attempt_at": deferred["next_attempt_at"],
        "due_in_seconds": deferred["due_in_seconds"],
    }
    assert 0 < deferred["due_in_seconds"] <= 3.0
    assert abs(datetime.fromisoformat(deferred["next_attempt_at"]).timestamp() - due) < 1.0
    status, out, _ = run_cli(capsys, "status", "--workspace", str(workspace.root))
    assert status == 0
    assert f"deferred qa:req-1 (1 deferral): next attempt at {deferred['next_attempt_at']}" in out


def test_run_once_says_what_it_left_deferred(
    team_workspace: Callable[..., Workspace],
    seed: Callable[..., None],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    workspace = team_workspace("exit_1", model={"attempts": 1, "on_failure": "requeue"})
    seed(workspace, "req-1", "qa", events=3)
    monkeypatch.setattr("teams_runtime.actors.team._team.DEFERRED_WAIT_SECONDS", 0.0)  # no wait
    root = str(workspace.root)
    status, out, _ = run_cli(capsys, "run", "--workspace", root, "--once", "--plain")
    assert status == 0
    assert out.startswith(
        "Finished 0 envelopes: 0 done, 0 failed, 0 rejected; 1 model call, 0 answered.\n"
    )
    assert "Left 1 deferred envelope (qa:req-1); the next is due at " in out
    # req-1 is not due yet: a run finds nothing to do, and says what waits, and until when.
    status, out, _ = run_cli(capsys, "run", "--workspace", root, "--once", "--plain")
    assert status == 0
    assert out.startswith("Finished 0 envelopes: 0 done, 0 failed, 0 rejected; 0 model calls")
    assert "Not due yet: 1 envelope an earlier run deferred (qa:req-1); the next is due at " in out
    seed(workspace, "req-2", "qa", events=3)  # req-1 is not due yet: this run leaves req-2
    status, out, _ = run_cli(capsys, "run", "--workspace", root, "--once", "--json", "--plain")
    summary = msgspec.json.decode(out)
    assert (status, summary["finished"], summary["left_deferred"]) == (0, 0, 1)
    assert datetime.fromisoformat(summary["next_attempt_at"]).timestamp() > time.time()
    named = [(e["request_id"], e["this_run"]) for e in summary["deferred_envelopes"]]
    assert sorted(named) == [("req-1", False), ("req-2", True)]
    assert FileWorkQueue(workspace).counts()["qa"] == 2
