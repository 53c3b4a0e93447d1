"""``NatsConnection`` on real servers: what it makes on the server and what it leaves as it is
(the team's queue keeps the ack wait it was made with, whoever connects later), the one line it
says about a server it cannot use (no JetStream, refused credentials, replicas without a
cluster, nobody there), and its one owner: the scope that opened it, which closes it."""

from __future__ import annotations

import asyncio
import re
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest

from teams_runtime.actors.intake._submit import submit
from teams_runtime.actors.team._team import Team
from teams_runtime.codecs.config import NatsSettings
from teams_runtime.codecs.envelopes import MessageEnvelope
from teams_runtime.codecs.roles import ROLES
from teams_runtime.exceptions import EnvelopeError, StorageError
from teams_runtime.storage import Workspace
from teams_runtime.storage.blocking import view_store
from teams_runtime.storage.nats._names import NatsNames, token_of
from teams_runtime.storage.nats._stray_subjects import check_subject
from teams_runtime.storage.nats.blocking_faces import blocking_queue
from teams_runtime.storage.nats.connection import NatsConnection, open_connection
from teams_runtime.storage.nats.nats_store import NatsRecordStore
from teams_runtime.storage.opening import blocking_storage, open_storage

from ...support.cli_in_process import init_nats_workspace, run_cli
from ...support.processes import stopped
from ...support.waiting import eventually, eventually_sync


def _ack_waits(connection: NatsConnection) -> dict[str, float]:
    names = connection.names

    async def look() -> dict[str, float]:
        waits = {}
        for role in ROLES:
            info = await connection.js.consumer_info(names.queue, names.role_consumer(role))
            waits[role] = info.config.ack_wait or 0.0
        return waits

    return connection.call(look)


def test_a_host_with_another_lease_leaves_the_teams_ack_wait_as_it_is(
    nats_server: Any, nats_connect: Callable[..., NatsConnection], log_messages: list[Any]
) -> None:
    settings = nats_server.settings()
    first = nats_connect(settings, queue_ack_seconds=30)  # made the team's queue
    assert not [m for m in log_messages if m.record["level"].name == "WARNING"]
    other = nats_connect(settings, queue_ack_seconds=3)  # `status` from a host with lease 3
    assert _ack_waits(first) == dict.fromkeys(ROLES, 30.0)  # not 3: last to connect wins nothing
    assert other.queue_ack_seconds == 30.0
    assert blocking_queue(other).lease_seconds == 30.0  # it renews within the server's 30 s
    # Said by a worker when its team starts (once logging is set up), not here: test_migrate.
    assert not [m for m in log_messages if m.record["level"].name == "WARNING"]


def test_a_missing_consumer_is_made_with_the_local_lease_and_the_shortest_one_rules(
    nats_server: Any, nats_connect: Callable[..., NatsConnection]
) -> None:
    settings = nats_server.settings()
    first = nats_connect(settings, queue_ack_seconds=30)
    planner = first.names.role_consumer("planner")
    first.call(lambda: first.js.delete_consumer(first.names.queue, planner))
    later = nats_connect(settings, queue_ack_seconds=6)
    assert _ack_waits(later) == dict.fromkeys(ROLES, 30.0) | {"planner": 6.0}
    assert later.queue_ack_seconds == 6.0  # renewing within 6 s keeps every role's claims


def test_existing_streams_are_kept_whatever_replicas_a_host_names(
    nats_server: Any, nats_connect: Callable[..., NatsConnection]
) -> None:
    settings = nats_server.settings()
    nats_connect(settings)
    # Replicas apply when the streams are made; these exist, so this connects.
    nats_connect(NatsSettings(url=settings.url, prefix=settings.prefix, replicas=3))


def test_replicas_on_a_server_without_a_cluster_is_one_line_naming_the_setting(
    nats_server: Any, nats_connect: Callable[..., NatsConnection]
) -> None:
    settings = nats_server.settings(replicas=3)
    with pytest.raises(StorageError) as raised:
        nats_connect(settings)
    assert str(raised.value) == (
        f"team_runtime.yaml backend.nats.replicas is 3, but the NATS server at {settings.url} "
        "is not part of a cluster (replicas > 1 not supported in non-clustered mode); set "
        "replicas: 1, or run a cluster of at least 3 servers (docs/scaling.md)."
    )


def test_a_server_without_jetstream_is_named_at_once(
    start_nats_server: Callable[..., Any], nats_connect: Callable[..., NatsConnection]
) -> None:
    server = start_nats_server()  # no -js
    # retry_seconds 3: before JetStream was checked at connect, calls found no responder and
    # were retried this long, then blamed a server that was running.
    settings = NatsSettings(url=server.url, retry_seconds=3)
    with pytest.raises(StorageError) as raised:
        nats_connect(settings)
    assert str(raised.value) == (
        f"the NATS server at {settings.url} answers, but JetStream is not enabled on it; start "
        "it with -js (or a jetstream block in its config file): the nats backend keeps "
        "requests and the queue in JetStream."
    )


def test_refused_credentials_are_said_without_the_password(
    start_nats_server: Callable[..., Any], nats_connect: Callable[..., NatsConnection]
) -> None:
    server = start_nats_server("-js", "--user", "alice", "--pass", "s3cretPW")
    where = f"127.0.0.1:{server.port}"
    with pytest.raises(StorageError) as raised:
        nats_connect(NatsSettings(url=f"nats://alice:wrongPW@{where}"))
    assert str(raised.value) == (
        f"the NATS server at nats://***@{where} refused the credentials in backend.nats.url "
        "(authorization violation); check the user and password (or token) there in "
        "team_runtime.yaml."
    )
    with pytest.raises(StorageError) as raised:
        nats_connect(NatsSettings(url=f"nats://{where}"))
    assert str(raised.value) == (
        f"the NATS server at nats://{where} requires credentials (authorization violation); "
        "write them in backend.nats.url in team_runtime.yaml as "
        "nats://USER:PASSWORD@HOST:PORT."
    )
    nats_connect(NatsSettings(url=f"nats://alice:s3cretPW@{where}"))


def test_an_unreachable_cluster_names_every_url_without_credentials(
    nats_connect: Callable[..., NatsConnection],
) -> None:
    url = "nats://u1:pw1@127.0.0.1:9,nats://u2:pw2@127.0.0.1:7"
    with pytest.raises(StorageError) as raised:
        nats_connect(NatsSettings(url=url, connect_seconds=0.5))
    message = str(raised.value)
    assert message.startswith(
        "cannot reach the NATS server at nats://***@127.0.0.1:9,nats://***@127.0.0.1:7 ("
    )
    assert "pw1" not in message and "pw2" not in message and "u1" not in message


# --- the server refusing a call ------------------------------------------------------------------


def test_a_put_into_a_full_queue_is_refused_at_once_with_one_line(
    nats_server: Any, nats_connect: Callable[..., NatsConnection]
) -> None:
    # 503 with err_code 10077 (a limit of the stream reached): waiting would not help, so it
    # is not retried for retry_seconds (here 5 s: then a raw APIError came out of the queue).
    settings = nats_server.settings(retry_seconds=5.0)
    connection = nats_connect(settings)
    queue = blocking_queue(connection)
    nats_server.limit_queue(settings.prefix, 100)
    envelope = MessageEnvelope(request_id="req-1", sender="planner", target="qa")
    with pytest.raises(StorageError) as refused:
        queue.put(envelope)
    assert re.fullmatch(
        rf"the NATS server at {re.escape(settings.url)} refused a queue put \(.+, err_code "
        r"10077\)\.",
        str(refused.value),
    )
    assert queue.counts() == dict.fromkeys(ROLES, 0)
    nats_server.limit_queue(settings.prefix, -1)
    queue.put(envelope)
    assert queue.counts()["qa"] == 1


def test_submit_to_a_full_queue_fails_with_one_line_and_no_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], nats_server: Any
) -> None:
    settings = nats_server.settings()
    root = init_nats_workspace(tmp_path / "host", settings)
    where = ["--workspace", str(root)]
    assert run_cli(capsys, "status", *where)[0] == 0  # the team's streams exist now
    nats_server.limit_queue(settings.prefix, 100)
    status, out, err = run_cli(capsys, "submit", "--role", "planner", "--scope", "x", *where)
    assert (status, out) == (2, "")
    assert err.startswith(f"teams-runtime: error: the NATS server at {settings.url} refused a ")
    assert "err_code 10077" in err and "Traceback" not in err and err.count("\n") == 1


def test_envelope_subjects_give_back_their_role_and_request_token() -> None:
    names = NatsNames("team-1")
    token = token_of("요청.1")
    for subject in (
        names.waiting_subject("qa", token),
        names.deferred_subject("qa", token),
        names.rejected_subject("qa", token),
    ):
        assert names.place_of(subject) == ("qa", token)
    for stray in ("team-1.q.qa", "team-1.q.qa.a.b", "team-2.q.qa.x", "team-1.q..x", "team-1"):
        assert names.place_of(stray) is None  # not a subject the runtime writes
    assert names.set_aside_subject("team-1.q.qa.a.b") == "team-1.rejected.qa.a.b"
    assert names.set_aside_subject("team-1.deferred.qa") == "team-1.rejected.qa"
    assert names.set_aside_subject("team-1.q..x") == "team-1.rejected._"
    assert names.waiting_subject() == "team-1.q.*.*"
    assert names.deferred_subject(token=token) == f"team-1.deferred.*.{token}"


# --- one owner for every connection ------------------------------------------------------------


def test_a_store_or_queue_used_after_its_scope_ended_says_so(
    tmp_path: Path, nats_server: Any
) -> None:
    settings = nats_server.settings()
    root = Workspace(init_nats_workspace(tmp_path / "host", settings))
    with blocking_storage(root) as storage:
        assert storage.store.create("req-1", {"request_id": "req-1", "events": []})
        assert storage.queue.counts() == dict.fromkeys(ROLES, 0)
    closed = (
        rf"^the connection to the NATS server at {re.escape(settings.url)} is closed: the "
        r"scope that opened it \(a Team's run, open_context, open_backend\) has ended; use "
        r"the store and queue inside it\.$"
    )
    with pytest.raises(StorageError, match=closed):
        storage.store.exists("req-1")
    with pytest.raises(StorageError, match=closed):
        storage.queue.counts()


def test_every_scope_has_a_connection_of_its_own(tmp_path: Path, nats_server: Any) -> None:
    # No process-wide connection: a scope that ends closes only its own, whoever else is open.
    root = Workspace(init_nats_workspace(tmp_path / "host", nats_server.settings()))
    with blocking_storage(root) as outer:
        assert isinstance(outer.awaited, NatsRecordStore)
        with blocking_storage(root) as inner:
            assert isinstance(inner.awaited, NatsRecordStore)
            assert inner.awaited.connection is not outer.awaited.connection
            inner.store.create("req-1", {"request_id": "req-1", "events": []})
        assert outer.store.exists("req-1")  # the inner scope closed its connection only
        with pytest.raises(StorageError, match=r"is closed: the scope that opened it"):
            inner.store.exists("req-1")


def _nats_tasks() -> list[asyncio.Task[Any]]:
    """The tasks of the NATS client still running on this loop."""
    running = [task for task in asyncio.all_tasks() if not task.done()]
    code = [getattr(task.get_coro(), "cr_code", None) for task in running]
    return [task for task, c in zip(running, code, strict=True) if "/nats/" in str(c)]


@pytest.mark.anyio
async def test_a_scope_closes_its_client_and_leaves_no_task_of_it_running(
    tmp_path: Path, nats_server: Any
) -> None:
    root = Workspace(init_nats_workspace(tmp_path / "host", nats_server.settings()))
    async with open_storage(root) as storage:
        store = storage.store
        assert isinstance(store, NatsRecordStore)
        await store.create("req-1", {"request_id": "req-1"})
        await store.load("req-1")  # an ordered consumer, ended
        await storage.queue.claim("qa", 1)  # the doorbell
        assert _nats_tasks()  # the client's reader, pinger, flusher; the heads watch
    assert store.connection.client.is_closed
    await anyio.wait_all_tasks_blocked()  # the cancelled ones finish
    assert _nats_tasks() == []


@pytest.mark.anyio
async def test_a_connect_that_fails_leaves_no_task_of_it_running(
    start_nats_server: Callable[..., Any],
) -> None:
    server = start_nats_server("-js", "--user", "alice", "--pass", "s3cretPW")
    with pytest.raises(StorageError, match="refused the credentials"):
        async with open_connection(NatsSettings(url=f"nats://alice:no@127.0.0.1:{server.port}")):
            pass
    await anyio.wait_all_tasks_blocked()
    assert _nats_tasks() == []


@pytest.mark.anyio
async def test_a_blocking_call_on_the_event_loop_is_refused_rather_than_hanging(
    nats_server: Any,
) -> None:
    async with open_connection(nats_server.settings()) as connection:
        store = await NatsRecordStore.open(connection)
        blocking = view_store(store, connection.call)
        with pytest.raises(RuntimeError, match=r"^a blocking NATS call on the event loop would"):
            blocking.exists("req-1")  # from a worker thread (anyio.to_thread) it works
        assert not await anyio.to_thread.run_sync(blocking.exists, "req-1")
        assert not await store.exists("req-1")  # on the loop: awaited


@pytest.mark.anyio
async def test_a_teams_run_opens_its_connection_and_closes_it_after(
    tmp_path: Path, nats_server: Any, team_workspace: Callable[..., Workspace]
) -> None:
    settings = nats_server.settings()
    backend = {"kind": "nats", "nats": {"url": settings.url, "prefix": settings.prefix}}
    workspace = team_workspace("valid", sections={"backend": backend})
    await submit(workspace.root, role="qa", scope="check")  # a scope of its own, closed now
    team = Team(workspace.root, roles=["qa"])
    with pytest.raises(RuntimeError, match=r"^the Team's queue is open only while it runs"):
        team.queue  # noqa: B018 - nothing is open before the run
    with anyio.fail_after(60):
        summary = await team.run(once=True)
    assert summary.handled == 1
    with pytest.raises(RuntimeError, match=r"^the Team's queue is open only while it runs"):
        team.queue  # noqa: B018 - the run closed what it opened
    await anyio.wait_all_tasks_blocked()
    assert _nats_tasks() == []
    async with team:  # open across runs and after them, for the block
        await submit(workspace.root, role="qa", scope="again")
        with anyio.fail_after(60):
            await team.run(once=True)
        assert sum((await team.queue.counts()).values()) == 0
        queue = team.queue
    with pytest.raises(StorageError, match=r"is closed: the scope that opened it"):
        await queue.counts()


@pytest.mark.anyio
async def test_closing_our_own_connection_is_not_reported_as_lost(
    nats_server: Any, log_messages: list[Any]
) -> None:
    async with open_connection(nats_server.settings()) as connection:
        await connection.client.flush()
    assert connection.client.is_closed
    assert not [m for m in log_messages if "lost; reconnecting" in str(m)]


def test_a_subject_whose_last_token_is_no_request_id_is_said_so() -> None:
    envelope = MessageEnvelope(request_id="req-1", sender="user", target="qa", scope="x")
    with pytest.raises(EnvelopeError, match=r"^pz\.q\.qa\.=ZZ: the last token of its subject"):
        check_subject(envelope, "=ZZ", "pz.q.qa.=ZZ")
    with pytest.raises(EnvelopeError, match=r"its subject names another request than its"):
        check_subject(envelope, "req-2", "pz.q.qa.req-2")


@pytest.mark.anyio
async def test_a_lease_renewal_while_the_server_is_paused_names_the_server(
    tmp_path: Path, start_nats_server: Callable[..., Any]
) -> None:
    server = start_nats_server("-js")
    root = Workspace(init_nats_workspace(tmp_path / "host", server.settings()))
    async with open_storage(root) as storage:
        queue = storage.queue
        assert await queue.renew()
        server.process.send_signal(signal.SIGSTOP)  # the server pauses, as a frozen VM does
        try:
            # Paused once the signal is delivered: until then it still answers.
            await eventually(lambda: stopped(server.process.pid), "the server to pause")
            assert not await queue.renew()
        finally:
            server.process.send_signal(signal.SIGCONT)
        assert queue.renew_trouble == (
            f"the NATS server at {server.settings().shown_url} did not answer"
        )  # not the file storage's full disk


def test_commands_leave_no_consumers_behind_on_the_server(
    nats_server: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Each command's listings, watches and history reads make ephemeral consumers; with
    # nats-py's defaults a KV listing's stayed 5 minutes after its command, and a script polling
    # `status` piled up hundreds until the server refused more.
    settings = nats_server.settings()
    root = init_nats_workspace(tmp_path / "ws", settings)
    ws = ("--workspace", str(root))
    assert (
        run_cli(capsys, "submit", "--role", "qa", "--scope", "s", "--request-id", "r", *ws)[0] == 0
    )
    for _ in range(10):
        assert run_cli(capsys, "status", "--json", *ws)[0] == 0
        assert run_cli(capsys, "export", "r", *ws)[0] == 0

    async def ephemeral() -> int:
        async with open_connection(settings) as connection:
            infos = await connection.js.streams_info()
            ours = [info for info in infos if settings.prefix in info.config.name]
            durable = len(ROLES) + 1  # a consumer per role, and the deferred one
            return sum(info.state.consumer_count for info in ours) - durable

    eventually_sync(lambda: anyio.run(ephemeral) == 0, "the commands' consumers to go", 15)
