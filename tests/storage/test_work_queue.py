"""The ``WorkQueue`` protocol, run against every implementation through the ``work_queue``
fixture (a new backend joins by adding its ``pytest.param`` to ``QUEUES``), then what only the
file queue promises: its folders, rejected files with their reasons, the problems it names."""

from __future__ import annotations

import asyncio
import os
import re
import time
import unicodedata
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import nats
import pytest
from nats.js.api import StreamConfig

from teams_runtime.codecs.envelopes import MessageEnvelope
from teams_runtime.codecs.roles import ROLES
from teams_runtime.exceptions import UnsafeRequestIdError
from teams_runtime.storage import Claim, DeferredEnvelope, FileWorkQueue, WorkQueue, Workspace
from teams_runtime.storage.nats._names import token_of
from teams_runtime.storage.nats.blocking_faces import blocking_queue
from teams_runtime.storage.nats.connection import NatsConnection

from ..conftest import SMALL_MAX_PAYLOAD
from ..support.waiting import eventually_sync
from .conftest import QueueBackend


def _envelope(request_id: str = "req-1", target: str = "qa", **fields: str) -> MessageEnvelope:
    return MessageEnvelope(request_id=request_id, sender="planner", target=target, **fields)


def _ids(claims: list[Claim]) -> list[str]:
    return [claim.envelope.request_id for claim in claims if claim.envelope is not None]


def _waiting(work_queue: WorkQueue) -> int:
    return sum(work_queue.counts().values())


# --- the protocol -------------------------------------------------------------------------------


def test_a_claim_returns_the_envelope_as_put(work_queue: WorkQueue) -> None:
    envelope = MessageEnvelope(
        request_id="req-1",
        sender="planner",
        target="qa",
        intent="check",
        urgency="high",
        scope="Ünï scope",
        artifacts=["a.md"],
        params={"depth": {"n": 2}},
        body="please",
    )
    ticket = work_queue.put(envelope)
    assert isinstance(ticket, str) and ticket
    (claim,) = work_queue.claim("qa", 10)
    assert claim.envelope is not None and claim.envelope.envelope_id  # the queue named it
    assert claim.envelope == msgspec.structs.replace(
        envelope, envelope_id=claim.envelope.envelope_id
    )
    assert (claim.role, claim.problem) == ("qa", "")
    named = msgspec.structs.replace(envelope, envelope_id="env-given")
    work_queue.put(named)
    (claim,) = work_queue.claim("qa", 10)
    assert claim.envelope == named  # an id given is kept


def test_claims_are_oldest_first_and_respect_the_limit(work_queue: WorkQueue) -> None:
    for n in range(5):
        work_queue.put(_envelope(f"req-{n}"))
    assert work_queue.claim("qa", 0) == []
    assert _ids(work_queue.claim("qa", 2)) == ["req-0", "req-1"]
    assert _ids(work_queue.claim("qa", 10)) == ["req-2", "req-3", "req-4"]
    assert work_queue.claim("qa", 10) == []  # none is handed out twice
    assert _waiting(work_queue) == 5  # claimed ones still count until done


def test_a_role_claims_only_its_own_envelopes(work_queue: WorkQueue) -> None:
    work_queue.put(_envelope("req-1", "qa"))
    work_queue.put(_envelope("req-2", "planner"))
    assert _ids(work_queue.claim("developer", 10)) == []
    assert _ids(work_queue.claim("planner", 10)) == ["req-2"]
    (claim,) = work_queue.claim("qa", 10)
    assert (claim.role, _ids([claim])) == ("qa", ["req-1"])


def test_counts_per_role(work_queue: WorkQueue) -> None:
    assert work_queue.counts() == dict.fromkeys(ROLES, 0)
    work_queue.put(_envelope("req-1", "qa"))
    work_queue.put(_envelope("req-2", "qa"))
    work_queue.put(_envelope("req-3", "planner"))
    assert work_queue.counts() == dict.fromkeys(ROLES, 0) | {"qa": 2, "planner": 1}


def test_waiting_counts_what_no_worker_was_handed_as_the_snapshot_does(
    queue_backend: QueueBackend, work_queue: WorkQueue
) -> None:
    assert work_queue.waiting() == dict.fromkeys(ROLES, 0) == work_queue.snapshot().waiting
    for request_id in ("req-1", "req-2", "req-3"):
        work_queue.put(_envelope(request_id, "qa"))
    work_queue.put(_envelope("req-1", "planner"))
    work_queue.put(_envelope("req-2", "developer"))
    (held,) = work_queue.claim("qa", 1)
    (released,) = work_queue.claim("developer", 1)
    work_queue.release(released)
    expected = dict.fromkeys(ROLES, 0) | {"qa": 2, "planner": 1}
    assert work_queue.waiting() == expected == work_queue.snapshot().waiting
    assert queue_backend.new_queue().waiting() == expected  # any worker sees the same
    work_queue.done(held)
    assert work_queue.waiting() == expected == work_queue.snapshot().waiting


def test_done_removes_the_envelope(queue_backend: QueueBackend, work_queue: WorkQueue) -> None:
    work_queue.put(_envelope("req-1"))
    work_queue.put(_envelope("req-2"))
    (first,) = work_queue.claim("qa", 1)
    work_queue.done(first)
    assert work_queue.counts()["qa"] == 1
    other = queue_backend.new_queue()  # another worker, or the next run
    (second,) = other.claim("qa", 10)
    assert _ids([second]) == ["req-2"]
    other.done(second)
    assert _waiting(work_queue) == 0
    assert queue_backend.new_queue().claim("qa", 10) == []


class _Clock:
    """A clock the test moves: when deferred envelopes are due, without waiting for it."""

    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


def test_a_released_envelope_waits_for_its_next_attempt_then_any_worker_takes_it(
    queue_backend: QueueBackend,
) -> None:
    clock = _Clock()
    work_queue = queue_backend.new_queue(clock=clock)
    envelope = _envelope("req-1", envelope_id="env-1")
    work_queue.put(envelope)
    (claim,) = work_queue.claim("qa", 10)
    due = work_queue.release(claim)
    assert clock.now + 0.75 * 3 <= due <= clock.now + 3  # a few seconds, jittered
    assert work_queue.counts()["qa"] == 1
    assert work_queue.restore_deferred() == 0  # not due yet, for any worker
    other = queue_backend.new_queue(clock=clock)
    assert other.restore_deferred() == 0 and other.claim("qa", 10) == []
    (deferred,) = other.snapshot().deferred_envelopes
    assert deferred == DeferredEnvelope(
        role="qa",
        request_id="req-1",
        envelope_id="env-1",
        deferrals=1,
        next_attempt=deferred.next_attempt,
    )
    assert abs(deferred.next_attempt - due) < 0.01
    clock.now = due
    assert other.restore_deferred() == 1 and work_queue.restore_deferred() == 0
    assert other.snapshot().deferred_envelopes == []
    (again,) = other.claim("qa", 10)
    assert again.envelope == claim.envelope  # as put: its count is the queue's business


def test_each_deferral_waits_longer_whichever_worker_defers_it(queue_backend: QueueBackend) -> None:
    clock = _Clock()
    queue_backend.new_queue(clock=clock).put(_envelope("req-1"))
    waits = []
    for _ in range(4):
        worker = queue_backend.new_queue(clock=clock)  # another worker each time
        (claim,) = worker.claim("qa", 10)
        due = worker.release(claim)
        waits.append(due - clock.now)
        (deferred,) = worker.snapshot().deferred_envelopes
        assert deferred.deferrals == len(waits)
        clock.now = due
        assert worker.restore_deferred() == 1
    for number, wait in enumerate(waits):  # 3 s, 6 s, 12 s, 24 s, each cut by up to a quarter
        assert 0.75 * 3 * 2**number <= wait <= 3 * 2**number


def test_a_rejected_envelope_is_set_aside(
    queue_backend: QueueBackend, work_queue: WorkQueue
) -> None:
    work_queue.put(_envelope("req-1"))
    work_queue.put(_envelope("req-2"))
    (first,) = work_queue.claim("qa", 1)
    work_queue.reject(first, "a person should look at this")
    assert work_queue.counts()["qa"] == 1
    (second,) = work_queue.claim("qa", 10)  # the rejected one is not handed out again
    assert _ids([second]) == ["req-2"]
    work_queue.done(second)
    assert _waiting(work_queue) == 0
    assert queue_backend.new_queue().claim("qa", 10) == []  # nor to anyone else


def test_drop_takes_waiting_and_deferred_envelopes_and_leaves_held_ones(
    queue_backend: QueueBackend, work_queue: WorkQueue
) -> None:
    for role in ("qa", "planner", "developer"):
        work_queue.put(_envelope("req-1", role))
    work_queue.put(_envelope("req-2", "qa"))
    (held,) = work_queue.claim("qa", 1)  # a worker is calling the model for it
    (released,) = work_queue.claim("developer", 1)
    work_queue.release(released)
    assert work_queue.drop("req-1") == 2  # planner's waiting, developer's deferred; not qa's
    assert work_queue.counts() == dict.fromkeys(ROLES, 0) | {"qa": 2}
    other = queue_backend.new_queue()
    assert other.restore_deferred() == 0
    assert other.claim("planner", 10) == [] and _ids(other.claim("qa", 10)) == ["req-2"]
    work_queue.done(held)  # the holder finishes its call
    assert work_queue.counts()["qa"] == 1


def test_an_id_put_in_nfd_is_queued_under_its_nfc_form(work_queue: WorkQueue) -> None:
    nfc = "요청-é.1"
    nfd = unicodedata.normalize("NFD", nfc)
    assert nfd != nfc
    work_queue.put(_envelope(nfd))
    assert work_queue.drop(nfc) == 1  # a cancel names the request in NFC (as records do)
    work_queue.put(_envelope(nfd, "planner"))
    (claim,) = work_queue.claim("planner", 10)
    assert claim.envelope is not None and claim.envelope.request_id == nfc
    assert [lease.holds for lease in work_queue.snapshot().workers] == [[f"planner:{nfc}"]]
    work_queue.done(claim)


def test_a_retiring_workers_claims_wait_again_for_anyone(
    queue_backend: QueueBackend, work_queue: WorkQueue
) -> None:
    work_queue.put(_envelope("req-1"))
    work_queue.put(_envelope("req-2"))
    work_queue.claim("qa", 2)
    work_queue.retire()  # stopped (SIGTERM) in the middle of its calls
    other = queue_backend.new_queue()
    snapshot = other.snapshot()
    assert (snapshot.waiting["qa"], snapshot.claimed["qa"], snapshot.workers) == (2, 0, [])
    assert other.drop("req-2") == 1  # waiting again, so a cancel drops it
    assert _ids(other.claim("qa", 10)) == ["req-1"]


def test_what_a_worker_holds_shows_from_its_claim_to_its_done(
    queue_backend: QueueBackend, work_queue: WorkQueue
) -> None:
    work_queue.put(_envelope("req.1"))
    work_queue.put(_envelope("req-2"))
    first, _ = work_queue.claim("qa", 2)
    observer = queue_backend.new_queue()  # `status`, from anywhere
    (lease,) = observer.snapshot().workers
    assert lease.alive and sorted(lease.holds) == ["qa:req-2", "qa:req.1"]
    work_queue.done(first)
    (lease,) = observer.snapshot().workers
    assert lease.holds == ["qa:req-2"]


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(b"{not json", id="not-json"),
        pytest.param(b"[1, 2]", id="not-an-object"),
        pytest.param(b'{"request_id": "req-1", "target": "qa"}', id="no-sender"),
        pytest.param(b'{"request_id": "req-1", "sender": "x", "target": "planner"}', id="target"),
        pytest.param(b'{"request_id": "../x", "sender": "x", "target": "qa"}', id="unsafe-id"),
        pytest.param(b"\xff\xfe", id="not-utf8"),
    ],
)
def test_a_corrupt_envelope_is_a_claim_with_a_problem(
    queue_backend: QueueBackend, work_queue: WorkQueue, data: bytes
) -> None:
    work_queue.put(_envelope("req-0"))
    queue_backend.put_bytes("qa", data)
    work_queue.put(_envelope("req-2"))
    good, bad, later = work_queue.claim("qa", 10)
    assert _ids([good, later]) == ["req-0", "req-2"]  # still in arrival order
    assert (bad.role, bad.envelope) == ("qa", None)
    assert Path(bad.ticket).name in bad.problem  # names which envelope it is
    work_queue.reject(bad, bad.problem)
    assert work_queue.counts()["qa"] == 2


# --- the file queue -----------------------------------------------------------------------------


def test_file_queue_keeps_one_file_per_envelope(tmp_path: Path) -> None:
    workspace = Workspace(tmp_path)
    envelope = _envelope("req-1", scope="Ünï")
    ticket = Path(FileWorkQueue(workspace).put(envelope))
    assert ticket.parent == workspace.role_queue("qa")
    assert ticket.name.endswith("-req-1.json")
    stored = msgspec.json.decode(ticket.read_bytes(), type=MessageEnvelope)
    assert stored == msgspec.structs.replace(envelope, envelope_id=stored.envelope_id)
    assert "Ünï" in ticket.read_text(encoding="utf-8")  # readable by a person
    assert list(ticket.parent.iterdir()) == [ticket]  # no temp file left behind


def test_file_queue_never_claims_a_half_written_envelope(tmp_path: Path) -> None:
    folder = Workspace(tmp_path).role_queue("qa")
    folder.mkdir(parents=True)
    (folder / ".00001-x-req-1.json.123.abcd.tmp").write_text('{"request_id": "req-1"')
    (folder / "00002-notes.txt").write_text("not an envelope file")
    queue = FileWorkQueue(Workspace(tmp_path))
    assert queue.claim("qa", 10) == []
    assert queue.counts()["qa"] == 0


def test_file_queue_rejects_into_a_folder_with_the_reason(tmp_path: Path) -> None:
    workspace = Workspace(tmp_path)
    queue = FileWorkQueue(workspace)
    ticket = Path(queue.put(_envelope("req-1")))
    content = ticket.read_bytes()
    (claim,) = queue.claim("qa", 10)
    queue.reject(claim, "the reason")
    rejected = workspace.queue_dir / "rejected" / f"qa-{ticket.name}"
    assert rejected.read_bytes() == content  # kept as it was, never deleted
    assert rejected.with_name(rejected.name + ".reason").read_text() == "the reason\n"
    assert not ticket.exists()


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        pytest.param(b"{oops", "not valid JSON", id="not-json"),
        pytest.param(
            b'{"request_id": "req-1", "target": "qa"}', "not a valid envelope", id="shape"
        ),
        pytest.param(
            b'{"request_id": "req-1", "sender": "x", "target": "planner"}',
            "its target is not the qa role of this folder.",
            id="target",
        ),
        pytest.param(
            b'{"request_id": "a/b", "sender": "x", "target": "qa"}',
            "its request id is not a safe file name.",
            id="unsafe-id",
        ),
    ],
)
def test_file_queue_problems_name_the_file(tmp_path: Path, data: bytes, problem: str) -> None:
    folder = Workspace(tmp_path).role_queue("qa")
    folder.mkdir(parents=True)
    path = folder / "0001-bad.json"
    path.write_bytes(data)
    (claim,) = FileWorkQueue(Workspace(tmp_path)).claim("qa", 10)
    assert Path(claim.ticket).name == path.name  # claimed: moved into the worker's folder
    assert re.match(rf"^{re.escape(str(path))}: {re.escape(problem)}", claim.problem)


def test_file_queue_refuses_unsafe_ids_and_unknown_roles(tmp_path: Path) -> None:
    queue = FileWorkQueue(Workspace(tmp_path))
    with pytest.raises(UnsafeRequestIdError, match=r"^request id '\.\./x' is not a safe"):
        queue.put(_envelope("../x"))
    with pytest.raises(ValueError, match=r"^unknown role 'boss'"):
        queue.put(_envelope("req-1", target="boss"))
    assert list(tmp_path.iterdir()) == []  # nothing written for either


def _lease_aged(workspace: Workspace, worker: str, seconds: float) -> Path:
    """A lease file of ``worker`` last renewed ``seconds`` ago (a killed worker's)."""
    FileWorkQueue(workspace, worker_id=worker).renew()
    lease = workspace.queue_dir / "workers" / f"{worker}.lease"
    then = time.time() - seconds
    os.utime(lease, (then, then))
    return lease


def test_file_status_shows_live_workers_and_dead_ones_only_while_they_hold_claims(
    tmp_path: Path,
) -> None:
    workspace = Workspace(tmp_path)
    FileWorkQueue(workspace, worker_id="live").renew()
    _lease_aged(workspace, "idle-dead", 5)  # died holding nothing: lease 2.5 leases old
    holder = FileWorkQueue(workspace, worker_id="holder-dead", lease_seconds=2)
    holder.put(_envelope("req-1"))
    holder.claim("qa", 1)
    _lease_aged(workspace, "holder-dead", 5)
    snapshot = FileWorkQueue(workspace, lease_seconds=2).snapshot()
    shown = [(lease.worker, lease.alive, lease.holds) for lease in snapshot.workers]
    assert shown == [("holder-dead", False, ["qa:req-1"]), ("live", True, [])]


def test_file_leases_long_past_are_removed_by_the_next_worker_looking_for_work(
    tmp_path: Path,
) -> None:
    workspace = Workspace(tmp_path)
    stale = _lease_aged(workspace, "long-dead", 6.5)  # past STALE_LEASES x 2 s
    recent = _lease_aged(workspace, "just-dead", 3)  # expired, not long past: kept a while
    stray = workspace.queue_dir / "workers" / "notes.txt"
    stray.write_text("not a lease")
    worker = FileWorkQueue(workspace, lease_seconds=2)
    assert worker.claim("qa", 1) == []  # looking for work tidies up
    assert not stale.exists() and recent.exists() and stray.exists()
    assert [lease.worker for lease in worker.snapshot().workers] == [worker.worker_id]


# --- the nats queue -----------------------------------------------------------------------------


@pytest.fixture
def nats_connection(
    nats_server: Any, nats_connect: Callable[..., NatsConnection]
) -> NatsConnection:
    """A connection for a team of its own whose deliveries are claims for 1 s at a time."""
    return nats_connect(nats_server.settings(), queue_ack_seconds=1)


def test_nats_queue_puts_an_envelope_id_once(nats_connection: NatsConnection) -> None:
    queue = blocking_queue(nats_connection)
    envelope = _envelope("req-1", envelope_id="env-7")
    assert queue.put(envelope) == queue.put(envelope)  # a retried put: the same message
    assert queue.counts()["qa"] == 1


def test_nats_claims_are_kept_while_renewed_and_delivered_again_when_not(
    nats_connection: NatsConnection,
) -> None:
    worker, other = blocking_queue(nats_connection), blocking_queue(nats_connection)
    worker.put(_envelope("req-1"))
    claim = _claim_one(worker, "qa")
    # The time is the scenario: renewed for more than twice the ack wait, never handed out.
    held_until = time.monotonic() + 2.5
    while time.monotonic() < held_until:
        assert worker.renew()  # a long model call: in-progress acks
        assert other.claim("qa", 10) == []
        time.sleep(0.3)
    # The worker stops renewing (it died): delivered again.
    again = eventually_sync(lambda: other.claim("qa", 10), "the envelope delivered again")
    assert [c.envelope for c in again] == [claim.envelope]
    other.done(again[0])
    assert sum(other.counts().values()) == 0


def _claim_one(queue: WorkQueue, role: str) -> Claim:
    """The envelope just put for ``role``: a claim right after a put may find nothing yet (the
    server tells its consumer about a new message a moment after acknowledging it), so ask
    until it comes."""
    (claim,) = eventually_sync(lambda: queue.claim(role, 1), "the envelope put to be handed out")
    return claim


def test_nats_status_lists_each_workers_lease_and_holds(nats_connection: NatsConnection) -> None:
    worker = blocking_queue(nats_connection, worker_id="host-a.1")
    worker.put(_envelope("req.1"))
    _claim_one(worker, "qa")
    assert worker.renew()
    snapshot = worker.snapshot()
    assert (snapshot.waiting["qa"], snapshot.claimed["qa"]) == (0, 1)
    (lease,) = snapshot.workers
    assert (lease.worker, lease.alive, lease.holds) == ("host-a.1", True, ["qa:req.1"])
    worker.retire()  # its claim waits again at once, its lease goes
    snapshot = worker.snapshot()
    assert snapshot.workers == []
    assert (snapshot.waiting["qa"], snapshot.claimed["qa"]) == (1, 0)  # waiting, for anyone


def test_nats_counts_do_not_wait_for_the_consumers_own_count_of_a_new_message(
    nats_connection: NatsConnection, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server counts a new message into a consumer's ``num_pending`` a moment after it
    acknowledged the publish. Right after ``retire`` (the claim queued again as a new message,
    the delivery acked) a full run once saw the envelope neither waiting nor claimed, which
    ``status`` showed and ``run --once`` took for an idle team. Here every consumer info
    answers as the server did in that moment."""
    worker = blocking_queue(nats_connection, worker_id="host-a.1")
    worker.put(_envelope("req.1"))
    _claim_one(worker, "qa")
    worker.retire()
    asked = nats_connection.js.consumer_info

    async def not_counted_yet(*args: Any, **kwargs: Any) -> Any:
        info = await asked(*args, **kwargs)
        info.num_pending = 0
        return info

    monkeypatch.setattr(nats_connection.js, "consumer_info", not_counted_yet)
    snapshot = worker.snapshot()
    assert (snapshot.waiting["qa"], snapshot.claimed["qa"]) == (1, 0)
    assert worker.waiting()["qa"] == 1  # the live view's queued column says the same


def test_an_envelope_larger_than_a_nats_message_is_queued_with_its_body_cut(
    small_nats_server: Any, nats_connect: Callable[..., NatsConnection]
) -> None:
    """A follow-up's body is the role's summary (kept whole in the record): past the server's
    max_payload the queued copy is cut with a note, rather than the request stalling on a put
    the server refuses (found when a 1.1 MB summary left its follow-up unqueued)."""
    connection = nats_connect(small_nats_server.settings())
    queue = blocking_queue(connection)
    body = "é" * SMALL_MAX_PAYLOAD  # two bytes each in UTF-8: twice a message
    queue.put(MessageEnvelope(request_id="req-1", sender="planner", target="qa", body=body))
    claim = _claim_one(queue, "qa")
    assert claim.envelope is not None
    kept = claim.envelope.body
    assert kept.startswith("é" * 1000)
    assert kept.endswith("the whole text is in the request's record]")
    assert len(kept.encode("utf-8")) < SMALL_MAX_PAYLOAD
    queue.done(claim)


def _workers_bucket(connection: NatsConnection) -> tuple[list[str], int]:
    """The keys of the team's workers bucket and how many messages its stream holds."""
    bucket = connection.names.workers

    async def look() -> tuple[list[str], int]:
        kv = await connection.js.key_value(bucket)
        keys = await connection.bucket_keys(kv, bucket)
        info = await connection.js.stream_info(f"KV_{bucket}")
        return sorted(keys), int(info.state.messages)

    found: tuple[list[str], int] = connection.call(look)
    return found


def test_nats_lease_entries_expire_by_the_server_a_lease_after_their_last_renewal(
    nats_connection: NatsConnection,
) -> None:
    """The team's lease here is 1 s: an entry not renewed (a worker killed) is removed by the
    server itself, and a retired worker leaves nothing behind, not even its purge marker."""
    dead, live = blocking_queue(nats_connection), blocking_queue(nats_connection)
    assert dead.renew() and live.renew()
    assert {lease.worker for lease in live.snapshot().workers} == {dead.worker_id, live.worker_id}
    alone = [token_of(live.worker_id)]

    def only_the_renewed_one_left() -> bool:  # the live one renews while it waits
        assert live.renew()
        return _workers_bucket(nats_connection)[0] == alone

    eventually_sync(only_the_renewed_one_left, "the dead one's expiry")
    assert [lease.worker for lease in live.snapshot().workers] == [live.worker_id]
    live.retire()
    eventually_sync(lambda: _workers_bucket(nats_connection) == ([], 0), "an empty bucket")


def test_nats_a_workers_bucket_made_without_ttls_gets_them(
    nats_server: Any, nats_connect: Callable[..., NatsConnection]
) -> None:
    """A bucket made before entries expired (by an older client, or by hand) is the one change
    the runtime makes to what exists: it lets entries carry a TTL, and they expire."""
    settings = nats_server.settings()

    async def old_bucket() -> None:
        client = await nats.connect(settings.url)
        try:
            bucket = f"{settings.prefix}_workers"
            config = StreamConfig(
                name=f"KV_{bucket}", subjects=[f"$KV.{bucket}.>"], max_msgs_per_subject=1,
                allow_rollup_hdrs=True, deny_delete=True, allow_direct=True,
            )  # fmt: skip
            await client.jetstream().add_stream(config)
        finally:
            await client.close()

    asyncio.run(old_bucket())
    connection = nats_connect(settings, queue_ack_seconds=1)
    dead = blocking_queue(connection)
    assert dead.renew()
    assert _workers_bucket(connection)[0] == [token_of(dead.worker_id)]
    eventually_sync(lambda: _workers_bucket(connection) == ([], 0), "the entry to expire")
