"""One envelope per id: a queue refuses a second put of an envelope id for as long as the first
may exist (waiting, held, deferred, set aside), on every backend, however many writers race;
once the first is done or dropped, the id may be queued again; a put killed half-way leaves
nothing that blocks the id."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from teams_runtime.codecs.envelopes import MessageEnvelope
from teams_runtime.storage import Claim, FileWorkQueue, WorkQueue, Workspace
from teams_runtime.storage.files._queued_ids import _key as _file_key
from teams_runtime.storage.nats._names import token_of
from teams_runtime.storage.nats._queued_ids import QueuedIds
from teams_runtime.storage.nats.blocking_faces import blocking_queue
from teams_runtime.storage.nats.connection import NatsConnection

from ..support.waiting import eventually_sync
from .conftest import QueueBackend


class _Clock:
    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


def _envelope(envelope_id: str = "env-dup", request_id: str = "req-1") -> MessageEnvelope:
    return MessageEnvelope(
        request_id=request_id, sender="planner", target="qa", envelope_id=envelope_id
    )


def _copies(queue: WorkQueue) -> int:
    """Every envelope the queue has: waiting, held or deferred."""
    snapshot = queue.snapshot()
    return (
        sum(snapshot.waiting.values())
        + sum(snapshot.claimed.values())
        + sum(snapshot.deferred.values())
    )


def _claim(queue: WorkQueue) -> Claim:
    (claim,) = queue.claim("qa", 1)
    return claim


def test_a_second_put_is_refused_wherever_the_first_is(queue_backend: QueueBackend) -> None:
    clock = _Clock()
    queue = queue_backend.new_queue(clock=clock)
    first = queue.put(_envelope())
    assert queue.put(_envelope()) == first and _copies(queue) == 1  # waiting
    claim = _claim(queue)
    queue.put(_envelope())
    assert _copies(queue) == 1 and queue.claim("qa", 10) == []  # held
    clock.now = queue.release(claim)
    queue.put(_envelope())
    assert _copies(queue) == 1  # deferred, then due
    assert queue.restore_deferred() == 1
    queue.reject(_claim(queue), "for a person")
    queue.put(_envelope())
    assert _copies(queue) == 0  # set aside: not queued a second time beside it
    assert queue.put(_envelope("env-other")) != first and _copies(queue) == 1


def test_a_file_id_is_queued_again_once_its_envelope_is_done_or_dropped(tmp_path: Path) -> None:
    queue = FileWorkQueue(Workspace(tmp_path))
    queue.put(_envelope())
    queue.done(_claim(queue))
    assert _copies(queue) == 0
    queue.put(_envelope())
    assert _copies(queue) == 1
    assert queue.drop("req-1") == 1
    queue.put(_envelope())
    assert _copies(queue) == 1
    queue.done(_claim(queue))
    assert list((tmp_path / ".teams_runtime" / "queued").iterdir()) == []  # nothing left behind


def test_nats_done_and_drop_remove_the_ids_key(
    nats_server: Any, nats_connect: Callable[..., NatsConnection]
) -> None:
    # (A put of the same id right after is still dropped as a duplicate by the server's own
    # de-duplication window: its outcome is recorded, so that changes nothing.)
    connection = nats_connect(nats_server.settings())
    queue = blocking_queue(connection)

    def keys() -> list[str]:
        async def listing() -> list[str]:
            kv = await connection.js.key_value(connection.names.queued)
            return await connection.bucket_keys(kv, connection.names.queued)

        return connection.call(listing)

    queue.put(_envelope("env-1"))
    queue.put(_envelope("env-2", request_id="req-2"))
    assert len(keys()) == 2
    queue.done(_claim(queue))
    assert len(keys()) == 1
    assert queue.drop("req-2") == 1
    assert keys() == []


def test_racing_puts_of_one_id_queue_it_once(queue_backend: QueueBackend) -> None:
    queues = [queue_backend.new_queue() for _ in range(6)]
    for round_number in range(5):
        start = threading.Barrier(len(queues))
        envelope = _envelope(f"env-race-{round_number}", request_id=f"req-{round_number}")

        def put(queue: WorkQueue, start: threading.Barrier = start) -> None:
            start.wait()
            queue.put(envelope)  # noqa: B023 (joined before the next round)

        threads = [threading.Thread(target=put, args=(queue,)) for queue in queues]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert _copies(queues[0]) == round_number + 1  # one more each round, never two


# --- files: processes, and a put killed half-way ------------------------------------------------

_PUTTER = """
import sys
from teams_runtime.codecs.envelopes import MessageEnvelope
from teams_runtime.storage import FileWorkQueue, Workspace
queue = FileWorkQueue(Workspace(sys.argv[1]))
for number in range(20):
    queue.put(MessageEnvelope(request_id=f"req-{number}", sender="planner", target="qa",
                              envelope_id=f"env-{number}"))
"""

_HALF_PUT = """
import sys, time
from teams_runtime.storage import FileWorkQueue, Workspace
queue = FileWorkQueue(Workspace(sys.argv[1]))
with queue._ids.first("env-dup", "qa", sys.argv[2]) as first:
    print("holding", flush=True)
    time.sleep(60)  # killed here: the marker is made, its envelope never written
"""


def test_file_puts_from_racing_processes_queue_each_id_once(tmp_path: Path) -> None:
    putters = [subprocess.Popen([sys.executable, "-c", _PUTTER, str(tmp_path)]) for _ in range(4)]
    assert [putter.wait(timeout=60) for putter in putters] == [0, 0, 0, 0]
    queue = FileWorkQueue(Workspace(tmp_path))
    assert _copies(queue) == 20
    assert len(list(Workspace(tmp_path).role_queue("qa").iterdir())) == 20


def test_a_file_put_killed_half_way_blocks_the_id_only_while_it_lives(tmp_path: Path) -> None:
    name = f"{time.time_ns():020d}-abcdef-req-1.json"
    half = subprocess.Popen(
        [sys.executable, "-c", _HALF_PUT, str(tmp_path), name],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert half.stdout is not None
    with half.stdout:
        assert half.stdout.readline() == "holding\n"
    queue = FileWorkQueue(Workspace(tmp_path))
    done = threading.Event()
    putter = threading.Thread(target=lambda: (queue.put(_envelope()), done.set()))
    putter.start()
    assert not done.wait(0.3)  # the half-made put still lives: its envelope may come
    os.kill(half.pid, signal.SIGKILL)
    half.wait()
    eventually_sync(done.is_set, "the put to go on once the half-made one died", 30)
    putter.join()
    assert _copies(queue) == 1  # taken over: the dead put's envelope never existed
    queue.put(_envelope())
    assert _copies(queue) == 1


# --- NATS: a key left by a put killed half-way -------------------------------------------------


def test_a_nats_put_killed_half_way_leaves_nothing_that_blocks_the_id(
    nats_server: Any, nats_connect: Callable[..., NatsConnection]
) -> None:
    connection = nats_connect(nats_server.settings())
    queue = blocking_queue(connection)
    ids = QueuedIds(connection)
    marked = connection.call(lambda: ids.first("env-dup", "qa", token_of("req-1")))
    assert marked is None  # the id is marked queued; the put dies before its publish
    queue.put(_envelope())
    assert _copies(queue) == 1
    queue.put(_envelope())
    assert _copies(queue) == 1


def test_nats_refuses_a_second_put_past_the_servers_duplicate_window(
    nats_server: Any, nats_connect: Callable[..., NatsConnection]
) -> None:
    connection = nats_connect(nats_server.settings())
    queue = blocking_queue(connection)

    async def short_window() -> None:  # the server's own de-duplication: 0.2 s, not 2 minutes
        info = await connection.js.stream_info(connection.names.queue)
        info.config.duplicate_window = 0.2
        await connection.js.update_stream(info.config)

    connection.call(short_window)
    queue.put(_envelope())
    claim = _claim(queue)
    time.sleep(0.4)  # past the window: only the queue itself can refuse the copy now
    queue.put(_envelope())
    assert _copies(queue) == 1
    queue.done(claim)
    assert _copies(queue) == 0


@pytest.mark.parametrize("planted", ["link", "folder", "pipe"])
def test_something_planted_at_a_marker_leaves_the_put_unguarded_not_stuck(
    tmp_path: Path, planted: str
) -> None:
    queue = FileWorkQueue(Workspace(tmp_path))
    markers = tmp_path / ".teams_runtime" / "queued"
    markers.mkdir(parents=True)
    marker = markers / _file_key("env-dup", "qa")
    if planted == "link":
        marker.symlink_to(tmp_path / "elsewhere")
    elif planted == "folder":
        marker.mkdir()
    else:
        os.mkfifo(marker)
    queue.put(_envelope())  # no traceback, nothing stuck: queued as if there were no marker
    assert _copies(queue) == 1
    assert [stray.where for stray in queue.strays()] == [str(marker)]  # `status` names it
    queue.done(_claim(queue))
    assert _copies(queue) == 0 and os.path.lexists(marker)  # another program's: left alone


def test_a_marker_naming_another_envelope_does_not_refuse_the_put(tmp_path: Path) -> None:
    queue = FileWorkQueue(Workspace(tmp_path))
    queue.put(_envelope("env-other", request_id="req-2"))
    (other,) = Workspace(tmp_path).role_queue("qa").iterdir()
    marker = tmp_path / ".teams_runtime" / "queued" / _file_key("env-dup", "qa")
    marker.write_text(f"qa/{other.name}")  # names a real envelope, but not env-dup
    queue.put(_envelope())
    assert _copies(queue) == 2  # env-dup is queued: the envelope named is another's
    queue.put(_envelope())
    assert _copies(queue) == 2  # and now the marker is its own
