"""Faults done for real: killed writers, sustained contention, full disks, signals, hung models."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from teams_runtime import RecordError
from teams_runtime.actors.team._team import RunSummary
from teams_runtime.codecs.request_records import encode_event
from teams_runtime.demo import sample_record
from teams_runtime.storage import FileWorkQueue, ParsedRecord, Workspace
from teams_runtime.storage.files import file_store as store
from teams_runtime.storage.local_files import TEMP_SUFFIX

from ...support.processes import stderr_until
from ...support.scripts import APPENDER
from ...support.waiting import eventually_sync

pytestmark = pytest.mark.anyio

RunOnce = Callable[..., Awaitable[RunSummary]]
ReadRecord = Callable[[Workspace, str], dict[str, Any]]


SOAK = """
import sys, time, anyio, tracemalloc
from teams_runtime import open_context

async def run(root, name, seconds):
    tracemalloc.start()
    counts = {}
    async with open_context(root) as ctx:
        deadline = time.monotonic() + seconds

        async def writer(task):
            n = 0
            while time.monotonic() < deadline:
                request_id = f"req-{n % 2}"
                await ctx.append_event(request_id, {"type": "note", "actor": f"{name}.{task}",
                                                    "summary": f"{name}.{task}:{request_id}:{n}"})
                n += 1
            counts[task] = n

        async def reader():
            while time.monotonic() < deadline:
                for request_id in ("req-0", "req-1"):
                    projection = await ctx.project(request_id)
                    assert projection.included_events <= 16

        async with anyio.create_task_group() as group:
            for task in range(3):
                group.start_soon(writer, task)
            group.start_soon(reader)
    print(sum(counts.values()), tracemalloc.get_traced_memory()[1], flush=True)

anyio.run(run, sys.argv[1], sys.argv[2], float(sys.argv[3]))
"""


def _make(root: Path, request_id: str = "req-1", events: int = 3000) -> Path:
    paths = Workspace(root).record_paths(request_id)
    store.create_record(paths, sample_record(events, request_id))
    return paths.record


def test_kill_9_mid_append_leaves_a_valid_record_with_a_prefix(tmp_path: Path) -> None:
    path = _make(tmp_path)
    base = len(json.loads(path.read_bytes())["events"])
    rng = random.Random(7)
    for round_ in range(4):
        writer = subprocess.Popen(
            [sys.executable, "-c", APPENDER, str(tmp_path), f"w{round_}", "100000", "report"],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert writer.stdout is not None
        writer.stdout.readline()  # it is appending
        # Not a wait: the kill lands at a random moment of the appends, which is the test.
        time.sleep(rng.uniform(0.05, 0.4))
        writer.send_signal(signal.SIGKILL)
        writer.wait(timeout=30)
        writer.stdout.close()
        record = json.loads(path.read_bytes())  # always parses: never torn
        mine = [e["summary"] for e in record["events"][base:] if e["actor"] == f"w{round_}"]
        assert mine == [f"w{round_}:{n}" for n in range(len(mine))]  # a prefix, in order
        assert len(mine) >= 1
        base = len(record["events"])
    # A killed writer may leave a temp file; readers ignore it, and the next writer removes it
    # once it is over a minute old (a younger one may be a live writer's).
    leftover = path.parent / f".{path.name}~999.deadbeef{TEMP_SUFFIX}"
    leftover.write_bytes(b"{torn")
    read = store.FileRecordStore(Workspace(tmp_path)).read("req-1", tail=None)
    assert isinstance(read, ParsedRecord) and read.fields["request_id"] == "req-1"
    store.append_to_record(Workspace(tmp_path).record_paths("req-1"), [encode_event({})], {})
    assert leftover.exists()
    old = time.time() - 120
    for temp in path.parent.glob(f"*{TEMP_SUFFIX}"):
        os.utime(temp, (old, old))
    store.append_to_record(Workspace(tmp_path).record_paths("req-1"), [encode_event({})], {})
    assert not list(path.parent.glob(f"*{TEMP_SUFFIX}"))


def test_sustained_processes_and_tasks_lose_and_duplicate_nothing(tmp_path: Path) -> None:
    _make(tmp_path, "req-0", 200)
    _make(tmp_path, "req-1", 200)
    seconds = "4"
    soakers = [
        subprocess.Popen(
            [sys.executable, "-c", SOAK, str(tmp_path), f"p{n}", seconds],
            stdout=subprocess.PIPE,
            text=True,
        )
        for n in range(3)
    ]
    reports = []
    for soaker in soakers:
        out, _ = soaker.communicate(timeout=120)  # no deadlock: every process finishes
        assert soaker.returncode == 0
        sent, peak = (int(value) for value in out.split())
        reports.append((sent, peak))
        assert peak < 64 * 2**20  # bounded memory in each process
    notes: list[str] = []
    for request_id in ("req-0", "req-1"):
        record = json.loads(Workspace(tmp_path).request_path(request_id).read_bytes())
        notes += [e["summary"] for e in record["events"] if e.get("type") == "note"]
    assert len(notes) == len(set(notes)) == sum(sent for sent, _ in reports)
    by_writer: dict[str, list[int]] = {}
    for note in notes:
        writer, request_id, number = note.split(":")
        by_writer.setdefault(f"{writer}:{request_id}", []).append(int(number))
    for numbers in by_writer.values():
        assert numbers == sorted(numbers)  # each writer's order kept per request


def _mount_tmpfs(folder: Path, size: str) -> bool:
    folder.mkdir(parents=True)
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)],
        capture_output=True,
        check=False,
    )
    return done.returncode == 0


def test_disk_full_is_a_clear_error_and_the_record_survives(tmp_path: Path) -> None:
    root = tmp_path / "small"
    if not _mount_tmpfs(root, "1m"):
        pytest.skip("cannot mount a small tmpfs here (needs root and mount rights)")
    try:
        path = _make(root, events=600)  # ~400 KB: fits once, not twice
        before = path.read_bytes()
        big = {"type": "note", "payload": {"blob": "x" * 300_000}}
        with pytest.raises(RecordError, match=r"cannot be written \(No space left on device\)"):
            store.append_to_record(Workspace(root).record_paths("req-1"), [encode_event(big)], {})
        assert path.read_bytes() == before
        assert not list(path.parent.glob(f"*{TEMP_SUFFIX}"))
    finally:
        subprocess.run(["umount", str(root)], check=False)


def _read_only(folder: Path) -> bool:
    """Make ``folder`` read-only for real: a read-only bind mount as root, else file modes."""
    if os.geteuid() != 0:
        folder.chmod(0o555)
        return True
    bind = subprocess.run(
        ["mount", "--bind", str(folder), str(folder)], capture_output=True, check=False
    )
    if bind.returncode != 0:
        return False
    remount = subprocess.run(
        ["mount", "-o", "remount,ro,bind", str(folder)], capture_output=True, check=False
    )
    if remount.returncode != 0:
        subprocess.run(["umount", str(folder)], check=False)
        return False
    return True


def _writable_again(folder: Path) -> None:
    if os.geteuid() != 0:
        folder.chmod(0o755)
    else:
        subprocess.run(["umount", str(folder)], check=False)


def test_read_only_folder_is_a_user_error_and_the_record_survives(tmp_path: Path) -> None:
    path = _make(tmp_path, events=20)
    before = path.read_bytes()
    folder = path.parent
    if not _read_only(folder):
        pytest.skip("cannot make a read-only folder here (needs mount rights as root)")
    command = [
        sys.executable,
        "-m",
        "teams_runtime",
        "append",
        "req-1",
        "--workspace",
        str(tmp_path),
        "--type",
        "note",
        "--actor",
        "qa",
        "--summary",
        "x",
    ]
    try:
        done = subprocess.run(command, capture_output=True, text=True, check=False)
    finally:
        _writable_again(folder)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("teams-runtime: error: ")
    assert "Read-only file system" in done.stderr or "Permission denied" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    assert path.read_bytes() == before


@pytest.mark.parametrize(
    "signal_number",
    [pytest.param(signal.SIGINT, id="SIGINT"), pytest.param(signal.SIGTERM, id="SIGTERM")],
)
def test_signal_during_run_loses_no_envelope(
    tmp_path: Path,
    team_workspace: Callable[..., Workspace],
    seed: Callable[..., None],
    read_record: ReadRecord,
    signal_number: int,
) -> None:
    workspace = team_workspace("slow:1.5")
    requests = [f"req-{n}" for n in range(8)]  # a role runs 4 at once: two rounds of calls
    for request_id in requests:
        seed(workspace, request_id, "qa", events=10)
    runner = subprocess.Popen(
        [sys.executable, "-m", "teams_runtime", "run", "--workspace", str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    stderr_until(runner, "team started", 60)  # its signal handlers are in place
    state = workspace.root / "model-state"

    def some_handled_some_in_the_model() -> bool:
        # Every call in flight started less than 0.5 s ago, so none answers while the team
        # stops: the envelopes in the model are what this test is about.
        now = time.time()
        handled = {r for r in requests if read_record(workspace, r)["status"] == "completed"}
        calls = [state / f"calls-{r}-qa" for r in requests if r not in handled]
        started = [now - call.stat().st_mtime for call in calls if call.exists()]
        return bool(handled) and bool(started) and max(started) < 0.5

    eventually_sync(
        lambda: some_handled_some_in_the_model() or runner.poll() is not None,
        "some requests handled, some in the model",
        60,
    )
    assert runner.poll() is None, runner.communicate()
    runner.send_signal(signal_number)
    out, err = runner.communicate(timeout=30)
    assert runner.returncode == 0, err
    assert "Stopped;" in out
    queue = FileWorkQueue(workspace)
    queued = {c.envelope.request_id for c in queue.claim("qa", 100) if c.envelope is not None}
    queue.retire()  # they wait again for the next run, and this lease goes
    for request_id in requests:
        handled = read_record(workspace, request_id)["status"] == "completed"
        assert handled != (request_id in queued)  # done, or still queued: never lost
    done = subprocess.run(
        [sys.executable, "-m", "teams_runtime", "run", "--workspace", str(tmp_path), "--once"],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert done.returncode == 0
    assert all(read_record(workspace, r)["status"] == "completed" for r in requests)


async def test_a_hung_model_does_not_stop_other_requests(
    team_workspace: Callable[..., Workspace],
    seed: Callable[..., None],
    run_once: RunOnce,
    read_record: ReadRecord,
) -> None:
    workspace = team_workspace("sleep:req-hung", model={"timeout_seconds": 2, "attempts": 1})
    seed(workspace, "req-hung", "qa")
    for n in range(3):
        seed(workspace, f"req-{n}", "qa")
    with anyio.fail_after(30):
        summary = await run_once(workspace)
    assert (summary.handled, summary.failed) == (3, 1)
    hung = read_record(workspace, "req-hung")
    assert hung["status"] == "failed"
    assert "no answer within 2 s" in hung["events"][-1]["payload"]["reason"]
