"""One server, its own pace: at most ``model.openai.max_concurrent`` calls of a worker at one
server (by default its slots, one on a local server that reports none, no limit on a hosted
API), and a stream cut or empty while other calls ran there is the server busy (sent again,
not an attempt). On the fake server as llama-cpp-python behaves with its default flags: one
answer at a time, a running stream cut when another request comes."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import pytest

from teams_runtime.actors.models._openai import OpenAIBackend
from teams_runtime.actors.models._servers import ModelServers
from teams_runtime.actors.team._team import RunSummary
from teams_runtime.codecs.config import OpenAIConfig
from teams_runtime.exceptions import ConfigError
from teams_runtime.policy.prompts import PromptBundle
from teams_runtime.storage import Workspace

from ...support.fake_openai_server import FakeOpenAIServer, Raw
from ...support.waiting import eventually

pytestmark = pytest.mark.anyio

MakeBundle = Callable[..., PromptBundle]
RunOnce = Callable[..., Awaitable[RunSummary]]

_ROLES = ("planner", "developer", "qa")


def _backend(base_url: str, servers: ModelServers, **settings: Any) -> OpenAIBackend:
    values = {"base_url": base_url, "model": "fake-coder", "timeout_seconds": 10} | settings
    return OpenAIBackend(OpenAIConfig(**values), servers=servers)


async def _at_once(backends: list[OpenAIBackend], bundle: MakeBundle) -> list[str]:
    """One call per backend, all at once: each reply's status."""
    statuses: list[str] = []
    with anyio.fail_after(60):
        async with anyio.create_task_group() as group:
            for number, backend in enumerate(backends):

                async def call(backend: OpenAIBackend = backend, number: int = number) -> None:
                    role = _ROLES[number % len(_ROLES)]
                    reply = await backend.complete(bundle(role=role, request_id=f"req-{number}"))
                    statuses.append(json.loads(reply.text)["status"])

                group.start_soon(call)
    return statuses


def _seed_three(workspace: Workspace, seed: Callable[..., None]) -> list[str]:
    requests = [f"req-{role}" for role in _ROLES]
    for request_id, role in zip(requests, _ROLES, strict=True):
        seed(workspace, request_id, role, events=5)
    return requests


async def test_three_roles_on_llama_cpp_python_with_its_default_flags_fail_no_call(
    openai_server: FakeOpenAIServer, openai_workspace: Callable[..., Workspace],
    seed: Callable[..., None], read_record: Callable[[Workspace, str], dict[str, Any]],
    run_once: RunOnce,
) -> None:  # fmt: skip
    """Issue 33: three requests at three roles on a server that cuts a running stream when
    another request comes (--interrupt_requests, on by default): no call is cut, since the
    worker sends one call at a time to a local server that reports no slots."""
    openai_server.flavour = "llama-cpp-python"
    openai_server.event_seconds = 0.05  # the model takes its time: calls would overlap
    workspace = openai_workspace(model={"on_failure": "fail", "attempts": 1})
    requests = _seed_three(workspace, seed)
    summary = await run_once(workspace, concurrency=3)
    assert summary.failed == 0
    assert [read_record(workspace, r)["status"] for r in requests] == ["completed"] * 3
    assert openai_server.interrupted == 0
    assert openai_server.most_running == 1  # the default max_concurrent held
    assert not workspace.attempts_dir.exists()  # no attempt failed


async def test_a_stream_cut_while_other_calls_ran_is_sent_again_not_failed(
    openai_server: FakeOpenAIServer, openai_workspace: Callable[..., Workspace],
    seed: Callable[..., None], read_record: Callable[[Workspace, str], dict[str, Any]],
    run_once: RunOnce, log_messages: list[Any],
) -> None:  # fmt: skip
    """A max_concurrent above what the server serves: its cut streams are the server busy
    with the other calls, each sent again when one ends; no attempt fails, the limit holds."""
    openai_server.flavour = "llama-cpp-python"
    openai_server.event_seconds = 0.05
    workspace = openai_workspace(
        openai={"max_concurrent": 2}, model={"on_failure": "fail", "attempts": 1}
    )
    requests = _seed_three(workspace, seed)
    summary = await run_once(workspace, concurrency=3)
    assert openai_server.interrupted > 0  # the scenario: streams were cut
    assert summary.failed == 0
    assert [read_record(workspace, r)["status"] for r in requests] == ["completed"] * 3
    assert openai_server.most_running == 2
    assert not workspace.attempts_dir.exists()
    busy = [str(m) for m in log_messages if "was busy with other calls" in str(m)]
    assert len(busy) == openai_server.interrupted
    assert "its stream was cut while other calls to it ran" in busy[0]


async def test_an_empty_stream_while_another_call_runs_is_the_server_busy(
    openai_server: FakeOpenAIServer, prompt_bundle: MakeBundle
) -> None:
    """Issue 32: an empty stream means "too long" only when no other call to that server is
    in flight; with one in flight it is the server busy, and the call is sent again."""
    openai_server.event_seconds = 0.2  # the first call's answer streams for a second
    openai_server.then("answer", Raw(b""), "answer")
    backend = _backend(openai_server.base_url, ModelServers(), max_concurrent=2)
    statuses: list[str] = []
    with anyio.fail_after(60):
        async with anyio.create_task_group() as group:

            async def call(request_id: str) -> None:
                reply = await backend.complete(prompt_bundle(request_id=request_id))
                statuses.append(json.loads(reply.text)["status"])

            group.start_soon(call, "req-1")
            await eventually(lambda: openai_server.requests, "the first call's request", 30)
            group.start_soon(call, "req-2")  # sent while the first streams: empty, then again
    assert statuses == ["completed", "completed"]
    assert len(openai_server.requests) == 3


@pytest.mark.parametrize(
    ("flavour", "slots", "written", "most"),
    [
        pytest.param("openai", 1, (None, None), 1, id="local-no-slots-one"),
        pytest.param("llama.cpp", 3, (None, None), 3, id="llama-server-its-slots"),
        pytest.param("llama.cpp", 3, (2, None), 2, id="written-wins-over-slots"),
        pytest.param("openai", 1, (3, 2), 2, id="smallest-written-wins"),
    ],
)
async def test_max_concurrent_holds_per_server(
    openai_server: FakeOpenAIServer, prompt_bundle: MakeBundle, flavour: str, slots: int,
    written: tuple[int | None, int | None], most: int,
) -> None:  # fmt: skip
    openai_server.flavour = flavour
    openai_server.slots = slots
    openai_server.event_seconds = 0.05
    servers = ModelServers()  # one worker: two roles' backends on the one server
    pair = [_backend(openai_server.base_url, servers, max_concurrent=w) for w in written]
    statuses = await _at_once([pair[n % 2] for n in range(6)], prompt_bundle)
    assert len(statuses) == 6
    assert openai_server.most_running == most


@pytest.mark.parametrize("flavour", ["vllm", "ollama", "lmstudio"])
async def test_a_local_server_that_queues_itself_gets_no_limit_of_ours(
    openai_server: FakeOpenAIServer, prompt_bundle: MakeBundle, flavour: str
) -> None:
    openai_server.flavour = flavour
    openai_server.model_name = "fake-coder"  # the model the roles ask for, as it lists it
    openai_server.event_seconds = 0.05
    servers = ModelServers()
    backend = _backend(openai_server.base_url, servers, max_concurrent=None)
    assert len(await _at_once([backend] * 4, prompt_bundle)) == 4
    assert openai_server.most_running > 1  # known by its window's answer: not one at a time


async def test_a_hosted_api_has_no_limit_and_is_not_asked_for_slots() -> None:
    servers = ModelServers()
    config = OpenAIConfig(base_url="https://api.openai.com/v1", model="gpt-4o")
    server = servers.server(config.base_url)
    assert await server.pace.limit(config, servers.facts) is None


@pytest.mark.parametrize("value", [0, 1001, -1])
def test_max_concurrent_out_of_range_is_a_config_error_naming_the_field(value: int) -> None:
    with pytest.raises(
        ConfigError,
        match=r"^team_runtime\.yaml model\.openai\.max_concurrent must be a whole number from "
        r"1 to 1000: ",
    ):
        OpenAIConfig(base_url="http://127.0.0.1:8080/v1", model="m", max_concurrent=value)


@pytest.mark.parametrize("look_up", ["window", "count"])
async def test_a_look_up_beside_a_running_call_cuts_no_answer(
    openai_server: FakeOpenAIServer, prompt_bundle: MakeBundle, look_up: str
) -> None:
    """Issue 33, seen on the real server: the worker's own look-ups there (a window asked
    again a minute on, a token count for another role's prompt) read llama-cpp-python's model,
    so it cuts the answer it streams. The call cut so is the server busy, sent again; once
    its cut text (``[DONE]``, no finish_reason, nothing else running) was taken as the answer."""
    openai_server.flavour = "llama-cpp-python"
    openai_server.event_seconds = 0.2  # the answer streams for a second
    servers = ModelServers()  # one worker: the call's backend and the look-ups share its pace
    backend = _backend(openai_server.base_url, servers)
    # Another role's settings for the server (a window of its own: asked, not the one kept).
    other = OpenAIConfig(base_url=openai_server.base_url, model="fake-coder", context_tokens=4096)
    replies: list[str] = []
    with anyio.fail_after(60):
        async with anyio.create_task_group() as group:

            async def call() -> None:
                replies.append((await backend.complete(prompt_bundle(request_id="req-1"))).text)

            group.start_soon(call)
            # Its second request (json_schema refused, then json_object) holds the model.
            await eventually(lambda: len(openai_server.requests) == 2, "the answer streaming", 30)
            if look_up == "window":
                await servers.facts.window(other)
            else:
                tokenizer = await servers.facts.tokenizer(other)
                assert tokenizer is not None
                assert openai_server.interrupted == 1  # the finding cut it already
                await tokenizer.count("How many tokens?")
    assert openai_server.interrupted >= 1  # the scenario: the server cut the answer
    [reply] = replies
    assert json.loads(reply)["status"] == "completed"
    assert len(openai_server.requests) == 2 + openai_server.interrupted  # each sent again
