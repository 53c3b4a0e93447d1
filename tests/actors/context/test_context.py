from __future__ import annotations

import json
import os
import threading
import time
import unicodedata
from datetime import datetime
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.lowlevel import checkpoint
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from teams_runtime import (
    ActorStopped,
    AskTimeout,
    ContextHandle,
    Projection,
    PromptContextConfig,
    RecordError,
    UnknownRequestError,
    UnsafeRequestIdError,
    open_context,
    project_request,
)
from teams_runtime.actors.context._actor import ContextActor
from teams_runtime.codecs.context_asks import Project
from teams_runtime.codecs.request_records import encode_record
from teams_runtime.demo import sample_record
from teams_runtime.storage import FileRecordStore, Workspace
from teams_runtime.storage.files.file_store import SMALL_RECORD
from teams_runtime.storage.files.threaded import ThreadedRecordStore

from ...support.reference import reference_select
from ...support.strategies import configs, event, events, record

pytestmark = pytest.mark.anyio

SMALL = PromptContextConfig(recent_events=4, max_events=7)


def _write(root: Path, request_id: str, source: dict[str, Any]) -> Path:
    path = Workspace(root).request_path(request_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(encode_record(source))
    return path


def _same(left: Projection, right: Projection) -> bool:
    """Equal as a user sees it: counts, selection, notice and the decoded record.

    (Events appended by this process are held as encoded, those read from a file as they
    are indented there: the same JSON in different bytes.)
    """
    return (
        left.total_events == right.total_events
        and left.selected_indices == right.selected_indices
        and left.backfilled == right.backfilled
        and left.notice == right.notice
        and left.config == right.config
        and left.record == right.record
    )


def _events_on_disk(path: Path) -> list[Any]:
    events: list[Any] = json.loads(path.read_bytes())["events"]
    return events


async def test_project_equals_the_pure_projection(tmp_path: Path) -> None:
    path = _write(tmp_path, "req-1", sample_record(50, "req-1"))
    async with open_context(tmp_path, SMALL) as ctx:
        projection = await ctx.project("req-1")
    assert _same(projection, project_request(path.read_bytes(), SMALL))
    assert projection.compacted and projection.included_events == 7


async def test_no_config_means_defaults(tmp_path: Path) -> None:
    _write(tmp_path, "req-1", sample_record(40, "req-1"))
    async with open_context(tmp_path) as ctx:
        projection = await ctx.project("req-1")
    assert projection.config == PromptContextConfig()
    assert projection.compacted


async def test_append_keeps_format_keys_and_updates(tmp_path: Path) -> None:
    source = sample_record(3, "req-1")
    source["unknown"] = {"ünï": ["kept", 1.5, None]}
    path = _write(tmp_path, "req-1", source)
    async with open_context(tmp_path, SMALL) as ctx:
        count = await ctx.append_event(
            "req-1",
            {"type": "role_report", "actor": "qa", "summary": "done", "payload": {"role": "qa"}},
            updates={"status": "completed", "current_role": "qa"},
        )
        empty = await ctx.append_event("req-1", {"type": "resumed", "payload": {}})
    assert (count, empty) == (4, 5)
    data = path.read_bytes()
    on_disk = json.loads(data)
    assert data.decode() == json.dumps(on_disk, indent=2, ensure_ascii=False) + "\n"
    assert on_disk["unknown"] == {"ünï": ["kept", 1.5, None]}
    assert on_disk["status"] == "completed" and on_disk["current_role"] == "qa"
    assert on_disk["events"][:3] == source["events"]
    appended = on_disk["events"][3]
    assert next(iter(appended)) == "timestamp"
    assert datetime.fromisoformat(appended["timestamp"]).utcoffset() is not None
    assert "payload" not in on_disk["events"][4]  # payload only when non-empty


async def test_external_edit_is_seen_by_the_next_ask(tmp_path: Path) -> None:
    path = _write(tmp_path, "req-1", sample_record(30, "req-1"))
    async with open_context(tmp_path, SMALL) as ctx:
        first = await ctx.project("req-1")
        edited = sample_record(45, "req-1")
        path.write_bytes(encode_record(edited))
        second = await ctx.project("req-1")
    assert first.total_events == 30
    assert _same(second, project_request(path.read_bytes(), SMALL))


async def test_appends_by_another_writer_are_kept(tmp_path: Path) -> None:
    path = _write(tmp_path, "req-1", sample_record(10, "req-1"))
    async with open_context(tmp_path, SMALL) as ctx:
        await ctx.project("req-1")  # cache the summary
        async with open_context(tmp_path, SMALL) as other:  # another writer
            await other.append_event("req-1", {"type": "note", "summary": "other"})
        await ctx.append_event("req-1", {"type": "note", "summary": "mine"})
        projection = await ctx.project("req-1")
    summaries = [event.get("summary") for event in _events_on_disk(path)[-2:]]
    assert summaries == ["other", "mine"]
    assert _same(projection, project_request(path.read_bytes(), SMALL))


async def test_events_not_a_list_cannot_be_appended_to(tmp_path: Path) -> None:
    path = _write(tmp_path, "req-1", {"request_id": "req-1", "events": "oops"})
    before = path.read_bytes()
    async with open_context(tmp_path) as ctx:
        with pytest.raises(RecordError, match="`events` is a str, not a list"):
            await ctx.append_event("req-1", {"type": "note"})
        projection = await ctx.project("req-1")
    assert path.read_bytes() == before
    assert projection.record == {"request_id": "req-1", "events": "oops"}


@pytest.mark.parametrize(
    "request_id", ["", "..", "../x", "a/b", "a\\b", "a\x00b", "x\n", "a b", "a\u200bb", "a\u2215b"]
)
async def test_unsafe_ids_never_reach_the_filesystem(tmp_path: Path, request_id: str) -> None:
    async with open_context(tmp_path / "ws") as ctx:
        with pytest.raises(UnsafeRequestIdError):
            await ctx.project(request_id)
        with pytest.raises(UnsafeRequestIdError):
            await ctx.append_event(request_id, {"type": "note"})
    assert list(tmp_path.iterdir()) == []


async def test_unknown_request(tmp_path: Path) -> None:
    async with open_context(tmp_path) as ctx:
        with pytest.raises(UnknownRequestError, match="no request 'nope'"):
            await ctx.project("nope")
        with pytest.raises(UnknownRequestError):
            await ctx.append_event("nope", {"type": "note"})


async def test_asks_after_shutdown_fail_clearly(tmp_path: Path) -> None:
    _write(tmp_path, "req-1", sample_record(3, "req-1"))
    async with open_context(tmp_path) as ctx:
        await ctx.project("req-1")  # an answer the handle could have served itself
    with pytest.raises(ActorStopped, match="not running"):
        await ctx.project("req-1")


async def test_queued_asks_are_answered_on_shutdown(tmp_path: Path) -> None:
    _write(tmp_path, "req-1", sample_record(3, "req-1"))
    actor = ContextActor(_threaded(tmp_path), PromptContextConfig(), inbox_size=8)
    outcomes: list[str] = []

    async def ask() -> None:
        try:  # a write: reads of a small record are answered without the inbox
            await actor.handle(5).append_event("req-1", {"type": "note"})
            outcomes.append("answered")
        except ActorStopped:
            outcomes.append("stopped")

    with anyio.fail_after(10):
        async with anyio.create_task_group() as group:
            for _ in range(5):
                group.start_soon(ask)
            await anyio.wait_all_tasks_blocked()  # all five queued, actor not serving yet
            actor.stop()
    assert outcomes == ["stopped"] * 5


async def test_ask_deadline(tmp_path: Path) -> None:
    actor = ContextActor(_threaded(tmp_path), PromptContextConfig())  # never served
    with pytest.raises(AskTimeout, match=r"did not answer Project within 0\.05 s"):
        await actor.handle(0.05).project("req-1")
    actor.stop()


async def test_cancelled_asker_does_not_wedge_the_actor(tmp_path: Path) -> None:
    _write(tmp_path, "req-1", sample_record(20, "req-1"))
    async with open_context(tmp_path, SMALL) as ctx:
        with anyio.move_on_after(0):  # cancelled before the reply arrives
            await ctx.project("req-1")
        for _ in range(3):
            with anyio.CancelScope() as scope:
                scope.cancel()
                await ctx.append_event("req-1", {"type": "note"})
        projection = await ctx.project("req-1")
    assert projection.total_events >= 20


async def test_unknown_message_is_an_error_not_ignored(tmp_path: Path) -> None:
    async with open_context(tmp_path) as ctx:
        mailbox = ctx._mailbox
        with pytest.raises(TypeError, match=r"^the context actor does not understand"):
            await mailbox.ask("not a message", timeout=5)  # type: ignore[arg-type]
        with pytest.raises(UnknownRequestError):  # still serving
            await mailbox.ask(Project(request_id="x"), timeout=5)


class _StoreError(RecordError):
    """A store's error with an attribute of its own."""

    def __init__(self, message: str, detail: object) -> None:
        super().__init__(message)
        self.detail = detail


async def test_an_error_raised_in_the_actor_is_the_askers_same_object(tmp_path: Path) -> None:
    class Failing(FileRecordStore):
        def append(self, *args: Any, **kwargs: Any) -> Any:
            raise raised

    raised = _StoreError("the store refused", detail={"why": "test"})
    _write(tmp_path, "req-1", sample_record(3, "req-1"))
    store = ThreadedRecordStore(Failing(Workspace(tmp_path)))
    async with open_context(tmp_path, store=store) as ctx:
        with pytest.raises(_StoreError) as caught:
            await ctx.append_event("req-1", {"type": "note"})
    assert caught.value is raised and caught.value.detail == {"why": "test"}


async def test_many_tasks_ask_and_append_at_once(tmp_path: Path) -> None:
    ids = [f"req-{n}" for n in range(4)]
    for request_id in ids:
        _write(tmp_path, request_id, sample_record(20, request_id))
    writers, per_writer = 6, 15

    async def write(request_id: str, writer: int) -> None:
        for n in range(per_writer):
            await ctx.append_event(request_id, {"type": "note", "actor": f"w{writer}",
                                                "summary": f"{writer}:{n}"})  # fmt: skip

    async def read(request_id: str) -> None:
        for _ in range(30):
            projection = await ctx.project(request_id)
            assert projection.included_events <= SMALL.max_events
            await checkpoint()

    with anyio.fail_after(60):
        async with open_context(tmp_path, SMALL) as ctx, anyio.create_task_group() as group:
            for request_id in ids:
                for writer in range(writers):
                    group.start_soon(write, request_id, writer)
                group.start_soon(read, request_id)
    for request_id in ids:
        path = Workspace(tmp_path).request_path(request_id)
        notes = [e["summary"] for e in _events_on_disk(path)[20:]]
        assert len(notes) == writers * per_writer
        for writer in range(writers):  # each writer's order kept
            mine = [note for note in notes if note.startswith(f"{writer}:")]
            assert mine == [f"{writer}:{n}" for n in range(per_writer)]
        assert _same(project_request(path.read_bytes(), SMALL), await _fresh(tmp_path, request_id))


async def _fresh(root: Path, request_id: str) -> Any:
    async with open_context(root, SMALL) as ctx:
        return await ctx.project(request_id)


_operation = st.one_of(
    st.tuples(st.just("append"), st.lists(event, min_size=1, max_size=4)),
    st.tuples(st.just("edit"), events),
    st.tuples(st.just("project"), st.none()),
    st.tuples(st.just("restart"), st.none()),  # a cold start: reads through the index
    st.tuples(st.just("drop-index"), st.none()),
)


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(history=events, config=configs(), operations=st.lists(_operation, max_size=8))
def test_cached_answers_equal_the_pure_policy(
    tmp_path_factory: pytest.TempPathFactory,
    history: list[Any],
    config: PromptContextConfig,
    operations: list[tuple[str, Any]],
) -> None:
    root = tmp_path_factory.mktemp("ws")

    async def scenario() -> None:
        current = list(history)
        paths = Workspace(root).record_paths("req-1")
        path = _write(root, "req-1", record(current))
        steps = [("project", None), *operations]
        while steps:
            async with open_context(root, config) as ctx:  # "restart": a cold start via the index
                while steps:
                    kind, value = steps.pop(0)
                    if kind == "append":
                        objects = [v if isinstance(v, dict) else {"value": v} for v in value]
                        await ctx.append_events("req-1", objects)
                        current = json.loads(path.read_bytes())["events"]
                    elif kind == "edit":
                        current = value
                        path.write_bytes(encode_record(record(current)))
                        os.utime(path, ns=(1, len(current) + 1))  # a different version, always
                    elif kind == "drop-index":
                        paths.index.unlink(missing_ok=True)
                    projection = await ctx.project("req-1")
                    expected = reference_select(
                        current, config.enabled, config.recent_events, config.max_events
                    )
                    assert list(projection.selected_indices) == expected
                    assert _same(projection, project_request(path.read_bytes(), config))
                    if kind == "restart":
                        break

    anyio.run(scenario)


async def test_load_returns_the_whole_record_as_on_disk(tmp_path: Path) -> None:
    _write(tmp_path, "req-1", sample_record(30, "req-1"))
    async with open_context(tmp_path, SMALL) as ctx:
        await ctx.append_event("req-1", {"type": "note", "summary": "after"})
        fields = await ctx.load("req-1")
    assert len(fields["events"]) == 31
    assert json.loads(bytes(fields["events"][-1]))["summary"] == "after"
    assert fields["request_id"] == "req-1"


async def test_a_warm_answer_is_served_without_the_actor_until_the_record_changes(
    tmp_path: Path,
) -> None:
    _write(tmp_path, "req-1", sample_record(30, "req-1"))
    async with open_context(tmp_path) as ctx:
        first = await ctx.project("req-1")
        served = ctx._mailbox.statistics().served
        assert await ctx.project("req-1") is first  # the published projection, same object
        assert ctx._mailbox.statistics().served == served  # the actor was not asked
        await ctx.append_event("req-1", {"type": "note", "actor": "qa", "summary": "x"})
        after = await ctx.project("req-1")
        assert after.total_events == 31  # the append changed the version: asked afresh
        path = Workspace(tmp_path).request_path("req-1")
        path.write_bytes(encode_record(sample_record(5, "req-1")))  # another program
        assert (await ctx.project("req-1")).total_events == 5


def _threaded(root: Path) -> ThreadedRecordStore:
    """The workspace's file store as the actor awaits it (its blocking calls in threads)."""
    return ThreadedRecordStore(FileRecordStore(Workspace(root)))


class _WhoReads(FileRecordStore):
    """A file store that notes who reads a record: a task on the event loop (the asker's, named
    "a role", or another: the actor's), or a worker thread."""

    def __init__(self, workspace: Workspace) -> None:
        super().__init__(workspace)
        self.loop_thread = threading.get_ident()
        self.readers: list[str] = []

    def _note(self, request_id: str) -> None:
        if threading.get_ident() != self.loop_thread:
            self.readers.append(f"{request_id} in a worker thread")
        elif anyio.get_current_task().name == "a role":
            self.readers.append(f"{request_id} in the asker's task")
        else:
            self.readers.append(f"{request_id} by the actor on the loop")

    def read_nowait(self, request_id: str, *, tail: int | None) -> Any:
        found = super().read_nowait(request_id, tail=tail)
        if found is not None:
            self._note(request_id)
        return found

    def read(self, request_id: str, *, tail: int | None) -> Any:
        self._note(request_id)
        return super().read(request_id, tail=tail)


async def test_only_the_actor_reads_a_small_record_in_its_task_a_large_one_in_a_thread(
    tmp_path: Path,
) -> None:
    _write(tmp_path, "small", sample_record(3, "small"))
    large = _write(tmp_path, "large", sample_record(400, "large"))
    assert large.stat().st_size > SMALL_RECORD
    store = _WhoReads(Workspace(tmp_path))
    actor = ContextActor(ThreadedRecordStore(store), PromptContextConfig())
    async with anyio.create_task_group() as group:
        group.start_soon(actor.serve)

        async def asker(handle: ContextHandle) -> None:
            small = await handle.project("small")
            assert small == project_request(Workspace(tmp_path).request_path("small").read_bytes())
            assert await handle.project("large") == project_request(large.read_bytes())
            _write(tmp_path, "small", sample_record(5, "small"))  # another program rewrites it
            assert (await handle.project("small")).total_events == 5
            actor.stop()

        group.start_soon(asker, actor.handle(5), name="a role")
    assert store.readers == [
        "small by the actor on the loop",  # a small file needs no worker thread's round trip
        "large in a worker thread",
        "small by the actor on the loop",  # a changed record is read afresh, by the actor
    ]
    assert actor.statistics().served == 3  # each read was an ask, through the inbox


async def test_a_write_withdraws_the_published_answer_before_it_is_answered(
    tmp_path: Path,
) -> None:
    # A store whose versions never change (as a coarse clock could make them): the published
    # answer would look current forever, but the asker still gets its own write back.
    _write(tmp_path, "req-1", sample_record(3, "req-1"))

    class FixedVersion(FileRecordStore):
        def version(self, request_id: str) -> Any:
            return "always the same"

    actor = ContextActor(ThreadedRecordStore(FixedVersion(Workspace(tmp_path))), SMALL)
    async with anyio.create_task_group() as group:
        group.start_soon(actor.serve)
        handle = actor.handle(5)
        assert (await handle.project("req-1")).total_events == 3
        assert (await handle.project("req-1")).total_events == 3  # the published projection
        await handle.append_event("req-1", {"type": "note", "summary": "mine"})
        assert (await handle.project("req-1")).total_events == 4
        actor.stop()


async def test_an_id_in_nfd_is_answered_from_the_nfc_ids_cache(tmp_path: Path) -> None:
    # Two spellings of one id name one record: the second ask must not read it again (nor keep
    # a second copy of its digest under the other spelling).
    nfc = "요청-1"
    _write(tmp_path, nfc, sample_record(3, nfc))
    reads: list[str] = []

    class CountingStore(FileRecordStore):
        def read_nowait(self, request_id: str, *, tail: int | None) -> Any:
            reads.append(request_id)
            return super().read_nowait(request_id, tail=tail)

    store = ThreadedRecordStore(CountingStore(Workspace(tmp_path)))
    actor = ContextActor(store, PromptContextConfig())
    async with anyio.create_task_group() as group:
        group.start_soon(actor.serve)
        handle = actor.handle(5)
        first = await handle.project(nfc)
        assert await handle.project(unicodedata.normalize("NFD", nfc)) == first
        assert reads == [nfc]
        actor.stop()


class _LingeringCache(dict[str, Any]):
    """The actor's cache, lingering in every change made off the event loop's thread (as a
    thread that loses the GIL there would), so a change on the loop lands inside it."""

    def __init__(self) -> None:
        super().__init__()
        self.loop_thread = threading.get_ident()
        self.changed_off_loop = 0

    def _linger(self) -> None:
        if threading.get_ident() != self.loop_thread:
            self.changed_off_loop += 1
            time.sleep(0.001)  # lets the loop run: the GIL is free while we sleep

    def __setitem__(self, key: str, value: Any) -> None:
        self._linger()
        super().__setitem__(key, value)

    def __delitem__(self, key: str) -> None:
        self._linger()
        super().__delitem__(key)

    def pop(self, key: str, *default: Any) -> Any:
        self._linger()
        return super().pop(key, *default)


async def test_worker_threads_leave_the_cache_to_the_event_loop(tmp_path: Path) -> None:
    # A large record is read in a worker thread while small ones are read by the actor in its
    # own task, every read evicting another (one request cached). The cache is the loop's
    # alone: a thread that evicted too would delete what the loop had just deleted (KeyError),
    # or iterate while the loop resized it.
    large = _write(tmp_path, "large", sample_record(400, "large"))
    assert large.stat().st_size > SMALL_RECORD
    for n in range(2):
        _write(tmp_path, f"small-{n}", sample_record(3, f"small-{n}"))
    actor = ContextActor(_threaded(tmp_path), PromptContextConfig(), max_cached=1)
    cache = actor._cache = _LingeringCache()
    expected = project_request(large.read_bytes())
    reading = True

    async def read_large() -> None:
        nonlocal reading
        for _ in range(40):
            assert await handle.project("large") == expected
        reading = False

    async def read_small() -> None:
        turn = 0
        while reading:
            assert (await handle.project(f"small-{turn % 2}")).total_events == 3
            turn += 1

    with anyio.fail_after(60):
        async with anyio.create_task_group() as group:
            group.start_soon(actor.serve)
            handle = actor.handle(30)
            async with anyio.create_task_group() as readers:
                readers.start_soon(read_large)
                readers.start_soon(read_small)
            actor.stop()
    assert actor.statistics().served >= 20  # the large reads did go to worker threads
    assert cache.changed_off_loop == 0
