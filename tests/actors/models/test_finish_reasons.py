"""The server's ``finish_reason``, from real streams of the fake OpenAI server on loopback, up
to the reply, the prompt record, a warning for an answer cut at the token limit, and
``metrics`` (truncated answers); the command backend has none."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from teams_runtime.actors.models._openai import OpenAIBackend
from teams_runtime.actors.team._team import RunSummary
from teams_runtime.codecs.config import OpenAIConfig
from teams_runtime.codecs.model._replies import FINISH_REASONS, finish_reason_of
from teams_runtime.codecs.prompt_records import decode_prompt_record, encode_prompt_record
from teams_runtime.exceptions import ModelFailure
from teams_runtime.policy.prompts import PromptBundle
from teams_runtime.storage import Workspace

from ...support.cli_in_process import run_cli
from ...support.fake_model import answer_for
from ...support.fake_openai_server import FakeOpenAIServer, Text, Whole

pytestmark = pytest.mark.anyio

MakeBundle = Callable[..., PromptBundle]
RunOnce = Callable[..., Awaitable[RunSummary]]
Seed = Callable[..., None]


def _backend(server: FakeOpenAIServer, **overrides: Any) -> OpenAIBackend:
    values: dict[str, Any] = {"base_url": server.base_url, "model": "m", "timeout_seconds": 10}
    return OpenAIBackend(OpenAIConfig(**(values | overrides)))


@pytest.mark.parametrize("flavour", ["openai", "llama.cpp"])
@pytest.mark.parametrize(
    ("sent", "read"),
    [
        pytest.param("stop", "stop", id="stop"),
        pytest.param("length", "length", id="length"),
        pytest.param("content_filter", "content_filter", id="content_filter"),
        pytest.param("tool_calls", "tool_calls", id="tool_calls"),
        pytest.param("function_call", "function_call", id="function_call"),
        # A name of the server's own is recorded as "other": never its text.
        pytest.param("eos_token", "other", id="another-name"),
        pytest.param(None, None, id="none-then-done"),
    ],
)
async def test_the_streams_finish_reason_reaches_the_reply(
    openai_server: FakeOpenAIServer,
    prompt_bundle: MakeBundle,
    flavour: str,
    sent: str | None,
    read: str | None,
) -> None:
    openai_server.flavour, openai_server.finish_reason = flavour, sent
    with anyio.fail_after(30):
        reply = await _backend(openai_server).complete(prompt_bundle())
    assert json.loads(reply.text) == answer_for("qa", "req-1")  # the whole reply, whatever
    assert reply.finish_reason == read


@pytest.mark.parametrize("flavour", ["vllm", "ollama", "lmstudio", "llama-cpp-python"])
async def test_each_servers_stream_is_read_beside_its_own_endpoints(
    openai_server: FakeOpenAIServer, prompt_bundle: MakeBundle, flavour: str
) -> None:
    """The fake answers these flavours' own endpoints (/props, /api/show, ...), and its chat
    completions still as a stream (llama-cpp-python's without usage)."""
    openai_server.flavour = flavour
    backend = _backend(openai_server)
    with anyio.fail_after(30):
        reply = await backend.complete(prompt_bundle())
        # Its window's endpoints were asked once, for its slots (max_concurrent's default).
        asked = len(openai_server.endpoint_requests)
        again = await backend.complete(prompt_bundle())
    assert json.loads(reply.text) == answer_for("qa", "req-1") == json.loads(again.text)
    assert reply.finish_reason == "stop"
    assert (reply.usage is None) == (flavour == "llama-cpp-python")
    assert len(openai_server.endpoint_requests) == asked
    assert all("/chat/completions" not in seen.path for seen in openai_server.endpoint_requests)


async def test_a_whole_completion_carries_its_finish_reason(
    openai_server: FakeOpenAIServer, prompt_bundle: MakeBundle
) -> None:
    openai_server.finish_reason = "length"
    openai_server.then(Whole())
    reply = await _backend(openai_server).complete(prompt_bundle())
    assert reply.finish_reason == "length"


def test_finish_reasons_are_reduced_to_fixed_names() -> None:
    assert [finish_reason_of(name) for name in FINISH_REASONS] == list(FINISH_REASONS)
    assert finish_reason_of("LENGTH") == "length"
    assert finish_reason_of("abort") == "other"
    assert finish_reason_of("x" * 10_000) == "other"
    assert [finish_reason_of(value) for value in (None, "", 3)] == [None, None, None]


async def test_an_answer_cut_at_the_token_limit_is_a_content_free_warning(
    openai_server: FakeOpenAIServer, prompt_bundle: MakeBundle, log_messages: list[Any]
) -> None:
    openai_server.finish_reason = "length"
    openai_server.then(Text('{"summary": "half an ans'))
    reply = await _backend(openai_server, max_tokens=64).complete(prompt_bundle())
    assert reply.finish_reason == "length"
    (warning,) = [m for m in log_messages if m.record["level"].name == "WARNING"]
    assert warning.record["message"] == (
        "model server stopped the answer for qa on request req-1 at its token limit "
        f"(finish_reason length, {len(reply.text)} bytes of answer; model.openai.max_tokens 64)"
    )
    assert "half" not in warning  # content-free


async def test_a_stop_finish_says_nothing(
    openai_server: FakeOpenAIServer, prompt_bundle: MakeBundle, log_messages: list[Any]
) -> None:
    await _backend(openai_server).complete(prompt_bundle())
    assert not [m for m in log_messages if m.record["level"].name == "WARNING"]


async def test_an_empty_answer_at_the_token_limit_fails_saying_so(
    openai_server: FakeOpenAIServer, prompt_bundle: MakeBundle, log_messages: list[Any]
) -> None:
    """What a reasoning model does when its thinking spends every token it may use."""
    openai_server.finish_reason = "length"
    openai_server.then(Text(""))
    with anyio.fail_after(30), pytest.raises(ModelFailure) as caught:
        await _backend(openai_server).complete(prompt_bundle())
    assert str(caught.value) == (
        "the model answered nothing before its token limit (finish_reason length)"
    )
    assert caught.value.finish_reason == "length"
    (warning,) = [m for m in log_messages if m.record["level"].name == "WARNING"]
    assert "model.openai.max_tokens not set: the server's own limit" in warning


def _config(server: FakeOpenAIServer) -> str:
    return (
        "model:\n  backend: openai\n  attempts: 2\n  openai:\n"
        f"    base_url: {server.base_url}\n    model: m\n    timeout_seconds: 10\n"
    )


async def test_records_carry_the_finish_reason_of_each_call(
    tmp_path: Path, openai_server: FakeOpenAIServer, seed: Seed, run_once: RunOnce
) -> None:
    (tmp_path / "team_runtime.yaml").write_text(_config(openai_server))
    workspace = Workspace(tmp_path)
    seed(workspace, "req-1", "qa", events=3)
    # qa: an empty reply cut at the limit (a failed call), then a whole one (its retry).
    openai_server.finish_reason = "length"
    openai_server.then(Text(""))
    summary = await run_once(workspace)
    assert summary.failed == 0
    records = sorted(summary.prompts, key=lambda r: r.timestamp)
    assert [(r.attempt_kind, r.outcome, r.finish_reason) for r in records] == [
        ("primary", "failed", "length"),
        ("retry", "completed", "length"),  # whole, though the server says it was cut
    ]
    line = encode_prompt_record(records[0])
    assert '"finish_reason":"length"' in line
    assert decode_prompt_record(line.encode()) == records[0]


async def test_the_command_backend_records_no_finish_reason(
    team_workspace: Callable[..., Workspace], seed: Seed, run_once: RunOnce
) -> None:
    workspace = team_workspace()
    seed(workspace, "req-1", "qa", events=3)
    summary = await run_once(workspace)
    assert summary.prompts and all(r.finish_reason is None for r in summary.prompts)


def test_a_schema_2_line_without_the_finish_reason_still_reads() -> None:
    line = (
        b'{"schema_version":2,"timestamp":"2026-11-02T09:00:00+00:00","role":"qa",'
        b'"purpose":"role_task","request_id":"r","enabled":true,"recent_events":8,'
        b'"max_events":16,"total_events":3,"included_events":3,"omitted_events":0,'
        b'"compacted":false,"eligible":false,"backfilled_roles":[],"prompt_chars":10,'
        b'"full_history_chars":10,"outcome":"completed"}'
    )
    record = decode_prompt_record(line)
    assert record.finish_reason is None and record.outcome == "completed"
    # A reader that does not know a field (as schema 2 first released did not know this one)
    # skips it: the record's Struct does not forbid unknown fields.
    with_more = line[:-1] + b',"finish_reason":"length","a_later_field":1}'
    assert decode_prompt_record(with_more).finish_reason == "length"


def test_metrics_counts_truncated_answers_and_finish_reasons(
    tmp_path: Path,
    openai_server: FakeOpenAIServer,
    seed: Seed,
    capsys: pytest.CaptureFixture[str],
) -> None:
    (tmp_path / "team_runtime.yaml").write_text(_config(openai_server))
    workspace = Workspace(tmp_path)
    seed(workspace, "req-1", "qa", events=3)
    openai_server.finish_reason = "length"  # every answer cut (but whole: the contract takes it)
    assert run_cli(capsys, "run", "--once", "--workspace", str(tmp_path))[0] == 0
    status, out, _ = run_cli(capsys, "metrics", "--workspace", str(tmp_path), "--json")
    assert status == 0
    totals = json.loads(out)["totals"]
    assert (totals["prompts"], totals["truncated"]) == (1, 1)
    assert totals["finish_reasons"] == {"length": 1}
    status, table, _ = run_cli(capsys, "metrics", "--workspace", str(tmp_path))
    header, *_ = table.splitlines()
    assert header.rstrip().endswith("repairs/retries/failed  truncated")
