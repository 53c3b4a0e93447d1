"""A store that cannot be fooled: bad indexes, racing writers, odd records, retries.

Each test here failed on the code before the store-trust change (see docs/operations.md,
"Threat model").
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from teams_runtime import PromptContextConfig, RecordError, Team, open_context, project_request
from teams_runtime.cli import main
from teams_runtime.codecs.envelopes import MessageEnvelope
from teams_runtime.codecs.model._contract import validate_reply
from teams_runtime.codecs.request_records import encode_event, encode_record
from teams_runtime.demo import sample_record
from teams_runtime.monitoring import Filters, aggregate, log_files, render_report
from teams_runtime.storage import FileRecordStore, FileWorkQueue, Workspace
from teams_runtime.storage import local_files as storage_files
from teams_runtime.storage.files._index import (
    RecordIndex,
    encode_index,
    load_index,
)
from teams_runtime.storage.files.file_store import append_to_record, create_record
from teams_runtime.storage.files.threaded import ThreadedRecordStore

from ...support.paths import FAKE_MODEL

EXAMPLES = int(os.environ.get("TEAMS_RUNTIME_FUZZ_EXAMPLES", "60"))
_DIGEST = 16


def _workspace(root: Path) -> Workspace:
    workspace = Workspace(root)
    workspace.requests_dir.mkdir(parents=True, exist_ok=True)
    if not workspace.config_path.exists():
        workspace.config_path.write_text("")  # the defaults
    return workspace


def _create(workspace: Workspace, request_id: str, events: int) -> Path:
    create_record(workspace.record_paths(request_id), sample_record(events, request_id))
    return workspace.request_path(request_id)


def _events_on_disk(path: Path) -> list[Any]:
    events: list[Any] = json.loads(path.read_bytes()).get("events", [])
    return events


async def _fresh_projection(root: Path, request_id: str, config: PromptContextConfig) -> Any:
    async with open_context(root, config) as ctx:
        return await ctx.project(request_id)


# --- 1. an index is a cache, never an authority ---------------------------------------------


def _payload(index_bytes: bytes) -> RecordIndex:
    return msgspec.msgpack.decode(index_bytes[_DIGEST:], type=RecordIndex)


@st.composite
def _mutated(draw: st.DrawFn, original: bytes, other: bytes) -> bytes:
    kind = draw(st.sampled_from(["random", "truncate", "flip", "field", "field-resigned", "other"]))
    if kind == "random":
        return draw(st.binary(max_size=300))
    if kind == "truncate":
        return original[: draw(st.integers(0, len(original) - 1))]
    if kind == "flip":
        at = draw(st.integers(0, len(original) - 1))
        return (
            original[:at] + bytes([original[at] ^ draw(st.integers(1, 255))]) + original[at + 1 :]
        )
    if kind == "other":
        return other
    index = _payload(original)
    name = draw(st.sampled_from(["count", "events_start", "events_end", "tail", "evidence"]))
    number = draw(st.integers(-(2**40), 2**40) | st.integers(-3, 3))
    if name == "tail" and index.tail:
        at = draw(st.integers(0, len(index.tail) - 1))
        tail = list(index.tail)
        offset, length = tail[at]
        tail[at] = (offset + number, length) if draw(st.booleans()) else (offset, length + number)
        changed = msgspec.structs.replace(index, tail=tail)
    elif name == "evidence" and index.evidence:
        role = draw(st.sampled_from(sorted(index.evidence)))
        position, (offset, length) = index.evidence[role]
        evidence = dict(index.evidence)
        evidence[role] = draw(
            st.sampled_from(
                [(position + number, (offset, length)), (position, (offset + number, length))]
            )
        )
        changed = msgspec.structs.replace(index, evidence=evidence)
    elif name in ("count", "events_start", "events_end"):
        changed = msgspec.structs.replace(index, **{name: getattr(index, name) + number})
    else:
        changed = msgspec.structs.replace(index, count=index.count + 1)
    if kind == "field-resigned":
        return encode_index(changed)  # a well-formed index that lies about its record
    payload = msgspec.msgpack.encode(changed)
    return original[:_DIGEST] + payload  # the digest of what it was


@pytest.mark.anyio
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data(), events=st.integers(0, 40))
async def test_whatever_an_index_holds_answers_and_appends_stay_right(
    tmp_path_factory: pytest.TempPathFactory, data: st.DataObject, events: int
) -> None:
    root = tmp_path_factory.mktemp("index")
    workspace = _workspace(root)
    path = _create(workspace, "req-1", events)
    _create(workspace, "req-2", 25)
    paths = workspace.record_paths("req-1")
    original = paths.index.read_bytes()
    other = workspace.record_paths("req-2").index.read_bytes()
    mutated = data.draw(_mutated(original, other))
    paths.index.write_bytes(mutated)
    resigned = mutated[:_DIGEST] != original[:_DIGEST] and _payload_ok(mutated)
    config = PromptContextConfig(recent_events=4, max_events=7)
    before = _events_on_disk(path)
    projection = await _fresh_projection(root, "req-1", config)
    if not resigned:  # a forged, re-signed index may mislead selection (documented), not crash
        assert projection == project_request(path.read_bytes(), config)
    async with open_context(root, config) as ctx:
        count = await ctx.append_event("req-1", {"type": "note", "actor": "qa", "summary": "x"})
    after = _events_on_disk(path)
    assert after[:-1] == before and after[-1]["summary"] == "x"
    assert count == len(after) or resigned
    # The append laid a correct index down: the next cold read equals the file again.
    projection = await _fresh_projection(root, "req-1", config)
    if not resigned:
        assert projection == project_request(path.read_bytes(), config)
        assert load_index(paths, storage_files.file_version(path)) is not None  # type: ignore[arg-type]


def _payload_ok(data: bytes) -> bool:
    try:
        _payload(data)
    except msgspec.DecodeError:
        return False
    return True


def test_an_out_of_range_index_never_crashes_the_cli(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    workspace = _workspace(tmp_path)
    path = _create(workspace, "req-1", 7)
    paths = workspace.record_paths("req-1")
    index = _payload(paths.index.read_bytes())
    lie = msgspec.structs.replace(index, events_start=10**9, events_end=10**9 + 5, count=1)
    paths.index.write_bytes(encode_index(lie))
    for argv in (["project", "req-1"], ["prompt", "req-1", "--role", "qa"]):
        assert main([*argv, "--workspace", str(tmp_path)]) == 0
        assert "Traceback" not in capsys.readouterr().err
    assert main(["append", "req-1", "--type", "note", "--actor", "qa", "--summary", "s",
                 "--workspace", str(tmp_path)]) == 0  # fmt: skip
    assert len(_events_on_disk(path)) == 8


# --- 2. the version recorded is the version written -------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize(
    "foreign_events", [pytest.param(3, id="smaller"), pytest.param(60, id="larger")]
)
async def test_a_file_renamed_in_after_the_write_is_seen_and_never_crashes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, foreign_events: int
) -> None:
    workspace = _workspace(tmp_path)
    path = _create(workspace, "req-1", 20)
    foreign = tmp_path / "foreign.json"
    foreign.write_bytes(encode_record(sample_record(foreign_events, "req-1")))
    real_fsync = os.fsync
    armed = [True]

    def then_replace(fd: int) -> None:
        real_fsync(fd)
        # The folder's fsync comes right after our rename and before the version is taken.
        if armed[0] and stat.S_ISDIR(os.fstat(fd).st_mode):
            armed[0] = False
            os.replace(foreign, path)  # another program, right after our rename

    monkeypatch.setattr(os, "fsync", then_replace)
    config = PromptContextConfig()
    async with open_context(tmp_path, config) as ctx:
        await ctx.project("req-1")  # warm
        await ctx.append_event("req-1", {"type": "note", "actor": "qa", "summary": "ours"})
        assert await ctx.project("req-1") == project_request(path.read_bytes(), config)
        await ctx.append_event("req-1", {"type": "note", "actor": "qa", "summary": "next"})
    after = _events_on_disk(path)
    assert len(after) == foreign_events + 1 and after[-1]["summary"] == "next"
    assert await _fresh_projection(tmp_path, "req-1", config) == project_request(
        path.read_bytes(), config
    )


# --- 3. a record without an `events` key -----------------------------------------------------


@pytest.mark.anyio
async def test_appends_to_a_record_without_events_show_in_projections(tmp_path: Path) -> None:
    workspace = _workspace(tmp_path)
    path = workspace.request_path("req-1")
    path.write_text('{\n  "request_id": "req-1",\n  "status": "queued"\n}\n')
    config = PromptContextConfig(recent_events=2, max_events=3)
    async with open_context(tmp_path, config) as ctx:
        await ctx.project("req-1")  # warm, with no events key
        for n in range(5):
            await ctx.append_event("req-1", {"type": "note", "actor": "qa", "summary": f"n{n}"})
        warm = await ctx.project("req-1")
        assert warm == project_request(path.read_bytes(), config)
        assert "events" in warm.record and warm.total_events == 5
        await ctx.append_event(
            "req-1",
            {"type": "note", "actor": "qa", "summary": "moved"},
            updates={"request_id": "req-9"},
        )
        renamed = await ctx.project("req-1")
    assert renamed.notice["canonical_request"] == "./.teams_runtime/requests/req-9.json"
    assert renamed == project_request(path.read_bytes(), config)


# --- 4. temp files cannot collide -------------------------------------------------------------


def test_one_records_cleanup_never_removes_another_records_temp_file(tmp_path: Path) -> None:
    workspace = _workspace(tmp_path)
    _create(workspace, "a", 3)
    _create(workspace, "a.json.b", 3)
    # What a live writer of `a.json.b` has on disk while it writes.
    live = workspace.requests_dir / f".a.json.b.json~{os.getpid()}.0badcafe.tmp"
    live.write_bytes(b"{}")
    append_to_record(workspace.record_paths("a"), [encode_event({"type": "x"})], {})
    assert live.exists()


def test_concurrent_appends_to_ids_that_share_a_prefix_all_succeed(tmp_path: Path) -> None:
    workspace = _workspace(tmp_path)
    ids = ["a", "a.json.b", "a.json.b.json.c"]
    for request_id in ids:
        _create(workspace, request_id, 0)
    failures: list[BaseException] = []

    def writer(request_id: str) -> None:
        for n in range(40):
            try:
                append_to_record(
                    workspace.record_paths(request_id), [encode_event({"type": "n", "n": n})], {}
                )
            except BaseException as exc:  # collected and asserted below
                failures.append(exc)

    threads = [threading.Thread(target=writer, args=(i,)) for i in ids for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    for request_id in ids:
        assert len(_events_on_disk(workspace.request_path(request_id))) == 80


# --- 5. an append is done exactly once --------------------------------------------------------


@pytest.mark.anyio
async def test_a_keyed_append_retried_is_written_once_with_the_same_answer(tmp_path: Path) -> None:
    workspace = _workspace(tmp_path)
    path = _create(workspace, "req-1", 10)
    async with open_context(tmp_path) as ctx:
        first = await ctx.append_events(
            "req-1", [{"type": "a"}, {"type": "b"}], updates={"status": "x"}, key="env-1"
        )
        await ctx.append_event("req-1", {"type": "other"})
        again = await ctx.append_events("req-1", [{"type": "a"}, {"type": "b"}], key="env-1")
    assert first == again == 12
    types = [event["type"] for event in _events_on_disk(path)]
    assert types[10:] == ["a", "b", "other"]


@pytest.mark.anyio
async def test_an_append_that_timed_out_is_not_duplicated_by_its_retry(tmp_path: Path) -> None:
    workspace = _workspace(tmp_path)
    path = _create(workspace, "req-1", 5)
    store = FileRecordStore(workspace)
    slow = _Slow(store, seconds=0.4)
    async with open_context(tmp_path, store=ThreadedRecordStore(slow), ask_timeout=0.1) as ctx:  # type: ignore[arg-type]
        with pytest.raises(Exception, match="did not answer"):
            await ctx.append_event("req-1", {"type": "note"}, key="env-7")
        # The first write goes on in its worker thread: the retry comes after it is on disk.
        assert await anyio.to_thread.run_sync(slow.appended.wait, 10)
        slow.seconds = 0
        assert await ctx.append_event("req-1", {"type": "note"}, key="env-7") == 6
    assert len(_events_on_disk(path)) == 6


@pytest.mark.anyio
async def test_an_append_waits_as_long_as_the_store_may_retry_it(tmp_path: Path) -> None:
    # A store that may retry an append for a while (NATS: other writers holding the request)
    # gets that long beyond the ask timeout: its own answer (or error) comes, not AskTimeout.
    workspace = _workspace(tmp_path)
    path = _create(workspace, "req-1", 5)
    retrying = _Retrying(FileRecordStore(workspace), seconds=0.4)
    async with open_context(tmp_path, store=ThreadedRecordStore(retrying), ask_timeout=0.1) as ctx:  # type: ignore[arg-type]
        assert await ctx.append_event("req-1", {"type": "note"}) == 6
        assert await ctx.create("req-2", {"request_id": "req-2", "events": []})
    assert len(_events_on_disk(path)) == 6


class _Slow:
    """A RecordStore that takes its time (a busy disk: its sleeps are the scenario); it says
    when an append has been written (``appended``)."""

    def __init__(self, store: FileRecordStore, seconds: float) -> None:
        self._store = store
        self.seconds = seconds
        self.appended = threading.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def read(self, request_id: str, *, tail: int | None) -> Any:
        time.sleep(self.seconds)
        return self._store.read(request_id, tail=tail)

    def append(self, *args: Any, **kwargs: Any) -> Any:
        time.sleep(self.seconds)
        outcome = self._store.append(*args, **kwargs)
        self.appended.set()
        return outcome


class _Retrying(_Slow):
    """A slow RecordStore whose writes may retry for up to a second (it says so)."""

    append_seconds = 1.0

    def create(self, *args: Any, **kwargs: Any) -> Any:
        time.sleep(self.seconds)
        return self._store.create(*args, **kwargs)


def _team_workspace(root: Path, mode: str = "valid") -> Workspace:
    command = json.dumps([sys.executable, str(FAKE_MODEL), mode, str(root / "model-state")])
    root.mkdir(parents=True, exist_ok=True)
    (root / "team_runtime.yaml").write_text(
        f"model:\n  backend: command\n  command: {command}\n  timeout_seconds: 10\n"
    )
    return _workspace(root)


@pytest.mark.anyio
async def test_the_same_envelope_delivered_twice_reports_once(tmp_path: Path) -> None:
    workspace = _team_workspace(tmp_path)
    path = _create(workspace, "req-1", 3)
    envelope = MessageEnvelope(
        request_id="req-1", sender="user", target="qa", scope="x", envelope_id="env-same"
    )
    queue = FileWorkQueue(workspace)
    queue.put(envelope)
    with anyio.fail_after(60):
        await Team(tmp_path).run(once=True)
    queue.put(envelope)  # redelivered (a crash before its envelope left the queue)
    with anyio.fail_after(60):
        await Team(tmp_path).run(once=True)
    reports = [e for e in _events_on_disk(path) if e.get("append_key") == "qa/env-same"]
    assert [e["type"] for e in reports] == ["role_report"]


# --- 6. a timeout is not a rejection ----------------------------------------------------------


@pytest.mark.anyio
async def test_a_projection_timeout_leaves_the_envelope_queued(tmp_path: Path) -> None:
    workspace = _team_workspace(tmp_path)
    _create(workspace, "req-1", 3)
    FileWorkQueue(workspace).put(MessageEnvelope(request_id="req-1", sender="u", target="qa"))
    slow = _Slow(FileRecordStore(workspace), seconds=0.5)
    store = ThreadedRecordStore(slow)  # type: ignore[arg-type]
    team = Team(tmp_path, store=store, ask_timeout=0.1, deferred_wait=0)
    with anyio.fail_after(60):
        summary = await team.run(once=True)
    assert (summary.rejected, summary.deferred) == (0, 1)
    assert not (workspace.queue_dir / "rejected").exists()
    assert sum(FileWorkQueue(workspace).counts().values()) == 1


# --- 7-9. odd records -------------------------------------------------------------------------


def test_a_record_with_a_key_twice_is_refused_and_untouched(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    workspace = _workspace(tmp_path)
    path = workspace.request_path("req-1")
    events = json.dumps([{"type": "note", "n": n} for n in range(30)])
    text = f'{{"request_id": "req-1", "events": {events}, "status": "x", "events": []}}'
    path.write_text(text)
    code = main(["append", "req-1", "--type", "t", "--actor", "qa", "--summary", "s",
                 "--workspace", str(tmp_path)])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and str(path) in err and "'events' appears more than once" in err
    assert path.read_text() == text
    assert main(["project", "req-1", "--workspace", str(tmp_path)]) == 2


def test_append_from_a_deeply_nested_line_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    workspace = _workspace(tmp_path)
    path = _create(workspace, "req-1", 2)
    before = path.read_bytes()
    lines = tmp_path / "events.jsonl"
    lines.write_text('{"type": "ok"}\n' + '{"a": ' + "[" * 1000 + "]" * 1000 + "}\n")
    code = main(["append", "req-1", "--from", str(lines), "--workspace", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("teams-runtime: error:") and "Traceback" not in err
    assert "line 2" in err and path.read_bytes() == before


def test_numbers_out_of_range_are_carried_and_surrogates_are_record_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    workspace = _workspace(tmp_path)
    odd = workspace.request_path("req-odd")
    events = [
        '{"type": "role_report", "actor": "qa", "payload": {"role": 1e400, "status": "ok"}}',
        '{"type": "note", "n": 1e400}',
    ] * 10
    odd.write_text('{"request_id": "req-odd", "events": [' + ", ".join(events) + "]}")
    config = PromptContextConfig(recent_events=2, max_events=3)
    projection = anyio.run(_fresh_projection, tmp_path, "req-odd", config)
    assert b"1e400" in projection.fields["events"]
    assert main(["prompt", "req-odd", "--role", "qa", "--workspace", str(tmp_path)]) == 0
    assert "1e400" in capsys.readouterr().out
    bad = workspace.request_path("req-bad")
    bad.write_text('{"request_id": "req-bad", "events": [{"summary": "\\ud800"}]}')
    code = main(["project", "req-bad", "--workspace", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2 and str(bad) in err and "Traceback" not in err

    async def append_a_surrogate() -> None:
        async with open_context(tmp_path) as ctx:
            await ctx.append_event("req-odd", {"type": "x", "summary": "\ud800"})

    with pytest.raises(RecordError, match="cannot be encoded"):
        anyio.run(append_a_surrogate)


def test_a_deeply_nested_answer_is_an_invalid_answer() -> None:
    checked = validate_reply("[" * 5000 + "]" * 5000, kind="task", request_id="r", role="qa")
    assert checked.answer is None and checked.issues == [
        "The answer is nested too deeply: send one flat JSON object."
    ]


@pytest.mark.anyio
async def test_a_model_answering_deep_nesting_is_repaired_then_failed(tmp_path: Path) -> None:
    script = tmp_path / "deep_model.py"
    script.write_text("import sys\nsys.stdin.read()\nprint('[' * 5000 + ']' * 5000)\n")
    root = tmp_path / "ws"
    root.mkdir()
    (root / "team_runtime.yaml").write_text(
        f"model:\n  backend: command\n  command: {json.dumps([sys.executable, str(script)])}\n"
    )
    workspace = _workspace(root)
    path = _create(workspace, "req-1", 3)
    FileWorkQueue(workspace).put(MessageEnvelope(request_id="req-1", sender="u", target="qa"))
    with anyio.fail_after(60):
        summary = await Team(root).run(once=True)
    assert (summary.failed, summary.deferred, summary.prompts_sent) == (1, 0, 3)
    record = json.loads(path.read_bytes())
    assert record["result"]["error"] == "contract_validation_failed"


# --- 11. metrics never crash -----------------------------------------------------------------


def _record_line(**overrides: Any) -> str:
    base = {
        "schema_version": 1, "timestamp": "2026-11-30T10:00:00+00:00", "role": "qa",
        "purpose": "role_task", "request_id": "r", "enabled": True, "recent_events": 8,
        "max_events": 16, "total_events": 20, "included_events": 16, "omitted_events": 4,
        "compacted": True, "eligible": True, "backfilled_roles": [], "prompt_chars": 100,
        "full_history_chars": 200,
    }  # fmt: skip
    return json.dumps({**base, **overrides})


def test_metrics_skip_huge_numbers_and_compare_zero_sized_periods(tmp_path: Path) -> None:
    logs = tmp_path / ".teams_runtime" / "logs"
    logs.mkdir(parents=True)
    (logs / "prompt_context.jsonl").write_text(
        "\n".join([
            _record_line(prompt_chars=2**70),
            _record_line(),
            _record_line(enabled=False, prompt_chars=0, full_history_chars=0),
        ]) + "\n"
    )  # fmt: skip
    report = aggregate(log_files(logs), Filters(), ["enabled"])
    assert report.skipped_lines == 1 and report.totals.prompts == 2
    assert "Comparison" in render_report(report)


# --- 12. logs stay content-free for broken input -----------------------------------------------


@pytest.mark.anyio
async def test_broken_envelopes_leave_no_values_in_logs(tmp_path: Path) -> None:
    from teams_runtime.monitoring import configure_logging, stop_logging

    workspace = _team_workspace(tmp_path)
    folder = workspace.queue_dir / "qa"
    folder.mkdir(parents=True)
    (folder / "1-target.json").write_text(
        '{"request_id": "req-1", "sender": "x", "target": "SECRET-TARGET-42"}'
    )
    (folder / "2-id.json").write_text(
        '{"request_id": "../SECRET-ID-43", "sender": "x", "target": "qa"}'
    )
    configure_logging(workspace, console_level="DEBUG")
    try:
        with anyio.fail_after(60):
            summary = await Team(tmp_path).run(once=True)
    finally:
        stop_logging()
    assert summary.rejected == 2
    for log in workspace.logs_dir.iterdir():
        text = log.read_text()
        assert "SECRET-TARGET-42" not in text and "SECRET-ID-43" not in text
    reasons = "".join(p.read_text() for p in (workspace.queue_dir / "rejected").glob("*.reason"))
    assert "SECRET" not in reasons and "1-target.json" in reasons


# --- 13. writes never follow planted links -----------------------------------------------------


def test_a_linked_lock_file_is_refused_and_creates_nothing_outside(tmp_path: Path) -> None:
    workspace = _workspace(tmp_path / "ws")
    _create(workspace, "req-1", 2)
    paths = workspace.record_paths("req-1")
    outside = tmp_path / "outside-lock"
    paths.lock.unlink()
    paths.lock.symlink_to(outside)
    with pytest.raises(RecordError, match="symbolic link"):
        append_to_record(paths, [encode_event({"type": "x"})], {})
    assert not outside.exists()


def test_a_linked_index_folder_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    workspace = _workspace(tmp_path / "ws")
    path = _create(workspace, "req-1", 2)
    outside = tmp_path / "outside-index"
    outside.mkdir()
    for index in workspace.index_dir.iterdir():
        index.unlink()
    workspace.index_dir.rmdir()
    workspace.index_dir.symlink_to(outside)
    before = path.read_bytes()
    with pytest.raises(RecordError, match="symbolic link"):
        append_to_record(workspace.record_paths("req-1"), [encode_event({"type": "x"})], {})
    assert list(outside.iterdir()) == [] and path.read_bytes() == before


def test_a_planted_reason_link_does_not_overwrite_an_outside_file(tmp_path: Path) -> None:
    workspace = _workspace(tmp_path / "ws")
    queue = FileWorkQueue(workspace)
    folder = workspace.queue_dir / "qa"
    folder.mkdir(parents=True)
    (folder / "1-bad.json").write_text("not json")
    rejected = workspace.queue_dir / "rejected"
    rejected.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    (rejected / "qa-1-bad.json.reason").symlink_to(victim)
    (claim,) = queue.claim("qa", 10)
    queue.reject(claim, claim.problem)
    assert victim.read_text() == "keep me"
    assert "not valid JSON" in (rejected / "qa-1-bad.json.reason").read_text()


def test_a_linked_requests_or_logs_folder_is_refused(tmp_path: Path) -> None:
    from teams_runtime.monitoring import configure_logging, stop_logging

    workspace = Workspace(tmp_path / "ws")
    workspace.runtime_dir.mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    workspace.requests_dir.symlink_to(outside)
    with pytest.raises(RecordError, match="symbolic link"):
        create_record(workspace.record_paths("req-1"), sample_record(1, "req-1"))
    assert list(outside.iterdir()) == []
    workspace.logs_dir.symlink_to(outside)
    try:
        with pytest.raises(RecordError, match="symbolic link"):
            configure_logging(workspace)
    finally:
        stop_logging()
    assert list(outside.iterdir()) == []


# --- what an outside attack found -----------------------------------------------------------


def _plant(workspace: Workspace, relative: str, outside: Path) -> None:
    link = workspace.runtime_dir / relative
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(outside, target_is_directory=True)


@pytest.mark.parametrize(
    "relative",
    [
        pytest.param("queue/qa", id="role-folder"),
        pytest.param("queue/claimed/evil", id="claim-folder"),
        pytest.param("queue/deferred/qa", id="deferred-role"),
        pytest.param("queue/deferred", id="deferred"),
        pytest.param("queue", id="queue"),
    ],
)
def test_linked_queue_folders_are_refused_and_nothing_outside_moves(
    tmp_path: Path, relative: str, capsys: pytest.CaptureFixture[str]
) -> None:
    workspace = _team_workspace(tmp_path / "ws")
    _create(workspace, "r1", 2)
    outside = tmp_path / "outside"
    (outside / "qa").mkdir(parents=True)
    precious = [outside / "x-r1.json", outside / "qa" / "00000000000000000001-abcdef-r1.json"]
    for path in precious:
        path.write_text('{"precious": true}')
    _plant(workspace, relative, outside)
    for argv in (["run", "--once"], ["cancel", "r1"], ["status"]):
        code = main([*argv, "--workspace", str(workspace.root)])
        err = capsys.readouterr().err
        assert code in (0, 2) and "Traceback" not in err
        if code == 2:
            last = err.strip().splitlines()[-1]
            assert last.startswith("teams-runtime: error:") and "symbolic link" in last
    assert all(path.read_text() == '{"precious": true}' for path in precious)
    assert sorted(p.name for p in outside.rglob("*")) == ["00000000000000000001-abcdef-r1.json",
                                                          "qa", "x-r1.json"]  # fmt: skip


def test_a_stray_file_among_the_claims_is_passed_over(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    workspace = _team_workspace(tmp_path)
    _create(workspace, "r1", 2)
    FileWorkQueue(workspace).put(MessageEnvelope(request_id="r1", sender="u", target="qa"))
    claimed = workspace.queue_dir / "claimed"
    claimed.mkdir(parents=True)
    (claimed / "README").write_text("a person left this here")
    assert main(["status", "--workspace", str(tmp_path)]) == 0
    assert main(["run", "--once", "--workspace", str(tmp_path)]) == 0
    assert "Finished 1 envelope: 1 done" in capsys.readouterr().out


def test_a_lease_that_cannot_be_written_does_not_stop_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    workspace = _team_workspace(tmp_path)
    _create(workspace, "r1", 2)
    FileWorkQueue(workspace).put(MessageEnvelope(request_id="r1", sender="u", target="qa"))
    (workspace.queue_dir / "workers").write_text("not a folder: no lease can be written here")
    assert main(["run", "--once", "--workspace", str(tmp_path)]) == 0
    assert "Finished 1 envelope: 1 done" in capsys.readouterr().out


def test_a_folder_swapped_for_a_link_mid_write_never_receives_a_file(tmp_path: Path) -> None:
    workspace = _workspace(tmp_path / "ws")
    _create(workspace, "a", 3)
    outside = tmp_path / "outside"
    outside.mkdir()
    stop = threading.Event()

    def swapper() -> None:
        index, parked = workspace.index_dir, workspace.runtime_dir / "index.real"
        while not stop.is_set():
            with contextlib.suppress(OSError):
                index.rename(parked)
                index.symlink_to(outside, target_is_directory=True)
                time.sleep(0.001)  # the scenario: the link stands a moment, then goes
                index.unlink()
                parked.rename(index)

    thread = threading.Thread(target=swapper)
    thread.start()
    appended = 0
    try:
        deadline = time.monotonic() + 2  # the scenario's length: appends against the swaps
        while time.monotonic() < deadline:
            with contextlib.suppress(RecordError):
                append_to_record(workspace.record_paths("a"), [encode_event({"n": appended})], {})
                appended += 1
    finally:
        stop.set()
        thread.join()
    assert list(outside.iterdir()) == []
    assert len(_events_on_disk(workspace.request_path("a"))) == 3 + appended


def test_removing_lock_files_while_writers_run_loses_nothing(tmp_path: Path) -> None:
    workspace = _workspace(tmp_path)
    _create(workspace, "a", 0)
    paths = workspace.record_paths("a")
    stop = threading.Event()
    written: list[int] = []

    def writer(number: int) -> None:
        for n in range(30):
            append_to_record(paths, [encode_event({"w": number, "n": n})], {})
            written.append(1)

    def remover() -> None:  # someone tidying up, over and over
        while not stop.is_set():
            with contextlib.suppress(OSError):
                paths.lock.unlink()
            time.sleep(0.01)  # the scenario's pace, not a wait for anything

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(3)]
    cleaner = threading.Thread(target=remover)
    cleaner.start()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    stop.set()
    cleaner.join()
    events = _events_on_disk(workspace.request_path("a"))
    assert len(events) == len(written) == 90
    for number in range(3):
        assert [e["n"] for e in events if e["w"] == number] == list(range(30))


def test_a_forged_count_is_not_carried_past_an_append(tmp_path: Path) -> None:
    workspace = _workspace(tmp_path)
    path = _create(workspace, "req-1", 40)
    paths = workspace.record_paths("req-1")
    index = _payload(paths.index.read_bytes())
    paths.index.write_bytes(encode_index(msgspec.structs.replace(index, count=index.count + 50)))
    append_to_record(paths, [encode_event({"type": "note"})], {})
    assert len(_events_on_disk(path)) == 41
    fresh = _payload(paths.index.read_bytes())
    assert fresh.count == 41


@pytest.mark.anyio
async def test_a_conditional_append_is_refused_when_the_field_holds_the_value(
    tmp_path: Path,
) -> None:
    workspace = _workspace(tmp_path)
    path = _create(workspace, "req-1", 3)
    async with open_context(tmp_path) as ctx:
        await ctx.append_event("req-1", {"type": "cancelled"}, updates={"status": "cancelled"})
        before = path.read_bytes()
        reply = await ctx.append_keyed(
            "req-1", [{"type": "role_report"}], updates={"status": "completed"},
            key="qa/env-1", unless={"status": "cancelled"},
        )  # fmt: skip
        assert (reply.refused, reply.applied, reply.count) == (True, False, 4)
        assert path.read_bytes() == before
        assert reply.fields == {"status": "cancelled"}  # what it held instead
        reply = await ctx.append_keyed("req-1", [{"type": "x"}], unless={"status": "queued"})
        assert (reply.refused, reply.applied, reply.count) == (False, True, 5)
        reply = await ctx.append_keyed(
            "req-1", [{"type": "y"}], expect={"status": "cancelled", "hops": 2}
        )
        assert (reply.refused, reply.count, reply.fields) == (True, 5, {"status": "cancelled"})
        reply = await ctx.append_keyed("req-1", [{"type": "y"}], expect={"hops": None})
        assert (reply.refused, reply.applied, reply.count) == (False, True, 6)


@pytest.mark.parametrize(
    "planted",
    [
        pytest.param("requests/r1.json", id="record"),
        pytest.param("../team_runtime.yaml", id="config"),
        pytest.param("index/r1.idx", id="index"),
        pytest.param("queue/qa/00000000000000000009-abcdef-r1.json", id="envelope"),
    ],
)
def test_a_fifo_planted_in_place_of_a_file_never_hangs_a_command(
    tmp_path: Path, planted: str, capsys: pytest.CaptureFixture[str]
) -> None:
    workspace = _team_workspace(tmp_path)
    _create(workspace, "r1", 3)
    FileWorkQueue(workspace).put(MessageEnvelope(request_id="r1", sender="u", target="qa"))
    fifo = workspace.runtime_dir / planted
    fifo.parent.mkdir(parents=True, exist_ok=True)
    fifo.unlink(missing_ok=True)
    os.mkfifo(fifo)
    for argv in (["status", "--json"], ["run", "--once"], ["project", "r1"]):
        done = subprocess.run(
            [sys.executable, "-m", "teams_runtime", *argv, "--workspace", str(tmp_path)],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert done.returncode in (0, 2), done.stderr
        assert "Traceback" not in done.stderr


def test_a_requests_path_that_is_a_file_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    workspace = _team_workspace(tmp_path)
    workspace.requests_dir.rmdir()
    workspace.requests_dir.write_text("not a folder")
    for argv in (["status"], ["cancel", "r1"], ["append", "r1", "--type", "t", "--actor", "qa",
                                                 "--summary", "s"]):  # fmt: skip
        code = main([*argv, "--workspace", str(tmp_path)])
        err = capsys.readouterr().err
        assert code == 2 and err.strip().splitlines()[-1].startswith("teams-runtime: error:")


def test_deleting_the_index_folder_while_appends_run_never_fails_one(tmp_path: Path) -> None:
    workspace = _workspace(tmp_path)
    _create(workspace, "a", 3)
    stop = threading.Event()

    def deleter() -> None:
        while not stop.is_set():
            with contextlib.suppress(OSError):
                for index in workspace.index_dir.iterdir():
                    index.unlink()
                workspace.index_dir.rmdir()

    thread = threading.Thread(target=deleter)
    thread.start()
    try:
        for n in range(300):
            append_to_record(workspace.record_paths("a"), [encode_event({"n": n})], {})
    finally:
        stop.set()
        thread.join()
    assert len(_events_on_disk(workspace.request_path("a"))) == 303


# --- records another program wrote: the fast cold paths must answer as a full parse ----------


def _foreign_record(workspace: Workspace, request_id: str, data: bytes) -> Path:
    path = workspace.request_path(request_id)
    path.write_bytes(data)
    return path


def _history(events: int, blob: int) -> list[dict[str, Any]]:
    return [
        {"type": "role_report", "actor": "qa", "summary": f"e{index}",
         "payload": {"role": "qa", "status": "ok", "blob": "y" * blob}}
        if index % 3 == 0
        else {"type": "delegated", "actor": "orchestrator", "summary": f"e{index}"}
        for index in range(events)
    ]  # fmt: skip


@pytest.mark.parametrize("blob", [10, 1500], ids=["small-record", "large-record"])
def test_bad_utf8_in_an_omitted_event_is_refused_everywhere_and_never_rewritten(
    tmp_path: Path, blob: int, capsys: pytest.CaptureFixture[str]
) -> None:
    """An event the prompt leaves out still has to be UTF-8: a read that skipped it would let
    the next append copy the bad bytes into a new file (found by an outside attack)."""
    workspace = _workspace(tmp_path)
    data = encode_record({"request_id": "r1", "events": _history(300, blob)})
    path = _foreign_record(workspace, "r1", data.replace(b'"e5"', b'"e\xff"', 1))
    before = path.read_bytes()
    where = ["--workspace", str(tmp_path)]
    append = ["append", "r1", "--type", "note", "--actor", "qa", "--summary", "x"]
    for argv in (["status"], ["prompt", "r1", "--role", "qa"], ["project", "r1"], append):
        status = main([*argv, *where])
        assert argv[0] == "status" or status == 2, argv
    assert "not valid UTF-8" in capsys.readouterr().err
    assert path.read_bytes() == before
    assert not workspace.record_paths("r1").index.exists()


class _WritesWhileRead:
    """``os`` for the record reader, except that the ``nth`` call of ``name`` also writes one
    byte into the record in place: another program writing while a read is under way, made
    deterministic."""

    def __init__(self, name: str, nth: int, path: Path, position: int) -> None:
        self._name, self._left, self._path, self._position = name, nth, path, position
        self.done = False

    def __getattr__(self, attribute: str) -> Any:
        real = getattr(os, attribute)
        if attribute != self._name or self.done:
            return real

        def call(*args: Any) -> Any:
            self._left -= 1
            if self._left:
                return real(*args)
            self.done = True
            fd = os.open(self._path, os.O_WRONLY)
            try:
                os.pwrite(fd, b"r", self._position)  # "xole_report" -> "role_report"
            finally:
                os.close(fd)
            return real(*args)

        return call


@pytest.mark.parametrize(
    ("events", "during", "nth"),
    [(200, "fstat", 1), (2000, "fstat", 2), (2000, "pread", 1)],
    ids=["small-record", "large-record", "through-its-index"],
)
def test_a_record_written_in_place_during_a_read_is_never_answered_stale(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, events: int, during: str, nth: int
) -> None:
    """Old bytes must never be labelled with the version of new ones (found by an outside
    attack): one byte turns an old event into a role's only evidence while the record is read.
    The answer, now and at the next ask, must be the file's as it is."""
    from teams_runtime.storage.files import _reads as record_reads

    workspace = _workspace(tmp_path)
    history = [
        {"type": "role_report", "actor": "qa", "summary": f"e{index}", "blob": "y" * 60}
        if index % 10 == 0
        else {"type": "xole_report", "actor": "zeta", "summary": f"e{index}", "blob": "y" * 60}
        for index in range(events)
    ]
    record = {"request_id": "r1", "events": history}
    if during == "pread":  # written by teams-runtime: read through its index
        create_record(workspace.record_paths("r1"), record)
        path = workspace.request_path("r1")
    else:
        path = _foreign_record(workspace, "r1", encode_record(record))
    position = path.read_bytes().index(b'"xole_report"') + 1
    monkeypatch.setattr(record_reads, "os", _WritesWhileRead(during, nth, path, position))

    async def first_and_again() -> tuple[Any, Any]:
        async with open_context(tmp_path) as ctx:
            return await ctx.project("r1"), await ctx.project("r1")

    first, again = anyio.run(first_and_again)
    assert record_reads.os.done  # the write did land during the read
    expected = project_request(path.read_bytes())
    assert expected.backfilled != project_request(encode_record(record)).backfilled
    assert first == expected
    assert again == expected


@pytest.mark.parametrize(
    "layout",
    [
        lambda record: msgspec.json.encode(record),
        lambda record: json.dumps(record, indent=4).encode(),
        # compact events on lines of their own: an index can be derived, but not vouched for
        lambda record: (
            b"{\n"
            + b'  "request_id": "r1",\n  "events": [\n    '
            + b",\n    ".join(msgspec.json.encode(event) for event in record["events"])
            + b"\n  ]\n}\n"
        ),
    ],
    ids=["compact", "indent-4", "one-event-per-line"],
)
@pytest.mark.anyio
async def test_appending_to_a_record_in_another_layout_rewrites_it_whole_and_answers_from_it(
    tmp_path: Path, layout: Any
) -> None:
    """The first append re-lays out every event (canonical file), and the actor's next answer
    is the file's, byte sizes included (it used to keep the old bytes: found by an attack)."""
    workspace = _workspace(tmp_path)
    record = {"request_id": "r1", "events": _history(400, 600)}
    path = _foreign_record(workspace, "r1", layout(record))
    async with open_context(tmp_path) as ctx:
        await ctx.project("r1")
        await ctx.append_event("r1", {"type": "note", "actor": "qa", "summary": "after"})
        answer = await ctx.project("r1")
    data = path.read_bytes()
    assert data == encode_record(json.loads(data))  # canonical: every event laid out anew
    assert answer == project_request(data)
    assert answer.history_bytes == project_request(data).history_bytes


def test_an_append_refused_for_an_unreadable_record_makes_no_folder(tmp_path: Path) -> None:
    workspace = _workspace(tmp_path)
    data = encode_record({"request_id": "r1", "events": _history(5, 10)})
    path = _foreign_record(workspace, "r1", data.replace(b'"e1"', b'"e\xff"', 1))
    with pytest.raises(RecordError, match="not valid UTF-8"):
        append_to_record(workspace.record_paths("r1"), [encode_event({"n": 1})], {})
    assert not workspace.index_dir.exists()
    assert path.read_bytes() == data.replace(b'"e1"', b'"e\xff"', 1)
