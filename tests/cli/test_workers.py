"""Several `teams-runtime run` processes on one workspace: real processes, real signals.

Each envelope is handled once; a killed worker's claims come back after its lease; loops end
at `team.max_hops`; `cancel` stops a request a running team works on.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from anyio.from_thread import start_blocking_portal

from teams_runtime.codecs.config import NatsSettings
from teams_runtime.codecs.envelopes import MessageEnvelope
from teams_runtime.demo import sample_record
from teams_runtime.storage import FileWorkQueue, Workspace
from teams_runtime.storage.nats._names import token_of
from teams_runtime.storage.nats.blocking_faces import blocking_queue, blocking_store
from teams_runtime.storage.nats.connection import NatsConnection, open_connection

from ..support.processes import stderr_until
from ..support.waiting import eventually_sync

REPORTS = ("role_report", "version_control_completed")
ROUTE = ["planner", "developer", "version_controller", "qa"]  # what fake_model answers


def _worker(workspace: Workspace, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "teams_runtime", "run", "--workspace", str(workspace.root), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _calls(workspace: Workspace) -> Counter[tuple[str, str]]:
    log = workspace.root / "model-state" / "calls.log"
    lines = log.read_text().splitlines() if log.exists() else []
    return Counter((json.loads(line)["request_id"], json.loads(line)["role"]) for line in lines)


def _reports(record: dict[str, Any], seeded: int) -> list[str]:
    """Who reported after the ``seeded`` generated events."""
    return [e["actor"] for e in record["events"][seeded:] if e.get("type") in REPORTS]


def test_three_workers_handle_each_envelope_once(
    team_workspace: Callable[..., Workspace],
    seed: Callable[..., None],
    read_record: Callable[[Workspace, str], dict[str, Any]],
) -> None:
    workspace = team_workspace("slow:0.2")
    ids = [f"req-{n:02d}" for n in range(12)]
    for request_id in ids:
        seed(workspace, request_id, "planner", events=5)
    workers = [_worker(workspace, "--once") for _ in range(3)]
    outputs = [worker.communicate(timeout=120) for worker in workers]
    for worker, (out, err) in zip(workers, outputs, strict=True):
        assert worker.returncode == 0, err
        assert out.startswith("Finished ")
    handled = sum(int(out.split()[1]) for out, _ in outputs)
    assert handled == len(ids) * len(ROUTE)  # 48, not 48 per worker
    for request_id in ids:
        record = read_record(workspace, request_id)
        assert _reports(record, 5) == ROUTE and record["status"] == "completed"
    assert set(_calls(workspace).values()) == {1}  # every (request, role) asked exactly once
    assert sum(FileWorkQueue(workspace).counts().values()) == 0


def test_a_killed_workers_envelope_is_finished_by_another_after_its_lease(
    team_workspace: Callable[..., Workspace],
    seed: Callable[..., None],
    read_record: Callable[[Workspace, str], dict[str, Any]],
) -> None:
    workspace = team_workspace("slow:1.5", sections={"queue": {"lease_seconds": 2}})
    seed(workspace, "req-1", "qa", events=5)
    first = _worker(workspace, "--once")
    claimed = workspace.queue_dir / "claimed"
    eventually_sync(lambda: any(claimed.rglob("*.json")), "the first worker's claim", 30)
    calls = workspace.root / "model-state" / "calls-req-1-qa"
    eventually_sync(calls.exists, "its model call", 30)  # killed mid-call, the claim still held
    first.send_signal(signal.SIGKILL)
    first.communicate(timeout=30)
    started = time.monotonic()
    second = _worker(workspace, "--once")
    _, err = second.communicate(timeout=60)
    assert second.returncode == 0, err
    assert time.monotonic() - started >= 1.0  # it waited for the dead worker's lease
    record = read_record(workspace, "req-1")
    assert _reports(record, 5) == ["qa"]  # finished once, no duplicate report
    assert _calls(workspace)[("req-1", "qa")] <= 2  # at most one extra model call
    assert sum(FileWorkQueue(workspace).counts().values()) == 0


def test_a_ping_pong_model_ends_at_the_hop_limit(
    tmp_path: Path,
    team_workspace: Callable[..., Workspace],
    seed: Callable[..., None],
    read_record: Callable[[Workspace, str], dict[str, Any]],
) -> None:
    model = tmp_path / "ping_pong.py"
    model.write_text(
        "import json, os, sys\n"
        "sys.stdin.read()\n"
        "role = os.environ['TEAMS_RUNTIME_ROLE']\n"
        "print(json.dumps({'request_id': os.environ['TEAMS_RUNTIME_REQUEST_ID'], 'role': role,\n"
        "    'status': 'completed', 'summary': 'back to you',\n"
        "    'next_role': 'developer' if role == 'qa' else 'qa'}))\n"
    )
    workspace = team_workspace(
        command=[sys.executable, str(model)],
        root=tmp_path / "ws",
        sections={"team": {"max_hops": 5}},
    )
    seed(workspace, "req-1", "qa", events=3)
    worker = _worker(workspace, "--once")
    out, err = worker.communicate(timeout=60)
    assert worker.returncode == 0, err
    # The envelope whose hand-off was one too many failed the request: counted and said so.
    assert "Finished 6 envelopes: 5 done, 1 failed, 0 rejected" in out
    assert err.count("-> request failed at the hop limit") == 1, err
    record = read_record(workspace, "req-1")
    assert record["status"] == "failed" and record["hops"] == 5
    assert len(_reports(record, 3)) == 6  # 5 hand-offs, then the report that would be the 6th
    stop = record["events"][-1]
    assert stop["type"] == "hop_limit" and stop["payload"]["max_hops"] == 5
    assert sum(FileWorkQueue(workspace).counts().values()) == 0


def test_cancel_stops_a_request_a_running_team_works_on(
    team_workspace: Callable[..., Workspace],
    seed: Callable[..., None],
    read_record: Callable[[Workspace, str], dict[str, Any]],
) -> None:
    workspace = team_workspace("gated")
    seed(workspace, "req-1", "planner", events=3)
    runner = _worker(workspace)
    try:
        log = workspace.root / "model-state"
        eventually_sync(
            lambda: any(log.glob("calls-req-1-planner")), "the planner's model call", 30
        )
        cancel = subprocess.run(
            [sys.executable, "-m", "teams_runtime", "cancel", "req-1",
             "--workspace", str(workspace.root)],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert cancel.returncode == 0, cancel.stderr
        assert cancel.stdout.startswith("Cancelled req-1")
        (log / "gate").touch()  # the call answers only now, after the cancel

        def outcome_recorded() -> bool:
            return _reports(read_record(workspace, "req-1"), 3) == ["planner"]

        eventually_sync(outcome_recorded, "the planner's outcome", 30)
    finally:
        runner.send_signal(signal.SIGTERM)
        _, err = runner.communicate(timeout=60)
    assert runner.returncode == 0, err
    record = read_record(workspace, "req-1")
    assert record["status"] == "cancelled"
    assert [e["type"] for e in record["events"][3:]] == ["cancelled", "role_report"]
    assert sum(FileWorkQueue(workspace).counts().values()) == 0  # not handed on
    assert _calls(workspace)[("req-1", "developer")] == 0


def test_run_serves_only_the_roles_it_is_given(
    team_workspace: Callable[..., Workspace], seed: Callable[..., None]
) -> None:
    workspace = team_workspace()
    seed(workspace, "req-1", "planner", events=3)
    planner = _worker(workspace, "--roles", "planner")
    try:
        queue = FileWorkQueue(workspace)
        eventually_sync(lambda: queue.counts()["developer"] == 1, "the hand-off to developer", 30)
        # Work queued after the hand-off: the worker claims it, so it has looked for work
        # since the developer's envelope was waiting; that one must still be waiting.
        seed(workspace, "req-2", "planner", events=3)
        # Both wait: nobody here serves developer (a worker that did would have taken one).
        eventually_sync(lambda: queue.waiting()["developer"] == 2, "the second hand-off", 30)
    finally:
        planner.send_signal(signal.SIGTERM)
        planner.communicate(timeout=60)
    rest = _worker(workspace, "--once", "--roles", "developer,version_controller,qa")
    _, err = rest.communicate(timeout=60)
    assert rest.returncode == 0, err
    assert sum(FileWorkQueue(workspace).counts().values()) == 0


def test_status_reports_requests_envelopes_and_workers(
    team_workspace: Callable[..., Workspace], seed: Callable[..., None]
) -> None:
    workspace = team_workspace()
    seed(workspace, "req-1", "planner", events=3)
    done = subprocess.run(
        [sys.executable, "-m", "teams_runtime", "status", "--json",
         "--workspace", str(workspace.root)],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    report = json.loads(done.stdout)
    assert report["workspace"] == str(workspace.root.resolve())
    (row,) = report["requests"]
    assert (row["request_id"], row["events"], row["hops"]) == ("req-1", 3, 0)
    assert report["roles"]["planner"] == {"waiting": 1, "claimed": 0, "deferred": 0}
    assert report["workers"] == []


def test_a_worker_that_hung_past_its_lease_adds_no_duplicate_work(
    team_workspace: Callable[..., Workspace],
    seed: Callable[..., None],
    read_record: Callable[[Workspace, str], dict[str, Any]],
) -> None:
    workspace = team_workspace("slow:0.5", sections={"queue": {"lease_seconds": 1}})
    seed(workspace, "req-1", "planner", events=5)
    hung = _worker(workspace, "--once")
    state = workspace.root / "model-state"
    eventually_sync(
        lambda: (state / "calls-req-1-planner").exists(), "the planner's model call", 30
    )
    hung.send_signal(signal.SIGSTOP)  # hung mid-call, lease running out
    try:
        other = _worker(workspace, "--once")  # takes the planner over once the lease is out
        developer = state / "calls-req-1-developer"
        eventually_sync(developer.exists, "the other worker handing on to developer", 30)
    finally:
        hung.send_signal(signal.SIGCONT)  # it wakes while the other works, with a stale call
    errs = {}
    for name, worker in (("other", other), ("hung", hung)):
        _, errs[name] = worker.communicate(timeout=60)
        assert worker.returncode == 0, errs[name]
    # Only the worker whose write recorded the planner's outcome logs its hand-off.
    handed_on = "planner: request req-1: completed -> developer"
    assert [errs[name].count(handed_on) for name in ("other", "hung")] == [1, 0], errs
    assert "planner: request req-1: outcome already recorded by another worker" in errs["hung"]
    assert _reports(read_record(workspace, "req-1"), 5) == ROUTE  # each role reported once
    calls = _calls(workspace)
    assert calls[("req-1", "planner")] <= 2  # the one extra call a hang may cost
    assert [calls[("req-1", role)] for role in ROUTE[1:]] == [1, 1, 1]  # and nothing after it
    assert sum(FileWorkQueue(workspace).counts().values()) == 0


def _cancelling_model(tmp_path: Path, exit_status: int, next_role: str) -> list[str]:
    """A model that cancels its own request (as a person would, mid-call), then answers."""
    script = tmp_path / "cancelling_model.py"
    script.write_text(
        "import json, os, subprocess, sys\n"
        "sys.stdin.read()\n"
        "subprocess.run([sys.executable, '-m', 'teams_runtime', 'cancel',\n"
        "    os.environ['TEAMS_RUNTIME_REQUEST_ID'], '--workspace',\n"
        "    os.environ['TEAMS_RUNTIME_WORKSPACE']], check=True, capture_output=True)\n"
        f"if {exit_status}:\n    sys.exit({exit_status})\n"
        "print(json.dumps({'request_id': os.environ['TEAMS_RUNTIME_REQUEST_ID'],\n"
        "    'role': os.environ['TEAMS_RUNTIME_ROLE'], 'status': 'completed',\n"
        f"    'summary': 'done', 'next_role': {next_role!r}}}))\n"
    )
    return [sys.executable, str(script)]


@pytest.mark.parametrize(
    ("exit_status", "next_role", "last"),
    [
        pytest.param(0, "developer", "role_report", id="hand-off"),
        pytest.param(0, "", "role_report", id="finishing-answer"),
        pytest.param(1, "", "model_failed", id="failed-call"),
    ],
)
def test_a_cancel_during_the_call_wins_whatever_the_call_does(
    tmp_path: Path,
    team_workspace: Callable[..., Workspace],
    seed: Callable[..., None],
    read_record: Callable[[Workspace, str], dict[str, Any]],
    exit_status: int,
    next_role: str,
    last: str,
) -> None:
    command = _cancelling_model(tmp_path, exit_status, next_role)
    workspace = team_workspace(
        command=command, root=tmp_path / "ws", model={"attempts": 1, "on_failure": "fail"}
    )
    seed(workspace, "req-1", "qa", events=3)
    worker = _worker(workspace, "--once")
    out, err = worker.communicate(timeout=60)
    assert worker.returncode == 0, err
    assert "Traceback" not in err
    counted = (
        "Finished 1 envelope: 0 done, 1 failed" if exit_status else "Finished 1 envelope: 1 done"
    )
    assert out.startswith(counted)
    record = read_record(workspace, "req-1")
    assert record["status"] == "cancelled"
    assert [e["type"] for e in record["events"][3:]] == ["cancelled", last]
    assert sum(FileWorkQueue(workspace).counts().values()) == 0  # nothing handed on
    if not exit_status:  # the log says where the request went: nowhere, it was cancelled
        assert "qa: request req-1: " in err and err.count("-> request cancelled") == 1, err


def test_a_second_signal_does_not_cut_the_cleanup_short(
    tmp_path: Path, team_workspace: Callable[..., Workspace], seed: Callable[..., None]
) -> None:
    stubborn = tmp_path / "stubborn.py"
    pids = tmp_path / "pids"
    stubborn.write_text(
        "import os, signal, sys, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        f"open({str(pids)!r}, 'a').write(f'{{os.getpid()}}\\n')\n"
        "sys.stdin.read()\ntime.sleep(60)\n"
    )
    workspace = team_workspace(command=[sys.executable, str(stubborn)], root=tmp_path / "ws")
    seed(workspace, "req-1", "qa", events=3)
    worker = _worker(workspace, "--once")
    eventually_sync(pids.exists, "the model call", 30)
    worker.send_signal(signal.SIGINT)
    early = stderr_until(worker, "SIGINT received: stopping the team", 30)
    worker.send_signal(signal.SIGINT)  # impatient: a second Ctrl-C while it cleans up
    out, err = worker.communicate(timeout=60)
    err = early + err
    assert worker.returncode == 0, err
    assert "SIGINT received: already stopping" in err
    assert "Stopped; 1 envelope queued for the next run." in out
    pid = int(pids.read_text().split()[0])
    eventually_sync(lambda: not _alive(pid), "the model process to be gone", 10)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as stat:  # a zombie waiting to be reaped is gone
        return stat.read().split()[2] != "Z"


def test_two_roles_given_envelopes_with_one_id_both_work(
    team_workspace: Callable[..., Workspace],
    seed: Callable[..., None],
    read_record: Callable[[Workspace, str], dict[str, Any]],
) -> None:
    workspace = team_workspace()
    seed(workspace, "req-1", "qa", events=3)
    queue = FileWorkQueue(workspace)
    for role in ("qa", "designer"):  # hand-written, sharing an id
        queue.put(MessageEnvelope(request_id="req-1", sender="u", target=role, envelope_id="x"))
    worker = _worker(workspace, "--once")
    _, err = worker.communicate(timeout=60)
    assert worker.returncode == 0, err
    assert {"qa", "designer"} <= set(_reports(read_record(workspace, "req-1"), 3))


# --- the nats storage: hosts with separate folders sharing one JetStream server --------------


def _nats_hosts(
    team_workspace: Callable[..., Workspace],
    tmp_path: Path,
    settings: NatsSettings,
    mode: str,
    hosts: int,
    lease_seconds: float = 60,
) -> list[Workspace]:
    """``hosts`` workspace folders (no file shared between them) on one team of the server."""
    backend = {"kind": "nats", "nats": {"url": settings.url, "prefix": settings.prefix}}
    sections = {"backend": backend, "queue": {"lease_seconds": lease_seconds}}
    return [
        team_workspace(mode, root=tmp_path / f"host-{n}", sections=sections) for n in range(hosts)
    ]


def _nats_seed(
    settings: NatsSettings, request_ids: list[str], role: str, events: int, lease: float = 60
) -> None:
    """Create the requests and queue their envelopes; the first connection to the team makes
    its queue, with ``lease`` as the ack wait every worker then renews within."""
    with _connected(settings, lease) as connection:
        store, queue = blocking_store(connection), blocking_queue(connection)
        for request_id in request_ids:
            store.create(request_id, sample_record(events, request_id))
            queue.put(MessageEnvelope(request_id=request_id, sender="user", target=role))


def _nats_records(settings: NatsSettings, request_ids: list[str]) -> dict[str, dict[str, Any]]:
    with _connected(settings) as connection:
        store = blocking_store(connection)
        records = {request_id: json.loads(store.load(request_id)) for request_id in request_ids}
        assert sum(blocking_queue(connection).counts().values()) == 0
        return records


@contextmanager
def _connected(settings: NatsSettings, lease: float = 60.0) -> Iterator[NatsConnection]:
    """A connection of the caller's own for a ``with`` block, as a command opens one."""
    with (
        start_blocking_portal() as portal,
        portal.wrap_async_context_manager(
            open_connection(settings, queue_ack_seconds=lease)
        ) as connection,
    ):
        yield connection


def _all_calls(hosts: list[Workspace]) -> Counter[tuple[str, str]]:
    return sum((_calls(host) for host in hosts), Counter())


def test_three_hosts_on_nats_handle_each_envelope_once(
    team_workspace: Callable[..., Workspace], tmp_path: Path, nats_server: Any
) -> None:
    settings: NatsSettings = nats_server.settings()
    hosts = _nats_hosts(team_workspace, tmp_path, settings, "slow:0.2", 3)
    ids = [f"req-{n:02d}" for n in range(12)]
    _nats_seed(settings, ids, "planner", events=5)
    workers = [_worker(host, "--once") for host in hosts]
    outputs = [worker.communicate(timeout=180) for worker in workers]
    for worker, (out, err) in zip(workers, outputs, strict=True):
        assert worker.returncode == 0, err
        assert out.startswith("Finished ")
    assert sum(int(out.split()[1]) for out, _ in outputs) == len(ids) * len(ROUTE)
    for request_id, record in _nats_records(settings, ids).items():
        assert _reports(record, 5) == ROUTE, request_id
        assert record["status"] == "completed"
    assert set(_all_calls(hosts).values()) == {1}  # every (request, role) asked exactly once
    for host in hosts:  # each folder holds only what is local: no records, no queue
        assert not host.requests_dir.exists() and not host.queue_dir.exists()


def test_a_killed_hosts_envelope_is_delivered_again_and_handled_once(
    team_workspace: Callable[..., Workspace], tmp_path: Path, nats_server: Any
) -> None:
    settings: NatsSettings = nats_server.settings()
    first_host, second_host = _nats_hosts(
        team_workspace, tmp_path, settings, "slow:1.5", 2, lease_seconds=2
    )
    _nats_seed(settings, ["req-1"], "qa", events=5, lease=2)
    first = _worker(first_host, "--once")
    calls = first_host.root / "model-state" / "calls-req-1-qa"
    eventually_sync(calls.exists, "the first host's model call", 30)
    first.send_signal(signal.SIGKILL)  # mid-call: no ack, no retire
    first.communicate(timeout=30)
    started = time.monotonic()
    second = _worker(second_host, "--once")
    _, err = second.communicate(timeout=60)
    assert second.returncode == 0, err
    assert time.monotonic() - started >= 0.5  # it waited for the server to deliver it again
    record = _nats_records(settings, ["req-1"])["req-1"]
    assert _reports(record, 5) == ["qa"]  # finished once, no duplicate report
    # The killed host's call died with it (a parent-death signal): it never finished, so the
    # calls that answered are the second host's one.
    assert (first_host.root / "model-state" / "calls-req-1-qa").exists()  # it had started
    assert _all_calls([first_host, second_host])[("req-1", "qa")] == 1


def test_long_calls_run_once_whatever_lease_a_host_or_command_names(
    team_workspace: Callable[..., Workspace], tmp_path: Path, nats_server: Any
) -> None:
    settings: NatsSettings = nats_server.settings()
    (host,) = _nats_hosts(team_workspace, tmp_path, settings, "slow:5", 1, lease_seconds=30)
    (elsewhere,) = _nats_hosts(
        team_workspace, tmp_path / "elsewhere", settings, "valid", 1, lease_seconds=1
    )
    ids = ["req-1", "req-2"]
    _nats_seed(settings, ids, "qa", events=3, lease=2)  # the team's queue: a 2 s ack wait
    worker = _worker(host, "--once")  # its own setting (30 s) would renew every 10 s
    state = host.root / "model-state"
    eventually_sync(
        lambda: all((state / f"calls-{i}-qa").exists() for i in ids), "the model calls", 30
    )
    done = subprocess.run(  # from a workspace whose lease is 1 s: it changes nothing
        [sys.executable, "-m", "teams_runtime", "status", "--json",
         "--workspace", str(elsewhere.root)],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    (lease,) = json.loads(done.stdout)["workers"]
    assert lease["alive"] and sorted(lease["holds"]) == ["qa:req-1", "qa:req-2"]
    with _connected(settings, 1) as other:  # another worker, asking for work
        queue, until = blocking_queue(other), time.monotonic() + 3
        # The scenario is time passing: asked for work over longer than the ack wait, the
        # server never hands the calls out again, since the worker renews them.
        while time.monotonic() < until:
            assert queue.claim("qa", 10) == []
            time.sleep(0.2)
    _, err = worker.communicate(timeout=120)
    assert worker.returncode == 0, err
    assert _all_calls([host, elsewhere]) == {("req-1", "qa"): 1, ("req-2", "qa"): 1}
    for request_id, record in _nats_records(settings, ids).items():
        assert _reports(record, 3) == ["qa"], request_id


def _cli_json(workspace: Workspace, *argv: str) -> Any:
    done = subprocess.run(
        [sys.executable, "-m", "teams_runtime", *argv, "--json", "--workspace",
         str(workspace.root)],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    return json.loads(done.stdout)


@pytest.mark.parametrize("backend", ["file", "nats"])
def test_status_and_cancel_around_a_held_envelope_say_the_same_on_both_backends(
    team_workspace: Callable[..., Workspace],
    seed: Callable[..., None],
    tmp_path: Path,
    request: pytest.FixtureRequest,
    backend: str,
) -> None:
    if backend == "nats":
        settings: NatsSettings = request.getfixturevalue("nats_server").settings()
        (workspace,) = _nats_hosts(team_workspace, tmp_path, settings, "sleep", 1)
        _nats_seed(settings, ["req-1"], "qa", events=3)
    else:
        workspace = team_workspace("sleep")
        seed(workspace, "req-1", "qa", events=3)
    worker = _worker(workspace, "--once")
    calls = workspace.root / "model-state" / "calls-req-1-qa"
    eventually_sync(calls.exists, "the model call", 30)
    report = _cli_json(workspace, "status")  # at once: no renewal has happened yet
    assert report["roles"]["qa"] == {"waiting": 0, "claimed": 1, "deferred": 0}
    assert [lease["holds"] for lease in report["workers"]] == [["qa:req-1"]]
    cancelled = _cli_json(workspace, "cancel", "req-1")
    assert (cancelled["already_cancelled"], cancelled["dropped"]) == (False, 0)  # it is held
    worker.send_signal(signal.SIGTERM)  # stopped mid-call: the envelope goes back
    out, err = worker.communicate(timeout=60)
    assert worker.returncode == 0, err
    assert "Stopped; 1 envelope queued for the next run." in out
    report = _cli_json(workspace, "status")
    assert report["roles"]["qa"] == {"waiting": 1, "claimed": 0, "deferred": 0}
    assert report["workers"] == []
    cancelled = _cli_json(workspace, "cancel", "req-1")
    assert (cancelled["already_cancelled"], cancelled["dropped"]) == (True, 1)  # waiting now


def test_hosts_ride_out_a_nats_server_restart(
    team_workspace: Callable[..., Workspace], tmp_path: Path, own_nats_server: Any
) -> None:
    settings: NatsSettings = own_nats_server.settings()
    hosts = _nats_hosts(team_workspace, tmp_path, settings, "slow:0.3", 2)
    ids = [f"req-{n:02d}" for n in range(6)]
    _nats_seed(settings, ids, "planner", events=3)
    workers = [_worker(host, "--once") for host in hosts]
    eventually_sync(lambda: sum(_all_calls(hosts).values()) >= 4, "the hosts to get going", 60)
    own_nats_server.stop()
    early = [stderr_until(worker, "lost; reconnecting", 60) for worker in workers]
    own_nats_server.start()  # same port, same store folder
    outputs = [worker.communicate(timeout=180) for worker in workers]
    for worker, seen, (_, rest) in zip(workers, early, outputs, strict=True):
        err = seen + rest
        assert worker.returncode == 0, err
        assert "lost; reconnecting" in err and "back" in err  # it did lose the server
    for request_id, record in _nats_records(settings, ids).items():
        assert _reports(record, 3) == ROUTE, request_id  # every role reported once
        assert record["status"] == "completed"


# --- limits across workers: three real workers on requests submitted three times -------------


_PING_PONG = """
import json, os, sys
prompt = sys.stdin.read()
start = prompt.index("Current request:\\n") + len("Current request:\\n")
shown, _ = json.JSONDecoder().raw_decode(prompt, start)  # the record this prompt was built on
role, request_id = os.environ["TEAMS_RUNTIME_ROLE"], os.environ["TEAMS_RUNTIME_REQUEST_ID"]
with open(sys.argv[1], "a") as log:
    log.write(json.dumps({"request_id": request_id, "status": shown.get("status")}) + "\\n")
print(json.dumps({"request_id": request_id, "role": role, "status": "completed",
                  "summary": "back to you", "next_role": "developer" if role == "qa" else "qa"}))
"""


@pytest.mark.parametrize("backend", ["file", "nats"])
def test_three_workers_keep_the_hop_limit_of_requests_submitted_three_times(
    tmp_path: Path,
    team_workspace: Callable[..., Workspace],
    request: pytest.FixtureRequest,
    backend: str,
) -> None:
    model, calls = tmp_path / "ping_pong.py", tmp_path / "calls.log"
    model.write_text(_PING_PONG)
    sections: dict[str, Any] = {"team": {"max_hops": 8}}
    if backend == "nats":
        settings: NatsSettings = request.getfixturevalue("nats_server").settings()
        nats = {"url": settings.url, "prefix": settings.prefix}
        sections["backend"] = {"kind": "nats", "nats": nats}
        roots = [tmp_path / f"host-{n}" for n in range(3)]  # three hosts, no folder shared
    else:
        roots = [tmp_path / "ws"] * 3
    hosts = [
        team_workspace(
            command=[sys.executable, str(model), str(calls)], root=root, sections=sections
        )
        for root in roots
    ]
    ids = ["req-1", "req-2"]
    for _ in range(3):  # as roles.md shows: more work on the same request
        for request_id in ids:
            subprocess.run(
                [sys.executable, "-m", "teams_runtime", "submit", "--role", "qa", "--scope",
                 "ping", "--request-id", request_id, "--workspace", str(hosts[0].root)],
                capture_output=True, check=True, timeout=60,
            )  # fmt: skip
    workers = [_worker(host, "--once") for host in hosts]
    for worker in workers:
        _, err = worker.communicate(timeout=180)
        assert worker.returncode == 0, err
    if backend == "nats":
        records = _nats_records(settings, ids)
    else:
        records = {request_id: _record(hosts[0], request_id) for request_id in ids}
        assert sum(FileWorkQueue(hosts[0]).counts().values()) == 0
    seen = [json.loads(line) for line in calls.read_text().splitlines()]
    assert {entry["status"] for entry in seen} <= {"queued", "in_progress"}  # none after it ended
    for request_id, record in records.items():
        events = record["events"]
        hand_offs = [e for e in events if e["type"] == "delegated" and e["actor"] != "orchestrator"]
        stops = [n for n, e in enumerate(events) if e["type"] == "hop_limit"]
        reports = [n for n, e in enumerate(events) if e["type"] == "role_report"]
        stale = [n for n, e in enumerate(events) if e["type"] == "stale_outcome"]
        assert len(hand_offs) == record["hops"] == 8, request_id  # never more than max_hops
        assert len(stops) == 1 and record["status"] == "failed", request_id
        # Each call's outcome once: a report, or stale when it came back after the stop (the
        # request's next epoch), and then only calls under way at the stop.
        assert len(reports) + len(stale) == sum(e["request_id"] == request_id for e in seen)
        assert all(n < stops[0] for n in reports) and len(stale) <= 2


def _record(workspace: Workspace, request_id: str) -> dict[str, Any]:
    record: dict[str, Any] = json.loads(workspace.request_path(request_id).read_bytes())
    return record


def test_status_after_killing_workers_shows_only_the_live_ones(
    team_workspace: Callable[..., Workspace],
) -> None:
    workspace = team_workspace(sections={"queue": {"lease_seconds": 1}})
    workers = [_worker(workspace) for _ in range(3)]  # serving, idle
    leases = workspace.queue_dir / "workers"
    try:

        def live() -> list[str]:
            return [lease["worker"] for lease in _cli_json(workspace, "status")["workers"]]

        eventually_sync(lambda: len(live()) == 3, "three live workers", 60)
        for worker in workers[:2]:
            worker.send_signal(signal.SIGKILL)
            worker.communicate(timeout=30)
        (survivor,) = [lease for lease in leases.iterdir() if f"-{workers[2].pid}-" in lease.name]
        # Dead once their lease (1 s) has passed: not listed; their files removed by the live
        # worker once it has long passed (3 leases).
        eventually_sync(lambda: live() == [survivor.stem], "only the live worker listed", 30)
        eventually_sync(lambda: list(leases.iterdir()) == [survivor], "the dead leases removed", 30)
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.send_signal(signal.SIGTERM)
                worker.communicate(timeout=60)
    assert workers[2].returncode == 0


def _lease_keys(settings: NatsSettings) -> list[str]:
    """The keys of the team's workers bucket, as another program lists them."""
    with _connected(settings) as connection:
        bucket = connection.names.workers

        async def keys() -> list[str]:
            kv = await connection.js.key_value(bucket)
            return sorted(await connection.bucket_keys(kv, bucket))

        found: list[str] = connection.call(keys)
        return found


def test_nats_status_after_killing_workers_shows_only_the_live_ones(
    team_workspace: Callable[..., Workspace], tmp_path: Path, nats_server: Any
) -> None:
    settings: NatsSettings = nats_server.settings()
    _nats_seed(settings, [], "qa", events=0, lease=2)  # the team's lease: 2 s
    hosts = _nats_hosts(team_workspace, tmp_path, settings, "valid", 3, lease_seconds=2)
    workers = [_worker(host) for host in hosts]  # serving, idle
    try:

        def listed() -> list[str]:
            return [lease["worker"] for lease in _cli_json(hosts[0], "status")["workers"]]

        eventually_sync(lambda: len(listed()) == 3, "three live workers", 60)
        for worker in workers[:2]:
            worker.send_signal(signal.SIGKILL)
            worker.communicate(timeout=30)
        (survivor,) = [name for name in listed() if f"-{workers[2].pid}-" in name]
        # Gone once their lease (2 s) has passed: the server removed their entries (a TTL),
        # so no one lists them, `lease expired` or not.
        eventually_sync(lambda: listed() == [survivor], "only the live worker listed", 30)
        assert _lease_keys(settings) == [token_of(survivor)]
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.send_signal(signal.SIGTERM)
                worker.communicate(timeout=60)
    assert workers[2].returncode == 0
    assert _lease_keys(settings) == []  # the last one retired: nothing left of any of them
