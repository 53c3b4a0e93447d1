"""What a call's body holds (the role's settings, the contract as a JSON schema) and how the
backend copes with servers as they are: llama.cpp's, llama-cpp-python's (500 to json_schema,
no usage in streams, an empty stream for a prompt past its context) and one that takes no
response_format at all; the command backend gets the schema as a file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from teams_runtime.actors.models._backends import CommandBackend
from teams_runtime.actors.models._openai import OpenAIBackend
from teams_runtime.actors.team._team import RunSummary
from teams_runtime.codecs.config import ModelConfig, OpenAIConfig
from teams_runtime.codecs.model._result_schema import generation_schema
from teams_runtime.exceptions import ModelFailure, PromptTooLarge
from teams_runtime.policy.prompts import PromptBundle
from teams_runtime.storage import FileWorkQueue, Workspace

from ...support.fake_model import answer_for
from ...support.fake_openai_server import FakeOpenAIServer, Status

pytestmark = pytest.mark.anyio

MakeBundle = Callable[..., PromptBundle]
RunOnce = Callable[..., Awaitable[RunSummary]]


def _backend(
    server: FakeOpenAIServer, structured: Any = "json_schema", **settings: Any
) -> OpenAIBackend:
    values = {"base_url": server.base_url, "model": "fake-coder", "timeout_seconds": 10}
    config = OpenAIConfig(**(values | settings))
    return OpenAIBackend(config, structured_output=structured)


def _messages(log_messages: list[Any], needle: str) -> list[str]:
    return [str(m).strip() for m in log_messages if needle in str(m)]


# --- the body -------------------------------------------------------------------------------


async def test_each_call_sends_the_contract_as_a_json_schema(
    openai_server: FakeOpenAIServer, prompt_bundle: MakeBundle
) -> None:
    bundle = prompt_bundle(role="qa", request_id="req-1")
    await _backend(openai_server).complete(bundle)
    (seen,) = openai_server.requests
    assert seen.response_format == {
        "type": "json_schema",
        "json_schema": {
            "name": "role_result",
            "strict": False,
            "schema": generation_schema("task", request_id="req-1", role="qa"),
        },
    }
    schema = seen.response_format["json_schema"]["schema"]
    assert schema["properties"]["request_id"]["const"] == "req-1"
    assert schema["properties"]["role"]["const"] == "qa"


async def test_a_role_s_settings_arrive_in_the_request_body(
    openai_server: FakeOpenAIServer, prompt_bundle: MakeBundle
) -> None:
    planner = _backend(
        openai_server,
        model="big-planner",
        reasoning_effort="high",
        temperature=0.2,
        max_tokens=900,
        system="You answer with one JSON object.",
        extra_body={"top_k": 20, "chat_template_kwargs": {"enable_thinking": False}},
    )
    qa = _backend(openai_server, model="small-qa", temperature=0.0)
    planner_bundle, qa_bundle = prompt_bundle(role="planner"), prompt_bundle(role="qa")
    await planner.complete(planner_bundle)
    await qa.complete(qa_bundle)
    first, second = (seen.json() for seen in openai_server.requests)
    assert {key: first[key] for key in ("model", "reasoning_effort", "temperature", "max_tokens",
                                          "top_k", "chat_template_kwargs")} == {
        "model": "big-planner",
        "reasoning_effort": "high",
        "temperature": 0.2,
        "max_tokens": 900,
        "top_k": 20,
        "chat_template_kwargs": {"enable_thinking": False},
    }  # fmt: skip
    assert first["messages"] == [
        {"role": "system", "content": "You answer with one JSON object."},
        {"role": "user", "content": planner_bundle.text()},
    ]
    assert second["model"] == "small-qa" and second["temperature"] == 0.0
    assert not {"reasoning_effort", "max_tokens", "top_k"} & set(second)  # unset: not sent
    assert second["messages"] == [{"role": "user", "content": qa_bundle.text()}]


@pytest.mark.parametrize(
    ("structured", "sent"),
    [
        pytest.param("json_object", "json_object", id="json-object"),
        pytest.param("off", None, id="off"),
    ],
)
async def test_structured_output_chooses_the_form(
    openai_server: FakeOpenAIServer, prompt_bundle: MakeBundle, structured: str, sent: Any
) -> None:
    await _backend(openai_server, structured=structured).complete(prompt_bundle())
    form = openai_server.requests[0].response_format
    assert (form or {}).get("type") == sent
    if sent == "json_object":
        assert form["schema"] == generation_schema("task", request_id="req-1", role="qa")


# --- servers as they are --------------------------------------------------------------------


async def test_llama_cpp_s_stream_is_read_with_its_null_content_and_usage_chunk(
    openai_server: FakeOpenAIServer, prompt_bundle: MakeBundle
) -> None:
    openai_server.flavour = "llama.cpp"
    reply = await _backend(openai_server).complete(prompt_bundle())
    assert json.loads(reply.text) == answer_for("qa", "req-1")
    assert reply.usage is not None and reply.usage.completion_tokens == len(reply.text)
    assert openai_server.requests[0].response_format["type"] == "json_schema"  # taken


async def test_a_server_that_refuses_json_schema_is_served_with_json_object(
    openai_server: FakeOpenAIServer, prompt_bundle: MakeBundle, log_messages: list[Any]
) -> None:
    openai_server.flavour = "llama-cpp-python"
    backend = _backend(openai_server)
    for _ in range(3):
        reply = await backend.complete(prompt_bundle())
        assert json.loads(reply.text)["status"] == "completed"
        assert reply.usage is None  # it reports no usage in streams
    kinds = [seen.response_format["type"] for seen in openai_server.requests]
    assert kinds == ["json_schema", "json_object", "json_object", "json_object"]
    assert openai_server.requests[1].response_format["schema"]["required"][:2] == [
        "request_id",
        "role",
    ]
    url = openai_server.base_url
    assert _messages(log_messages, "response_format") == [
        f"model server {url} answered 500 to response_format json_schema; trying json_object",
        f"model server {url} takes response_format json_object; kept for its calls",
    ]


async def test_a_server_that_takes_no_response_format_still_gets_served(
    openai_server: FakeOpenAIServer, prompt_bundle: MakeBundle, log_messages: list[Any]
) -> None:
    openai_server.flavour = "strict-plain"
    backend = _backend(openai_server)
    await backend.complete(prompt_bundle())
    await backend.complete(prompt_bundle())
    kinds = [(seen.response_format or {}).get("type") for seen in openai_server.requests]
    assert kinds == ["json_schema", "json_object", None, None]
    assert _messages(log_messages, "takes response_format") == [
        f"model server {openai_server.base_url} takes response_format none; kept for its calls"
    ]


async def test_a_team_on_llama_cpp_python_completes_with_one_refusal(
    openai_workspace: Callable[..., Workspace], seed: Callable[..., None],
    read_record: Callable[[Workspace, str], dict[str, Any]], run_once: RunOnce,
    openai_server: FakeOpenAIServer,
) -> None:  # fmt: skip
    openai_server.flavour = "llama-cpp-python"
    workspace = openai_workspace()
    seed(workspace, "req-1", "planner", events=5)
    summary = await run_once(workspace)
    assert (summary.handled, summary.failed, summary.prompts_sent) == (4, 0, 4)
    assert len(openai_server.requests) == 5  # the one refused json_schema, then 4 answered
    assert read_record(workspace, "req-1")["status"] == "completed"
    assert [p.prompt_tokens for p in summary.prompts] == [None] * 4


# --- a prompt past the server's context -----------------------------------------------------


@pytest.mark.parametrize(
    ("flavour", "how"),
    [
        pytest.param(
            "llama.cpp", "it answered 400 Bad Request about the context length", id="llama-cpp-400"
        ),
        pytest.param(
            "llama-cpp-python",
            "it answered with an empty stream right after the prompt was sent",
            id="llama-cpp-python-empty-stream",
        ),
    ],
)
async def test_a_prompt_past_the_context_is_named_and_not_sent_again(
    openai_workspace: Callable[..., Workspace], seed: Callable[..., None],
    read_record: Callable[[Workspace, str], dict[str, Any]], run_once: RunOnce,
    openai_server: FakeOpenAIServer, flavour: str, how: str,
) -> None:  # fmt: skip
    openai_server.flavour, openai_server.n_ctx_chars = flavour, 2_000
    workspace = openai_workspace(model={"attempts": 3, "structured_output": "json_object"})
    seed(workspace, "req-1", "qa", events=30)
    summary = await run_once(workspace, roles=["qa"])
    assert (summary.failed, summary.prompts_sent) == (1, 1)  # not sent again unchanged
    assert len(openai_server.requests) == 1
    (prompt,) = summary.prompts
    record = read_record(workspace, "req-1")
    (failed,) = [event for event in record["events"] if event.get("type") == "model_failed"]
    assert failed["payload"]["reason"] == (
        f"the prompt does not fit the model server's context: {how}. The prompt has "
        f"{prompt.prompt_chars} characters ({prompt.included_events} of {prompt.total_events} "
        "events; prompt_context.max_events 16); give the role a token budget "
        "(prompt_context.max_prompt_tokens, a number or auto) so events are left out until the "
        "prompt fits, lower prompt_context.max_events, or start the server with a larger "
        "context (llama.cpp: --ctx-size; llama-cpp-python: --n_ctx)"
    )
    assert sum(FileWorkQueue(workspace).counts().values()) == 0


async def test_too_large_is_its_own_failure(
    openai_server: FakeOpenAIServer, prompt_bundle: MakeBundle
) -> None:
    openai_server.flavour, openai_server.n_ctx_chars = "llama.cpp", 100
    with anyio.fail_after(30), pytest.raises(PromptTooLarge) as caught:
        await _backend(openai_server).complete(prompt_bundle())
    assert '"exceed_context_size_error"' in caught.value.output  # kept for the attempts folder


# --- the command backend --------------------------------------------------------------------

_COPY_SCHEMA = """
import json, os, shutil, sys
sys.stdin.read()
path = os.environ["TEAMS_RUNTIME_RESULT_SCHEMA"]
shutil.copy(path, sys.argv[1])
print(json.dumps({"path": path, "mode": oct(os.stat(path).st_mode & 0o777)}))
"""


async def test_the_command_backend_gets_the_schema_as_a_file(
    prompt_bundle: MakeBundle, tmp_path: Path
) -> None:
    copy = tmp_path / "schema.json"
    config = ModelConfig(backend="command", command=[sys.executable, "-c", _COPY_SCHEMA, str(copy)])
    bundle = prompt_bundle(role="developer", request_id="req-4")
    reply = await CommandBackend(config, tmp_path).complete(bundle)
    told = json.loads(reply.text)
    assert json.loads(copy.read_text()) == generation_schema(
        "task", request_id="req-4", role="developer"
    )
    assert told["mode"] == "0o600" and not Path(told["path"]).exists()  # private, then removed
    off = ModelConfig(
        backend="command",
        command=[
            sys.executable,
            "-c",
            "import os; print(os.environ.get('TEAMS_RUNTIME_RESULT_SCHEMA', 'unset'))",
        ],
        structured_output="off",
    )
    assert (await CommandBackend(off, tmp_path).complete(bundle)).text.strip() == "unset"


async def test_a_refused_form_is_not_sent_again_after_a_call_that_failed(
    openai_server: FakeOpenAIServer, prompt_bundle: MakeBundle
) -> None:
    """Issue 33: a server's refusal of json_schema is remembered for the worker's run even
    when the call that learned it failed for another reason before a form was taken."""
    openai_server.flavour = "llama-cpp-python"
    openai_server.then("answer", Status(400, body='{"error": "bad request"}'))
    backend = _backend(openai_server)
    with pytest.raises(ModelFailure):
        await backend.complete(prompt_bundle())
    await backend.complete(prompt_bundle())
    kinds = [seen.response_format["type"] for seen in openai_server.requests]
    assert kinds == ["json_schema", "json_object", "json_object"]  # refused once, never again


_HOLD_SCHEMA = """
import time
from teams_runtime.actors.models._schema_files import _write
print(_write(b"{}"), flush=True)  # what schema_file writes for a call, then the call runs
time.sleep(600)
"""


def test_schema_files_of_a_worker_killed_with_kill_9_go_when_a_worker_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 33: a worker killed with kill -9 leaves its call's schema file; the next worker
    to start on the host removes it (each worker writes in a folder of its own)."""
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setenv("TMPDIR", str(temp))
    monkeypatch.setattr(tempfile, "tempdir", None)  # read TMPDIR again
    with subprocess.Popen(
        [sys.executable, "-c", _HOLD_SCHEMA], env=dict(os.environ), stdout=subprocess.PIPE,
        text=True,
    ) as worker:  # fmt: skip
        try:
            assert worker.stdout is not None
            left = Path(worker.stdout.readline().strip())
            assert left.is_file() and left.is_relative_to(temp)
        finally:
            worker.kill()  # kill -9: nothing of it runs to remove its file
    assert left.is_file()  # nothing of the killed worker removed it
    config = ModelConfig(backend="command", command=[sys.executable, "-c", "print()"])
    CommandBackend(config, tmp_path)  # a worker starts
    assert not left.exists() and not left.parent.exists()
    assert list(left.parent.parent.iterdir()) == []
