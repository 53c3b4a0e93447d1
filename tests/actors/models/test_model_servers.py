"""Model servers that come and go: a server that is away is not the request's fault. Its
calls wait (not an attempt, the envelope stays queued), the roles take no new work for it, one
call at a time probes it with backoff, one log line when it goes away and one when it is back,
and `status` (another process) says so. Real servers on loopback, stopped and restarted on the
same port."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import pytest

from teams_runtime.actors.models import _servers as model_servers
from teams_runtime.actors.models._openai import OpenAIBackend
from teams_runtime.actors.models._servers import ModelServers
from teams_runtime.actors.team._team import RunSummary, Team
from teams_runtime.codecs.config import OpenAIConfig
from teams_runtime.policy.prompts import PromptBundle
from teams_runtime.storage import FileWorkQueue, Workspace
from teams_runtime.storage.server_files import servers_away

from ...support.fake_openai_server import FakeOpenAIServer, Status
from ...support.waiting import eventually

pytestmark = pytest.mark.anyio

MakeBundle = Callable[..., PromptBundle]
RunOnce = Callable[..., Awaitable[RunSummary]]


@pytest.fixture
def quick_probes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Probe at most every 2 s (the real schedule, 1 s doubling to 60 s, is checked alone)."""
    monkeypatch.setattr(model_servers, "PROBE_MAX_SECONDS", 2.0)


def _lines(log_messages: list[Any], *needles: str) -> list[str]:
    return [str(m).strip() for m in log_messages if any(n in str(m) for n in needles)]


def _backend(base_url: str, servers: ModelServers | None = None, **settings: Any) -> OpenAIBackend:
    values = {"base_url": base_url, "model": "m", "timeout_seconds": 10} | settings
    return OpenAIBackend(OpenAIConfig(**values), servers=servers)


def test_the_probe_schedule_doubles_from_1_to_60_seconds_with_jitter() -> None:
    server = model_servers.ModelServer("http://127.0.0.1:1/v1", None)
    waits = [server._backoff() for _ in range(10)]
    for wait, full in zip(waits, [1, 2, 4, 8, 16, 32, 60, 60, 60, 60], strict=True):
        assert full / 2 <= wait <= full


async def test_calls_in_flight_when_a_server_dies_log_one_outage(
    log_messages: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Calls sent before an outage end after it began (an answer that had come, a connection
    reset): they neither end it nor start another, so one outage is one away and one back."""
    monkeypatch.setattr(model_servers, "PROBE_FIRST_SECONDS", 0.01)
    server = model_servers.ModelServer("http://127.0.0.1:1/v1", None)
    assert not await server.turn() and not await server.turn()  # two calls, sent while there
    sent = server.period
    await server.away("cannot connect (ConnectError)", False, sent)  # one finds it gone
    await server.answered(False, sent)  # the other's answer was on its way before
    assert server.is_away()
    assert await server.turn()  # this call's turn to probe
    await server.away("cannot connect (ConnectError)", True, server.period)
    assert await server.turn()
    await server.answered(True, server.period)  # back
    late = "the connection closed before any answer (RemoteProtocolError)"
    await server.away(late, False, sent)  # a call from before the outage, reset only now
    assert not server.is_away()
    assert len(_lines(log_messages, "is away")) == 1
    assert len(_lines(log_messages, "is back")) == 1


async def test_a_refused_connection_waits_for_the_server_and_is_not_a_failure(
    openai_server: FakeOpenAIServer, prompt_bundle: MakeBundle, log_messages: list[Any],
    quick_probes: None,
) -> None:  # fmt: skip
    openai_server.down()
    backend = _backend(openai_server.base_url)
    replies: list[str] = []
    async with anyio.create_task_group() as group:

        async def call() -> None:
            replies.append((await backend.complete(prompt_bundle())).text)

        group.start_soon(call)
        await eventually(backend.is_away, "the server to be away", 60)
        openai_server.up()
    assert json.loads(replies[0])["status"] == "completed"
    assert len(openai_server.requests) == 1  # refused ones never reached it
    url = openai_server.base_url
    assert _lines(log_messages, "is away", "is back") == [
        f"model server {url} is away (cannot connect (ConnectError)); its roles wait for it "
        "and take no new work",
        _lines(log_messages, "is back")[0],
    ]
    assert _lines(log_messages, "is back")[0].startswith(f"model server {url} is back after ")


async def test_a_name_that_does_not_resolve_is_away(prompt_bundle: MakeBundle) -> None:
    backend = _backend("http://teams-runtime-no-such-host.invalid:8080/v1")
    async with anyio.create_task_group() as group:
        group.start_soon(backend.complete, prompt_bundle())
        await eventually(backend.is_away, "the server to be away", 60)
        group.cancel_scope.cancel()  # it would wait for ever: no request is failed for it


@pytest.mark.parametrize("status", [429, 502, 503, 504])
async def test_a_busy_server_is_away_after_the_retries(
    openai_server: FakeOpenAIServer, prompt_bundle: MakeBundle, quick_probes: None,
    monkeypatch: pytest.MonkeyPatch, status: int,
) -> None:  # fmt: skip
    from teams_runtime.actors.models import _openai as openai_backend

    monkeypatch.setattr(openai_backend, "BACKOFF_FIRST_SECONDS", 0.01)
    openai_server.then(*[Status(status)] * 3)  # max_retries 1: two requests, then away
    backend = _backend(openai_server.base_url, max_retries=1)
    reply = await backend.complete(prompt_bundle())
    assert json.loads(reply.text)["status"] == "completed"
    assert len(openai_server.requests) == 4  # 2, away, one probe refused, the next answered
    assert not backend.is_away()


async def test_a_model_that_is_loading_is_waited_for(
    openai_server: FakeOpenAIServer, prompt_bundle: MakeBundle, quick_probes: None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    from teams_runtime.actors.models import _openai as openai_backend

    monkeypatch.setattr(openai_backend, "BACKOFF_FIRST_SECONDS", 0.01)
    openai_server.flavour, openai_server.loading = "llama.cpp", True
    backend = _backend(openai_server.base_url, max_retries=0)
    replies: list[str] = []
    async with anyio.create_task_group() as group:

        async def call() -> None:
            replies.append((await backend.complete(prompt_bundle())).text)

        group.start_soon(call)
        await eventually(backend.is_away, "the server to be away", 60)
        openai_server.loading = False
    assert json.loads(replies[0])["status"] == "completed"


async def test_one_call_at_a_time_probes_while_the_others_wait(
    openai_server: FakeOpenAIServer, prompt_bundle: MakeBundle, quick_probes: None,
) -> None:  # fmt: skip
    openai_server.down()
    servers = ModelServers()
    backends = [_backend(openai_server.base_url, servers) for _ in range(2)]  # two roles
    done: list[int] = []
    async with anyio.create_task_group() as group:
        for number in range(6):

            async def call(number: int = number) -> None:
                await backends[number % 2].complete(prompt_bundle())
                done.append(number)

            group.start_soon(call)
        await eventually(
            lambda: all(backend.is_away() for backend in backends), "both backends away", 60
        )
        openai_server.up()
    assert sorted(done) == list(range(6))
    assert len(openai_server.requests) == 6  # each call answered once, none lost


def _status(root: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "teams_runtime", "status", "--workspace", root],
        capture_output=True, text=True, check=False, timeout=60, env=dict(os.environ),
    )  # fmt: skip


@pytest.mark.long
async def test_a_server_down_longer_than_a_calls_timeout_mid_run_fails_no_request(
    openai_workspace: Callable[..., Workspace], seed: Callable[..., None],
    read_record: Callable[[Workspace, str], dict[str, Any]], openai_server: FakeOpenAIServer,
    log_messages: list[Any], quick_probes: None,
) -> None:  # fmt: skip
    # Down for more than twice a call's timeout, and for several probes (2 s apart at most):
    # waiting for the server is not an attempt, and no timeout counts the wait.
    timeout, outage = 3, 8
    workspace = openai_workspace(
        openai={"timeout_seconds": timeout}, model={"on_failure": "fail", "attempts": 1}
    )
    requests = [f"req-{number}" for number in range(6)]
    for request_id in requests:
        seed(workspace, request_id, "planner", events=5)
    team = Team(workspace.root, keep_prompt_records=True, concurrency=2)
    url = openai_server.base_url
    seen: dict[str, Any] = {}
    with anyio.fail_after(120):
        async with anyio.create_task_group() as group:

            async def run() -> None:
                seen["summary"] = await team.run(once=True)

            group.start_soon(run)
            await eventually(
                lambda: len(openai_server.requests) >= 5, "five requests (mid-run)", 60
            )
            openai_server.down()
            down_at = anyio.current_time()
            await eventually(lambda: _lines(log_messages, "is away"), "the away line", 60)
            queue = FileWorkQueue(workspace)

            def outstanding() -> int:
                snapshot = queue.snapshot()
                return sum(snapshot.waiting.values()) + sum(snapshot.claimed.values())

            # Each unfinished request has one envelope, queued or held by a call that waits.
            await eventually(
                lambda: outstanding() == len(requests), "every request outstanding", 60
            )
            claimed_then = sum(queue.snapshot().claimed.values())
            status = await anyio.to_thread.run_sync(_status, str(workspace.root))
            assert status.returncode == 0, status.stderr
            (away_line,) = [line for line in status.stdout.splitlines() if "model server" in line]
            assert away_line.startswith(f"model server {url} away since ")
            # The words of the envelopes line: waiting (not taken) and claimed (held).
            counts = re.search(r": its roles \(([a-z_, ]+)\) take no new work; (\d+) envelopes? "
                               r"waiting, (\d+) claimed$", away_line)  # fmt: skip
            assert counts is not None, away_line
            assert "planner" in counts.group(1).split(", ")
            assert int(counts.group(2)) + int(counts.group(3)) == len(requests)
            # The outage's length is the scenario: the calls wait out all of it.
            await anyio.sleep(max(outage - (anyio.current_time() - down_at), 0))
            assert sum(queue.snapshot().claimed.values()) <= claimed_then  # no new work taken
            openai_server.up()
    summary: RunSummary = seen["summary"]
    assert summary.failed == 0 and summary.handled == 4 * len(requests)
    assert [read_record(workspace, r)["status"] for r in requests] == ["completed"] * 6
    assert len(_lines(log_messages, "is away")) == 1
    assert len(_lines(log_messages, "is back")) == 1
    assert not workspace.attempts_dir.exists()  # no call failed: nothing kept as an attempt
    assert servers_away(workspace) == []  # the away file went when it came back
    assert "model server" not in _status(str(workspace.root)).stdout
