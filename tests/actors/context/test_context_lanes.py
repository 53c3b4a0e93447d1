"""The ContextActor answers each request in a lane of its own: a request stuck in the store (its
lock held by another process, another writer keeping it busy on NATS) holds up only itself;
the number of requests in flight is bounded, with a clear error past it."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from teams_runtime import ActorBusy, AskTimeout, PromptContextConfig, open_context
from teams_runtime.actors.context._actor import ContextActor, ContextHandle
from teams_runtime.codecs.request_records import encode_record
from teams_runtime.demo import sample_record
from teams_runtime.storage import FileRecordStore, RecordStore, Workspace
from teams_runtime.storage.files.threaded import ThreadedRecordStore
from teams_runtime.storage.nats import _append_writer as append_writer
from teams_runtime.storage.nats.connection import open_connection
from teams_runtime.storage.nats.nats_store import NatsRecordStore

from ...benchmarks.stuck_request import held_lock, publish_uncommitted

pytestmark = pytest.mark.anyio

SMALL = PromptContextConfig(recent_events=4, max_events=7)
OTHERS = [f"req-{n}" for n in range(12)]
STUCK = "req-stuck"


def _files(root: Path) -> FileRecordStore:
    workspace = Workspace(root)
    for request_id in [*OTHERS, STUCK]:
        path = workspace.request_path(request_id)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(encode_record(sample_record(3, request_id)))
    return FileRecordStore(workspace)


def _note(summary: str) -> dict[str, Any]:
    return {"type": "note", "actor": "qa", "summary": summary}


async def _others_are_answered(ctx: ContextHandle) -> None:
    """Every other request gets an append and a projection answered, all at once."""

    async def one(request_id: str) -> None:
        assert await ctx.append_event(request_id, _note("meanwhile")) == 4
        assert (await ctx.project(request_id)).total_events == 4

    with anyio.fail_after(30):  # a guard against a hang, not a timing: they wait for nothing
        async with anyio.create_task_group() as group:
            for request_id in OTHERS:
                group.start_soon(one, request_id)


async def _stuck_request_holds_up_only_itself(
    store: RecordStore, release: Callable[[], None]
) -> None:
    """With ``STUCK``'s writes stalled in the store until ``release()``: two appends to it wait
    (in their order), its published projection is still served, the others are answered."""
    async with open_context("unused", SMALL, store=store) as ctx:
        before = await ctx.project(STUCK)  # published: served while its writes wait
        done: list[str] = []

        async def append(summary: str) -> None:
            await ctx.append_event(STUCK, _note(summary))
            done.append(summary)

        async with anyio.create_task_group() as group:
            try:  # released whatever happens: the stuck writes must end for the group to
                group.start_soon(append, "first")
                await anyio.wait_all_tasks_blocked()  # its write is in the store, waiting
                group.start_soon(append, "second")
                await anyio.wait_all_tasks_blocked()  # and this one behind it, in its lane
                await _others_are_answered(ctx)
                assert done == []  # still waiting: it held up no one but itself
                assert await ctx.project(STUCK) is before
            finally:
                release()
        assert done == ["first", "second"]  # the request's writes kept their order
        assert (await ctx.project(STUCK)).total_events == 5
    events = json.loads(await store.load(STUCK))["events"]
    assert [event.get("summary") for event in events[-2:]] == ["first", "second"]


async def test_a_request_whose_lock_another_process_holds_holds_up_only_itself(
    tmp_path: Path,
) -> None:
    store = _files(tmp_path)
    with held_lock(store.paths(STUCK).lock) as release:
        await _stuck_request_holds_up_only_itself(ThreadedRecordStore(store), release)


async def test_a_request_another_writer_keeps_busy_on_nats_holds_up_only_itself(
    nats_server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The other writer never commits: its message stays in the way until this store deems it
    # abandoned, which "release" makes happen at the append's next retry.
    monkeypatch.setattr(append_writer, "ABANDONED_SECONDS", 3600.0)

    def release() -> None:
        monkeypatch.setattr(append_writer, "ABANDONED_SECONDS", 0.0)

    async with open_connection(nats_server.settings()) as connection:
        store = await NatsRecordStore.open(connection)
        for request_id in [*OTHERS, STUCK]:
            await store.create(request_id, sample_record(3, request_id))
        subject = connection.names.event_subject(STUCK, None)
        with anyio.fail_after(60):
            await anyio.to_thread.run_sync(publish_uncommitted, nats_server.url, subject)
        await _stuck_request_holds_up_only_itself(store, release)


async def test_asks_about_more_requests_than_the_limit_are_refused_clearly(
    tmp_path: Path,
) -> None:
    store = _files(tmp_path)
    actor = ContextActor(ThreadedRecordStore(store), SMALL, requests_in_flight=1)
    written = anyio.Event()

    async def stuck() -> None:
        await ctx.append_event(STUCK, _note("stuck"))
        written.set()

    with held_lock(store.paths(STUCK).lock) as release:
        async with anyio.create_task_group() as group:
            group.start_soon(actor.serve)
            ctx = actor.handle(30)
            group.start_soon(stuck)
            try:
                await anyio.wait_all_tasks_blocked()  # the one lane there is: taken
                with pytest.raises(
                    ActorBusy,
                    match=r"^the context actor is busy: asks about 1 requests are in flight, its "
                    r"limit \(team\.requests_in_flight in team_runtime\.yaml\); Append about "
                    r"'req-0' was not taken, ask again\.$",
                ):
                    await ctx.append_event("req-0", _note("refused"))
                # A projection the actor answers at once takes no lane: still answered.
                assert (await ctx.project("req-0")).total_events == 3
            finally:
                release()
            await written.wait()  # its lane is free again
            assert await ctx.append_event("req-0", _note("later")) == 4
            actor.stop()
    summaries = [e.get("summary") for e in json.loads(store.load("req-0"))["events"]]
    assert "refused" not in summaries and summaries[-1] == "later"  # a refusal writes nothing
    assert issubclass(ActorBusy, AskTimeout)  # callers that wait and ask again do so here too


async def test_asks_waiting_behind_a_stuck_one_are_bounded(tmp_path: Path) -> None:
    store = _files(tmp_path)
    actor = ContextActor(ThreadedRecordStore(store), SMALL, inbox_size=2)
    outcomes: list[str] = []

    written = anyio.Event()

    async def append(summary: str) -> None:
        try:
            await ctx.append_event(STUCK, _note(summary))
            outcomes.append(summary)
        except ActorBusy as exc:
            outcomes.append(str(exc))
        if len(outcomes) == 4:
            written.set()

    with held_lock(store.paths(STUCK).lock) as release:
        async with anyio.create_task_group() as group:
            group.start_soon(actor.serve)
            ctx = actor.handle(30)
            try:
                for summary in ("being written", "waits 1", "waits 2", "one too many"):
                    group.start_soon(append, summary)
                    await anyio.wait_all_tasks_blocked()
                assert outcomes == [
                    "the context actor is busy: 2 asks about 'req-stuck' wait already; Append "
                    "was not taken, ask again."
                ]
            finally:
                release()
            await written.wait()
            actor.stop()
    assert outcomes[1:] == ["being written", "waits 1", "waits 2"]


async def test_a_write_whose_asker_gave_up_while_it_waited_is_not_made(tmp_path: Path) -> None:
    store = _files(tmp_path)
    actor = ContextActor(ThreadedRecordStore(store), SMALL)
    written = anyio.Event()

    async def first() -> None:
        await actor.handle(30).append_event(STUCK, _note("first"))
        written.set()

    with held_lock(store.paths(STUCK).lock) as release:
        async with anyio.create_task_group() as group:
            group.start_soon(actor.serve)
            group.start_soon(first)
            try:
                await anyio.wait_all_tasks_blocked()
                with pytest.raises(AskTimeout, match=r"did not answer Append within 0\.2 s"):
                    await actor.handle(0.2).append_event(STUCK, _note("given up"))
            finally:
                release()
            await written.wait()
            # What waited behind it in its lane comes next: an ask after it is answered after.
            assert await actor.handle(30).append_event(STUCK, _note("after")) == 5
            actor.stop()
    summaries = [e.get("summary") for e in json.loads(store.load(STUCK))["events"]]
    assert summaries[-2:] == ["first", "after"] and "given up" not in summaries
    assert actor.statistics().dropped == 1


async def test_lanes_end_with_their_work(tmp_path: Path) -> None:
    # A lane (a task) lives only while its request has asks to answer: no growth over time.
    workspace = Workspace(tmp_path)
    store = FileRecordStore(workspace)
    ids = [f"r{n}" for n in range(200)]
    for request_id in ids:
        path = workspace.request_path(request_id)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(encode_record(sample_record(3, request_id)))
    actor = ContextActor(ThreadedRecordStore(store), SMALL, requests_in_flight=16)

    async def touch(request_id: str) -> None:
        await ctx.append_event(request_id, _note("x"))
        await ctx.load(request_id)

    with anyio.fail_after(60):
        async with anyio.create_task_group() as group:
            group.start_soon(actor.serve)
            ctx = actor.handle(30)
            for start in range(0, len(ids), 16):  # at most 16 requests in flight: all taken
                async with anyio.create_task_group() as batch:
                    for request_id in ids[start : start + 16]:
                        batch.start_soon(touch, request_id)
            await anyio.wait_all_tasks_blocked()
            statistics = actor.statistics()
            assert (statistics.in_flight, statistics.queued) == (0, 0)
            assert statistics.served == 2 * len(ids)
            assert actor._mailbox._lanes == {}
            actor.stop()
