"""Limits are invariants across workers: three Teams (three workers, each with its own store
and queue objects, so its own ContextActor and cache) share requests that were submitted
several times, on both backends, under random interleavings (hypothesis draws the requests,
the submissions, the limit, each worker's concurrency and roles, and the model's delays).

Whatever the interleaving: ``hops`` counts every role hand-off once and never passes
``team.max_hops``; exactly one ``hop_limit`` event fails each request; no prompt is ever built
from a projection of an ended request; every model call's outcome is recorded once; and
nothing is left queued.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack, ExitStack
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from teams_runtime.actors.intake._submit import submit
from teams_runtime.actors.models._backends import ModelReply
from teams_runtime.actors.team._team import Team
from teams_runtime.codecs.config import NatsSettings
from teams_runtime.policy.prompts import PromptBundle
from teams_runtime.storage import (
    FileRecordStore,
    FileWorkQueue,
    RecordStore,
    StorageQueue,
    Workspace,
    load_team_config,
)
from teams_runtime.storage.blocking import BlockingRecordStore
from teams_runtime.storage.files.threaded import ThreadedQueue, ThreadedRecordStore
from teams_runtime.storage.nats.blocking_faces import blocking_store
from teams_runtime.storage.nats.connection import open_connection
from teams_runtime.storage.nats.nats_queue import NatsWorkQueue
from teams_runtime.storage.nats.nats_store import NatsRecordStore

ROLES = {"both": ("qa", "developer"), "qa": ("qa",), "developer": ("developer",)}


class PingPong:
    """A model that always hands the request to the other role, after a random delay; it
    notes the status and hops each prompt's projection shows."""

    name = "ping_pong"

    def __init__(self, rng: random.Random, delays: list[float], seen: list[Any]) -> None:
        self._rng, self._delays, self._seen = rng, delays, seen

    async def complete(self, bundle: PromptBundle) -> ModelReply:
        async for _ in bundle.chunks():
            pass
        projection = bundle.projection
        self._seen.append((bundle.request_id, projection.value("status")))
        await anyio.sleep(self._rng.choice(self._delays))
        other = "developer" if bundle.role == "qa" else "qa"
        answer = {"request_id": bundle.request_id, "role": bundle.role, "status": "completed",
                  "summary": "back to you", "next_role": other}  # fmt: skip
        return ModelReply(text=json.dumps(answer))


_plans = st.fixed_dictionaries(
    {
        "requests": st.integers(1, 3),
        "submits": st.integers(1, 4),
        "max_hops": st.integers(1, 8),
        "concurrency": st.lists(st.integers(1, 4), min_size=3, max_size=3),
        # The first worker serves both roles, so nothing waits for a role nobody serves.
        "roles": st.lists(st.sampled_from(sorted(ROLES)), min_size=2, max_size=2),
        "delays": st.lists(st.sampled_from([0.0, 0.0005, 0.002, 0.01]), min_size=1, max_size=4),
        "seed": st.integers(0, 2**16),
    }
)

Worker = Callable[[AsyncExitStack], Awaitable[tuple[RecordStore, StorageQueue]]]
Storage = Callable[[ExitStack], tuple[dict[str, Any], Worker, Callable[[], BlockingRecordStore]]]


def _files(root: Path) -> Storage:
    def make(stack: ExitStack) -> tuple[dict[str, Any], Worker, Callable[[], BlockingRecordStore]]:
        workspace = Workspace(root)

        async def worker(opened: AsyncExitStack) -> tuple[RecordStore, StorageQueue]:
            store = ThreadedRecordStore(FileRecordStore(workspace))
            return store, ThreadedQueue(FileWorkQueue(workspace))

        return {}, worker, lambda: FileRecordStore(workspace)

    return make


def _nats(settings: NatsSettings) -> Storage:
    def make(stack: ExitStack) -> tuple[dict[str, Any], Worker, Callable[[], BlockingRecordStore]]:
        async def worker(opened: AsyncExitStack) -> tuple[RecordStore, StorageQueue]:
            # A host of its own: its connection on the run's loop, closed with ``opened``.
            connection = await opened.enter_async_context(open_connection(settings))
            return await NatsRecordStore.open(connection), NatsWorkQueue(connection)

        def reader() -> BlockingRecordStore:
            portal = stack.enter_context(anyio.from_thread.start_blocking_portal())
            scope = portal.wrap_async_context_manager(open_connection(settings))
            return blocking_store(stack.enter_context(scope))

        section = {"kind": "nats", "nats": {"url": settings.url, "prefix": settings.prefix}}
        return {"backend": section}, worker, reader

    return make


def _check_limits(root: Path, backend: Storage, plan: dict[str, Any]) -> None:
    ids = [f"req-{n}" for n in range(plan["requests"])]
    seen: list[Any] = []
    with ExitStack() as stack:
        sections, worker, reader = backend(stack)
        config = {"team": {"max_hops": plan["max_hops"]}, "model": {"backend": "dry_run"}}
        (root / "team_runtime.yaml").write_text(yaml.safe_dump({**config, **sections}))

        async def scenario(opened: AsyncExitStack) -> None:
            for _ in range(plan["submits"]):  # as roles.md shows: the same request again
                for request_id in ids:
                    await submit(root, role="qa", scope="ping", request_id=request_id)
            rng = random.Random(plan["seed"])
            teams = []
            for number, roles in enumerate(["both", *plan["roles"]]):
                store, queue = await worker(opened)
                teams.append(
                    Team(
                        root,
                        load_team_config(root),
                        backend=PingPong(rng, plan["delays"], seen),
                        store=store,
                        queue=queue,
                        concurrency=plan["concurrency"][number],
                        poll_interval=rng.choice([0.005, 0.02, 0.1]),
                        roles=ROLES[roles],
                    )
                )
            with anyio.fail_after(120):
                async with anyio.create_task_group() as group:
                    for team in teams:
                        group.start_soon(lambda team=team: team.run(once=True))
            assert sum((await teams[0].queue.counts()).values()) == 0

        async def run_scenario() -> None:
            async with AsyncExitStack() as opened:  # the workers' connections, on this loop
                await scenario(opened)

        anyio.run(run_scenario)
        store = reader()
        records = {request_id: json.loads(store.load(request_id)) for request_id in ids}
    assert all(status not in ("failed", "cancelled") for _, status in seen)  # no call after
    calls = Counter(request_id for request_id, _ in seen)
    for request_id, record in records.items():
        events = record["events"]
        hand_offs = [e for e in events if e["type"] == "delegated" and e["actor"] != "orchestrator"]
        stops = [n for n, e in enumerate(events) if e["type"] == "hop_limit"]
        reports = [n for n, e in enumerate(events) if e["type"] == "role_report"]
        stale = [n for n, e in enumerate(events) if e["type"] == "stale_outcome"]
        assert len(hand_offs) == record["hops"] == plan["max_hops"], request_id
        assert len(stops) == 1 and record["status"] == "failed", request_id
        # Each call's outcome recorded once: a report, or stale when it came back after the
        # stop (which moved the request to its next epoch).
        assert calls[request_id] == len(reports) + len(stale)
        assert all(n < stops[0] for n in reports) and all(n > stops[0] for n in stale)
        # After the stop, only calls that were under way then (another chain's) come back.
        assert len(stale) <= plan["submits"] - 1


_SETTINGS = settings(
    deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)


@settings(_SETTINGS, max_examples=12)
@given(plan=_plans)
def test_three_file_workers_never_pass_the_limits(
    tmp_path_factory: pytest.TempPathFactory, plan: dict[str, Any]
) -> None:
    root = tmp_path_factory.mktemp("ws")
    _check_limits(root, _files(root), plan)


@settings(_SETTINGS, max_examples=6)
@given(plan=_plans)
def test_three_nats_hosts_never_pass_the_limits(
    tmp_path_factory: pytest.TempPathFactory, nats_server: Any, plan: dict[str, Any]
) -> None:
    root = tmp_path_factory.mktemp("host")
    _check_limits(root, _nats(nats_server.settings()), plan)
