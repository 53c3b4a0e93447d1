"""The openai backend against a real HTTP server on loopback: the prompt streamed as the user
message, the answer read from server-sent events, retries after 429 and 5xx, timeouts, dropped
connections and garbage; a team run on it behaves as on a model command; the key never leaks."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from teams_runtime.actors.models import _openai as openai_backend
from teams_runtime.actors.models import _openai_reading as openai_answers
from teams_runtime.actors.models._backends import make_backend
from teams_runtime.actors.models._openai import KEPT_CHARS, OpenAIBackend
from teams_runtime.actors.team._team import RunSummary
from teams_runtime.codecs.config import ModelConfig, OpenAIConfig
from teams_runtime.codecs.model._openai_wire import event_line_limit
from teams_runtime.codecs.model._replies import TokenUsage
from teams_runtime.exceptions import ConfigError, ModelFailure
from teams_runtime.policy.prompts import PromptBundle
from teams_runtime.storage import FileWorkQueue, Workspace

from ...support.fake_model import answer_for
from ...support.fake_openai_server import (
    PROMPT_TOKENS_PER_CHAR,
    Cut,
    FakeOpenAIServer,
    Raw,
    Status,
    Text,
    Whole,
)
from ...support.waiting import eventually_sync

pytestmark = pytest.mark.anyio

RunOnce = Callable[..., Awaitable[RunSummary]]
MakeBundle = Callable[..., PromptBundle]
MakeWorkspace = Callable[..., Workspace]
Seed = Callable[..., None]
ReadRecord = Callable[[Workspace, str], dict[str, Any]]

KEY = "sk-test-" + "7f3c9a1e5b" * 4  # a key-shaped secret the tests look for everywhere
KEY_ENV = "TEAMS_RUNTIME_TEST_OPENAI_KEY"


def _backend(server: FakeOpenAIServer, **overrides: Any) -> OpenAIBackend:
    max_output_bytes = overrides.pop("max_output_bytes", 1_048_576)
    values: dict[str, Any] = {
        "base_url": server.base_url,
        "model": "fake-coder",
        "timeout_seconds": 10,
    }
    return OpenAIBackend(OpenAIConfig(**(values | overrides)), max_output_bytes=max_output_bytes)


async def _failure(backend: OpenAIBackend, bundle: PromptBundle) -> ModelFailure:
    with anyio.fail_after(30), pytest.raises(ModelFailure) as caught:
        await backend.complete(bundle)
    return caught.value


# --- one call -----------------------------------------------------------------------------


async def test_the_prompt_is_streamed_as_the_user_message_and_the_answer_read_from_events(
    openai_server: FakeOpenAIServer, prompt_bundle: MakeBundle
) -> None:
    bundle = prompt_bundle(role="qa", events=30)
    reply = await _backend(openai_server).complete(bundle)
    (seen,) = openai_server.requests
    assert seen.path == "/v1/chat/completions"
    assert seen.chunked  # streamed from the prompt's chunks, not sent as one rendered body
    body = seen.json()
    assert body["model"] == "fake-coder"
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert body["messages"] == [{"role": "user", "content": bundle.text()}]
    assert seen.headers["accept"] == "text/event-stream"
    assert "authorization" not in seen.headers  # no api_key_env: no key sent
    answer = json.loads(reply.text)
    assert (answer["role"], answer["request_id"], answer["status"]) == ("qa", "req-1", "completed")
    assert reply.usage == TokenUsage(
        prompt_tokens=len(bundle.text()) // PROMPT_TOKENS_PER_CHAR,
        completion_tokens=len(reply.text),
    )


async def test_non_ascii_prompts_arrive_intact(
    openai_server: FakeOpenAIServer, prompt_bundle: MakeBundle
) -> None:
    bundle = prompt_bundle(request_id="요청-1", events=5)
    await _backend(openai_server).complete(bundle)
    assert openai_server.requests[0].prompt == bundle.text()
    assert "요청-1" in bundle.text()


async def test_a_server_that_does_not_stream_is_read_whole(
    openai_server: FakeOpenAIServer, prompt_bundle: MakeBundle
) -> None:
    openai_server.then(Whole())
    reply = await _backend(openai_server).complete(prompt_bundle())
    assert json.loads(reply.text)["summary"] == "qa did its part"
    assert reply.usage == TokenUsage(prompt_tokens=7, completion_tokens=3)


async def test_the_key_is_read_from_its_variable_at_call_time(
    openai_server: FakeOpenAIServer, prompt_bundle: MakeBundle, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, "first-key")
    backend = _backend(openai_server, api_key_env=KEY_ENV)
    await backend.complete(prompt_bundle())
    monkeypatch.setenv(KEY_ENV, KEY)
    await backend.complete(prompt_bundle())
    assert [seen.headers["authorization"] for seen in openai_server.requests] == [
        "Bearer first-key",
        f"Bearer {KEY}",
    ]
    unset = (
        f"the environment variable {KEY_ENV} (model.openai.api_key_env) is not set; "
        "export the model server's key in it"
    )
    monkeypatch.delenv(KEY_ENV)
    failure = await _failure(backend, prompt_bundle())  # unset while running: this call fails
    assert str(failure) == unset
    assert len(openai_server.requests) == 2  # nothing was sent without it
    with pytest.raises(ConfigError, match=f"^{re.escape(unset)}, then start again.$"):
        _backend(openai_server, api_key_env=KEY_ENV)  # unset at the start: no run at all


def test_run_without_the_key_is_a_user_error_that_changes_nothing(
    openai_workspace: MakeWorkspace, seed: Seed, read_record: ReadRecord,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    workspace = openai_workspace(openai={"api_key_env": KEY_ENV})
    seed(workspace, "req-1", "qa", events=5)
    before = read_record(workspace, "req-1")
    env = {name: value for name, value in os.environ.items() if name != KEY_ENV}
    done = _cli("run", "--once", "--workspace", str(workspace.root), env=env)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == (  # found before the backends are made: it names the roles
        f"teams-runtime: error: every role (8 roles): the environment variable {KEY_ENV} "
        "(model.openai.api_key_env) is not set; export the model server's key in it, then start "
        "again.\n"
    )
    assert read_record(workspace, "req-1") == before
    assert sum(FileWorkQueue(workspace).counts().values()) == 1


# --- retries ------------------------------------------------------------------------------


async def test_429_is_retried_after_what_retry_after_says(
    openai_server: FakeOpenAIServer, prompt_bundle: MakeBundle, log_messages: list[Any]
) -> None:
    openai_server.then(Status(429, retry_after="1", body='{"error": "slow down"}'))
    reply = await _backend(openai_server).complete(prompt_bundle())
    assert json.loads(reply.text)["status"] == "completed"
    first, second = openai_server.requests
    assert second.arrived - first.arrived >= 0.9  # it waited as asked (a lower bound only)
    assert second.body == first.body  # the whole prompt again, streamed anew
    warnings = [str(m).strip() for m in log_messages if m.record["level"].name == "WARNING"]
    assert warnings == ["model server answered 429 for qa on request req-1; retry 1 of 3 in 1.0 s"]


async def test_5xx_is_retried_with_backoff_up_to_max_retries(
    openai_server: FakeOpenAIServer, prompt_bundle: MakeBundle, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(openai_backend, "BACKOFF_FIRST_SECONDS", 0.01)
    openai_server.then(*[Status(500, body="model crashed")] * 3)
    failure = await _failure(_backend(openai_server, max_retries=2), prompt_bundle())
    assert str(failure) == (
        "the model server answered 500 Internal Server Error to 3 requests (max_retries 2)"
    )
    assert failure.output == "model crashed"  # for the attempts folder, never the message
    assert len(openai_server.requests) == 3
    openai_server.then(Status(500), Status(502))
    reply = await _backend(openai_server, max_retries=2).complete(prompt_bundle())
    assert json.loads(reply.text)["status"] == "completed"
    assert len(openai_server.requests) == 6


async def test_a_retry_after_beyond_the_timeout_fails_at_once(
    openai_server: FakeOpenAIServer, prompt_bundle: MakeBundle
) -> None:
    openai_server.then(Status(500, retry_after="3600"))  # (a 429 or 503: away, see servers)
    failure = await _failure(_backend(openai_server, timeout_seconds=5), prompt_bundle())
    assert str(failure) == (
        "the model server answered 500 Internal Server Error and asked to retry after 3600 s, "
        "longer than model.openai.timeout_seconds (5 s)"
    )
    assert len(openai_server.requests) == 1


@pytest.mark.parametrize(
    ("status", "message"),
    [
        pytest.param(400, "the model server answered 400 Bad Request", id="400"),
        pytest.param(
            401,
            f"the model server answered 401 Unauthorized; check the key in {KEY_ENV}",
            id="401",
        ),
        pytest.param(
            404,
            "the model server answered 404 Not Found; check model.openai.base_url (it usually "
            "ends in /v1) and model.openai.model",
            id="404",
        ),
    ],
)
async def test_other_errors_fail_at_once_and_never_show_the_key(
    openai_server: FakeOpenAIServer,
    prompt_bundle: MakeBundle,
    monkeypatch: pytest.MonkeyPatch,
    status: int,
    message: str,
) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)
    openai_server.then(Status(status, body=f'{{"error": "bad key {KEY}"}}'))  # quotes the key
    failure = await _failure(_backend(openai_server, api_key_env=KEY_ENV), prompt_bundle())
    assert str(failure) == message
    assert failure.output == '{"error": "bad key [api key]"}'
    assert len(openai_server.requests) == 1


# --- stalls, drops and garbage ------------------------------------------------------------


@pytest.mark.parametrize(
    ("behaviour", "message"),
    [
        pytest.param("stall", "no answer within 0.5 s (timeout_seconds)", id="stall"),
        pytest.param(
            "drop",
            "the connection to the model server broke (RemoteProtocolError) after {size} bytes "
            "of answer",
            id="drop-mid-stream",
        ),
        pytest.param(
            "garbage",
            "the model server answered with content type text/html instead of an event stream",
            id="garbage",
        ),
        pytest.param(
            "no_done",
            "the model server's stream ended before the answer was complete (no [DONE], no "
            "finish_reason; {size} bytes of answer)",
            id="no-done",
        ),
        pytest.param(
            "bad_event",
            "the model server sent an event that is not a chat-completion chunk (9 bytes)",
            id="bad-event",
        ),
        pytest.param(
            "stream_error", "the model server reported an error in the stream", id="stream-error"
        ),
        pytest.param(Text("   "), "the model answered nothing", id="empty"),
    ],
)
async def test_a_broken_answer_is_a_failed_call(
    openai_server: FakeOpenAIServer, prompt_bundle: MakeBundle, behaviour: Any, message: str
) -> None:
    openai_server.then(behaviour)
    failure = await _failure(_backend(openai_server, timeout_seconds=0.5), prompt_bundle())
    assert str(failure) == message.format(size=len(failure.output.encode()))
    assert len(openai_server.requests) == 1  # not an HTTP retry: the role's attempts decide


async def test_what_came_before_a_drop_is_kept_for_the_attempts_folder(
    openai_server: FakeOpenAIServer, prompt_bundle: MakeBundle
) -> None:
    openai_server.then("drop")
    failure = await _failure(_backend(openai_server), prompt_bundle())
    valid = json.dumps(answer_for("qa", "req-1"))
    assert failure.output and valid.startswith(failure.output) and failure.output != valid


@pytest.mark.parametrize(
    "behaviour", [pytest.param("answer", id="streamed"), pytest.param(Whole(), id="whole")]
)
async def test_an_answer_longer_than_max_output_bytes_fails(
    openai_server: FakeOpenAIServer, prompt_bundle: MakeBundle, behaviour: Any
) -> None:
    openai_server.then(behaviour)
    failure = await _failure(_backend(openai_server, max_output_bytes=50), prompt_bundle())
    assert str(failure) == "the model answered more than 50 bytes (max_output_bytes)"


async def test_make_backend_builds_it_from_the_model_section(
    openai_server: FakeOpenAIServer, prompt_bundle: MakeBundle, tmp_path: Path
) -> None:
    config = ModelConfig(
        backend="openai", openai=OpenAIConfig(base_url=openai_server.base_url, model="m")
    )
    backend = make_backend(config, tmp_path)
    assert backend.name == "openai"
    assert json.loads((await backend.complete(prompt_bundle())).text)["role"] == "qa"


@pytest.mark.parametrize(
    ("behaviour", "kept"),
    [
        pytest.param("garbage", "\ufffd\ufffd<html>502 upstream</html>\n", id="html-200"),
        pytest.param("bad_event", "{not json", id="event-not-json"),
        pytest.param(Raw(b"data: " + b"{" * 20_000 + b"\n\n"), "{" * 8192, id="long-bad-event"),
    ],
)
async def test_what_a_server_sent_instead_of_a_chat_completion_is_kept_bounded(
    openai_server: FakeOpenAIServer, prompt_bundle: MakeBundle, behaviour: Any, kept: str
) -> None:
    openai_server.then(behaviour)
    failure = await _failure(_backend(openai_server), prompt_bundle())
    assert failure.output == kept


@pytest.mark.parametrize(
    "content_type",
    [
        pytest.param("Application/JSON; Charset=UTF-8", id="json-any-case"),
        pytest.param("TEXT/EVENT-STREAM", id="event-stream-any-case"),
    ],
)
async def test_content_types_are_compared_in_any_case(
    openai_server: FakeOpenAIServer, prompt_bundle: MakeBundle, content_type: str
) -> None:
    answer = json.dumps(answer_for("qa", "req-1"))
    if content_type.lower().startswith("application/json"):
        body = {"choices": [{"message": {"content": answer}, "finish_reason": "stop"}]}
        raw = json.dumps(body).encode()
    else:
        raw = _events(answer)
    openai_server.then(Raw(raw, content_type=content_type))
    reply = await _backend(openai_server).complete(prompt_bundle())
    assert reply.text == answer


def _events(text: str, *, end: bytes = b"\n", usage: Any = None, bom: bool = False) -> bytes:
    """``text`` as an event stream in pieces of 7 characters, lines ended by ``end``."""
    events = [
        {"choices": [{"delta": {"content": text[i : i + 7]}}]} for i in range(0, len(text), 7)
    ]
    events.append({"choices": [{"delta": {}, "finish_reason": "stop"}]})
    if usage is not None:
        events.append({"choices": [], "usage": usage})
    lines = [b"data: " + json.dumps(event).encode() for event in events] + [b"data: [DONE]"]
    return (b"\xef\xbb\xbf" if bom else b"") + b"".join(line + end + end for line in lines)


@pytest.mark.parametrize(
    ("end", "bom"),
    [
        pytest.param(b"\r", False, id="cr"),
        pytest.param(b"\r\n", False, id="crlf"),
        pytest.param(b"\n", True, id="bom"),
        pytest.param(b"\r", True, id="bom-cr"),
    ],
)
async def test_event_streams_are_read_by_the_whatwg_rules(
    openai_server: FakeOpenAIServer, prompt_bundle: MakeBundle, end: bytes, bom: bool
) -> None:
    answer = json.dumps(answer_for("qa", "req-1"))
    openai_server.then(Raw(_events(answer, end=end, bom=bom)))
    reply = await _backend(openai_server).complete(prompt_bundle())
    assert reply.text == answer  # every event, the first one too


async def test_an_endless_line_fails_the_call_at_a_bound_set_by_max_output_bytes(
    openai_server: FakeOpenAIServer, prompt_bundle: MakeBundle
) -> None:
    openai_server.then("flood")
    backend = _backend(openai_server, max_output_bytes=1000, timeout_seconds=60)
    failure = await _failure(backend, prompt_bundle())
    limit = event_line_limit(1000)
    assert str(failure) == (
        f"the model server sent an event stream line longer than {limit} bytes (more than an "
        "answer within max_output_bytes needs)"
    )
    assert await anyio.to_thread.run_sync(openai_server.wait_for_hang_up, 10)


@pytest.mark.parametrize(
    ("usage", "seen"),
    [
        pytest.param({"prompt_tokens": 10.0, "completion_tokens": 2}, (10, 2), id="whole-float"),
        pytest.param({"prompt_tokens": -1, "completion_tokens": 2}, None, id="negative"),
        pytest.param({"prompt_tokens": "10", "completion_tokens": 2}, None, id="string"),
        pytest.param({"prompt_tokens": 1.5, "completion_tokens": 2}, None, id="fraction"),
        pytest.param({"prompt_tokens": True, "completion_tokens": 2}, None, id="bool"),
        pytest.param("lots", None, id="not-an-object"),
    ],
)
async def test_unusable_usage_is_ignored_and_the_answer_kept(
    openai_server: FakeOpenAIServer, prompt_bundle: MakeBundle, usage: Any, seen: Any
) -> None:
    answer = json.dumps(answer_for("qa", "req-1"))
    openai_server.then(Raw(_events(answer, usage=usage)))
    reply = await _backend(openai_server).complete(prompt_bundle())
    assert reply.text == answer
    expected = (
        None if seen is None else TokenUsage(prompt_tokens=seen[0], completion_tokens=seen[1])
    )
    assert reply.usage == expected


async def test_null_choices_are_no_choices(
    openai_server: FakeOpenAIServer, prompt_bundle: MakeBundle
) -> None:
    answer = json.dumps(answer_for("qa", "req-1"))
    stream = b'data: {"choices": null}\n\n' + _events(answer, usage={"prompt_tokens": 1})
    openai_server.then(Raw(stream))
    reply = await _backend(openai_server).complete(prompt_bundle())
    assert reply.text == answer and reply.usage is None


# --- the key in what the server says --------------------------------------------------------

# A key with a slash: JSON may escape it as \/ (PHP and some proxies do).
SLASHED_KEY = "sk-proj/" + "Zq9+x" * 8


def _escaped_twice(key: str) -> str:
    """The key as it reads inside a JSON string that quotes a JSON text quoting it."""
    return json.dumps(key.replace("/", "\\/"))[1:-1]


@pytest.mark.parametrize(
    "quoted",
    [
        pytest.param(SLASHED_KEY, id="raw"),
        pytest.param(SLASHED_KEY.replace("/", "\\/"), id="slash-escaped"),
        pytest.param("".join(f"\\u{ord(c):04x}" for c in SLASHED_KEY), id="all-unicode-escaped"),
        pytest.param(
            "".join(f"\\u{ord(c):04X}" if i % 2 else c for i, c in enumerate(SLASHED_KEY)),
            id="some-escaped-upper-hex",
        ),
        pytest.param(_escaped_twice(SLASHED_KEY), id="escaped-twice"),
    ],
)
@pytest.mark.parametrize("where", ["error-body", "stream-error"])
async def test_a_key_quoted_raw_or_json_escaped_is_scrubbed(
    openai_server: FakeOpenAIServer, prompt_bundle: MakeBundle, monkeypatch: pytest.MonkeyPatch,
    quoted: str, where: str,
) -> None:  # fmt: skip
    monkeypatch.setenv(KEY_ENV, SLASHED_KEY)
    said = f'{{"error": {{"message": "Incorrect API key provided: {quoted}."}}}}'
    if where == "error-body":
        openai_server.then(Status(401, body=said))
    else:
        openai_server.then(Raw(b"data: " + said.encode() + b"\n\n"))
    failure = await _failure(_backend(openai_server, api_key_env=KEY_ENV), prompt_bundle())
    scrubbed = '{"message": "Incorrect API key provided: [api key]."}'
    assert failure.output == (f'{{"error": {scrubbed}}}' if where == "error-body" else scrubbed)


@pytest.mark.parametrize("inside", [1, 4, 10, len(KEY) - 1])
async def test_a_key_across_the_cut_of_an_error_body_is_scrubbed_whole(
    openai_server: FakeOpenAIServer, prompt_bundle: MakeBundle, monkeypatch: pytest.MonkeyPatch,
    inside: int,
) -> None:  # fmt: skip
    monkeypatch.setenv(KEY_ENV, KEY)
    pad = "p" * (KEPT_CHARS - inside)  # the key's first `inside` characters before the cut
    openai_server.then(Status(400, body=pad + KEY + " was refused"))
    failure = await _failure(_backend(openai_server, api_key_env=KEY_ENV), prompt_bundle())
    assert failure.output == pad + "[api key]"


async def test_an_answer_that_quotes_the_key_is_scrubbed_before_it_is_returned(
    openai_server: FakeOpenAIServer, prompt_bundle: MakeBundle, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)
    backend = _backend(openai_server, api_key_env=KEY_ENV)
    valid = answer_for("qa", "req-1") | {"summary": f"called the API with {KEY} as told"}
    whole = answer_for("qa", "req-1") | {"summary": f"{KEY}"}
    openai_server.then(Text(json.dumps(valid)), Raw(_events(json.dumps(whole))))
    reply = await backend.complete(prompt_bundle())  # the key split over several events
    assert json.loads(reply.text)["summary"] == "called the API with [api key] as told"
    reply = await backend.complete(prompt_bundle())
    assert json.loads(reply.text)["summary"] == "[api key]"
    openai_server.then(Cut(f"so far: {KEY}"), Cut(f"so far: {KEY[:12]}"), Cut(f"{KEY[:-1]}"))
    for _ in range(3):  # whole, or broken off inside the key: nothing of it is kept
        failure = await _failure(backend, prompt_bundle())
        assert failure.output in ("so far: [api key]", "[api key]")


MIXED_CASE_KEY = "sk-ABCdef1234567890ghIJ"
LOWER_KEY = "sk-abcdef1234567890ghij"


@pytest.mark.parametrize(
    ("behaviour", "reason", "key"),
    [
        pytest.param(
            Raw(b"{}", content_type="application/json", status=400, reason=MIXED_CASE_KEY),
            "the model server answered 400 Bad Request",
            MIXED_CASE_KEY,
            id="status-line",
        ),
        pytest.param(
            Raw(b"<p>hi</p>", content_type=f"text/{MIXED_CASE_KEY}"),
            "the model server answered with another content type instead of an event stream",
            MIXED_CASE_KEY,
            id="content-type",
        ),
        pytest.param(
            # a lower-case key echoed in upper case: lower-casing the type rebuilt the key
            Raw(b"<p>hi</p>", content_type=f"application/{LOWER_KEY.upper()}"),
            "the model server answered with another content type instead of an event stream",
            LOWER_KEY,
            id="content-type-in-another-case",
        ),
        pytest.param(
            Raw(b"<p>hi</p>", content_type="text/" + "x" * 200),
            "the model server answered with another content type instead of an event stream",
            MIXED_CASE_KEY,
            id="content-type-too-long",
        ),
    ],
)
async def test_reasons_repeat_nothing_the_server_said(
    openai_server: FakeOpenAIServer, prompt_bundle: MakeBundle, monkeypatch: pytest.MonkeyPatch,
    behaviour: Raw, reason: str, key: str,
) -> None:  # fmt: skip
    monkeypatch.setenv(KEY_ENV, key)
    openai_server.then(behaviour)
    failure = await _failure(_backend(openai_server, api_key_env=KEY_ENV), prompt_bundle())
    assert str(failure) == reason
    assert key not in str(failure) and key not in (failure.output or "")


async def test_a_team_keeps_no_answer_that_quotes_the_key(
    openai_workspace: MakeWorkspace, seed: Seed, read_record: ReadRecord, run_once: RunOnce,
    openai_server: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    monkeypatch.setenv(KEY_ENV, KEY)
    workspace = openai_workspace(openai={"api_key_env": KEY_ENV})
    seed(workspace, "req-1", "qa", events=5)
    valid = answer_for("qa", "req-1") | {"summary": f"tested with {KEY}"}
    openai_server.then(Text(f"Sure! The key {KEY} works."), Text(json.dumps(valid)))
    summary = await run_once(workspace, roles=["qa"])
    assert [p.purpose for p in summary.prompts] == ["role_task", "contract_repair"]
    record = read_record(workspace, "req-1")
    assert record["status"] == "completed"
    assert record["result"]["summary"] == "tested with [api key]"
    (rejected,) = workspace.attempts_folder("req-1").iterdir()
    assert json.loads(rejected.read_text())["answer"] == "Sure! The key [api key] works."
    assert KEY not in openai_server.requests[1].prompt  # the repair prompt quotes it scrubbed
    written = [path for path in workspace.root.rglob("*") if path.is_file()]
    assert not [path for path in written if KEY.encode() in path.read_bytes()]


# --- what must never take a run down ------------------------------------------------------


async def test_a_retry_after_that_is_not_a_number_is_no_retry_after(
    openai_server: FakeOpenAIServer, prompt_bundle: MakeBundle, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(openai_backend, "BACKOFF_FIRST_SECONDS", 0.01)
    openai_server.then(Status(429, retry_after="\u00b2"))  # `isdigit()`, yet no number
    reply = await _backend(openai_server).complete(prompt_bundle())
    assert json.loads(reply.text)["status"] == "completed"
    assert len(openai_server.requests) == 2


BAD_KEYS = [
    pytest.param("sk-abc def", id="space"),
    pytest.param("sk-abc\n", id="line-break"),
    pytest.param("sk-\u043a\u043b\u044e\u0447", id="non-ascii"),
]


@pytest.mark.parametrize("bad", BAD_KEYS)
async def test_a_key_no_header_can_carry_is_refused_by_name_never_by_value(
    openai_server: FakeOpenAIServer, prompt_bundle: MakeBundle, monkeypatch: pytest.MonkeyPatch,
    bad: str,
) -> None:  # fmt: skip
    problem = (
        f"the environment variable {KEY_ENV} (model.openai.api_key_env) holds a space, a line "
        "break or a character that is not ASCII, which no API key has; export only the key in it"
    )
    monkeypatch.setenv(KEY_ENV, bad)
    with pytest.raises(ConfigError, match=f"^{re.escape(problem)}, then start again.$"):
        _backend(openai_server, api_key_env=KEY_ENV)  # at the start: no run at all
    monkeypatch.setenv(KEY_ENV, KEY)
    backend = _backend(openai_server, api_key_env=KEY_ENV)
    monkeypatch.setenv(KEY_ENV, bad)  # changed while running: this call fails, nothing is sent
    failure = await _failure(backend, prompt_bundle())
    assert str(failure) == problem
    assert not openai_server.requests


def test_run_with_a_key_no_header_can_carry_is_a_user_error(
    openai_workspace: MakeWorkspace, seed: Seed, read_record: ReadRecord
) -> None:
    workspace = openai_workspace(openai={"api_key_env": KEY_ENV})
    seed(workspace, "req-1", "qa", events=5)
    before = read_record(workspace, "req-1")
    bad = "sk-\u043a\u043b\u044e\u0447 x"
    done = _cli(
        "run", "--once", "--workspace", str(workspace.root), env={**os.environ, KEY_ENV: bad}
    )
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith(
        f"teams-runtime: error: every role (8 roles): the environment variable {KEY_ENV} "
    )
    assert "Traceback" not in done.stderr and bad not in done.stderr
    assert read_record(workspace, "req-1") == before
    assert sum(FileWorkQueue(workspace).counts().values()) == 1


async def test_an_unexpected_error_in_a_call_fails_it_with_the_error_type_only(
    openai_workspace: MakeWorkspace, seed: Seed, read_record: ReadRecord, run_once: RunOnce,
    openai_server: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    def broken(data: bytes) -> Any:  # a bug, with content in its message
        raise OverflowError(f"cannot take {data!r} with {KEY}")

    monkeypatch.setattr(openai_answers, "decode_chunk", broken)
    workspace = openai_workspace(model={"attempts": 2, "on_failure": "fail"})
    seed(workspace, "req-1", "qa", events=5)
    summary = await run_once(workspace, roles=["qa"])
    assert (summary.handled, summary.failed, summary.prompts_sent) == (0, 1, 2)
    record = read_record(workspace, "req-1")
    assert record["status"] == "failed"  # the envelope is done with: it cannot come back forever
    (failed,) = [event for event in record["events"] if event.get("type") == "model_failed"]
    reason = "the call to the model server failed unexpectedly (OverflowError)"
    assert failed["payload"]["reason"] == reason
    assert sum(FileWorkQueue(workspace).counts().values()) == 0


# --- a team on the server: as on a model command ------------------------------------------


async def test_a_team_runs_on_the_server_with_usage_in_every_prompt_record(
    openai_workspace: MakeWorkspace, seed: Seed, read_record: ReadRecord, run_once: RunOnce,
    openai_server: FakeOpenAIServer,
) -> None:  # fmt: skip
    workspace = openai_workspace()
    seed(workspace, "req-1", "planner", events=30)
    summary = await run_once(workspace)
    assert (summary.handled, summary.failed, summary.prompts_sent) == (4, 0, 4)
    record = read_record(workspace, "req-1")
    assert record["status"] == "completed" and record["result"]["role"] == "qa"
    prompts = [seen.prompt for seen in openai_server.requests]
    assert [(p.role, p.prompt_tokens, p.completion_tokens) for p in summary.prompts] == [
        (role, len(prompt) // PROMPT_TOKENS_PER_CHAR, len(json.dumps(answer_for(role, "req-1"))))
        for role, prompt in zip(
            ["planner", "developer", "version_controller", "qa"], prompts, strict=True
        )
    ]
    assert [p.prompt_chars for p in summary.prompts] == [len(prompt) for prompt in prompts]


async def test_a_garbage_answer_gets_a_contract_repair_prompt(
    openai_workspace: MakeWorkspace, seed: Seed, read_record: ReadRecord, run_once: RunOnce,
    openai_server: FakeOpenAIServer,
) -> None:  # fmt: skip
    workspace = openai_workspace()
    seed(workspace, "req-1", "qa", events=5)
    openai_server.then(Text("Sure! The tests pass."))
    summary = await run_once(workspace, roles=["qa"])
    assert (summary.handled, summary.failed) == (1, 0)
    assert [p.purpose for p in summary.prompts] == ["role_task", "contract_repair"]
    assert "Previous invalid payload:" in openai_server.requests[1].prompt
    assert read_record(workspace, "req-1")["status"] == "completed"
    (rejected,) = workspace.attempts_folder("req-1").iterdir()
    kept = json.loads(rejected.read_text())
    assert kept["answer"] == "Sure! The tests pass."
    assert kept["reason"].startswith("rejected by contract validation")


async def test_a_dropped_call_is_tried_again_and_kept_in_the_attempts_folder(
    openai_workspace: MakeWorkspace, seed: Seed, read_record: ReadRecord, run_once: RunOnce,
    openai_server: FakeOpenAIServer,
) -> None:  # fmt: skip
    workspace = openai_workspace(model={"attempts": 2})
    seed(workspace, "req-1", "qa", events=5)
    openai_server.then("drop")
    summary = await run_once(workspace, roles=["qa"])
    assert (summary.handled, summary.failed, summary.prompts_sent) == (1, 0, 2)
    assert summary.prompts[0].prompt_tokens is None  # the failed call reported nothing
    assert summary.prompts[1].prompt_tokens is not None
    assert read_record(workspace, "req-1")["status"] == "completed"
    (failed,) = workspace.attempts_folder("req-1").iterdir()
    kept = json.loads(failed.read_text())
    assert kept["reason"].startswith("the connection to the model server broke")
    assert kept["call"] == 1 and kept["exit_status"] is None and kept["answer"]


@pytest.mark.parametrize(
    ("on_failure", "status", "left_queued"),
    [pytest.param("fail", "failed", 0, id="fail"), pytest.param("requeue", None, 1, id="requeue")],
)
async def test_a_server_that_never_answers_fails_cleanly(
    openai_workspace: MakeWorkspace, seed: Seed, read_record: ReadRecord, run_once: RunOnce,
    openai_server: FakeOpenAIServer, on_failure: str, status: str | None, left_queued: int,
) -> None:  # fmt: skip
    workspace = openai_workspace(
        openai={"timeout_seconds": 0.3}, model={"attempts": 2, "on_failure": on_failure}
    )
    seed(workspace, "req-1", "qa", events=5)
    openai_server.then("stall", "stall")
    summary = await run_once(workspace, roles=["qa"])
    assert summary.prompts_sent == 2 and len(openai_server.requests) == 2
    record = read_record(workspace, "req-1")
    failed = [event for event in record["events"] if event.get("type") == "model_failed"]
    if status == "failed":
        assert record["status"] == "failed"
        assert failed[0]["payload"]["reason"] == "no answer within 0.3 s (timeout_seconds)"
    else:
        assert not failed and record["status"] != "failed"
    assert sum(FileWorkQueue(workspace).counts().values()) == left_queued


# --- the command line, end to end ---------------------------------------------------------


def _cli(*argv: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "teams_runtime", *argv],
        capture_output=True,
        text=True,
        check=False,
        env=env,
        timeout=120,
    )


def test_run_once_through_the_cli_logs_usage_and_never_the_key(
    openai_workspace: MakeWorkspace, openai_server: FakeOpenAIServer
) -> None:
    workspace = openai_workspace(openai={"api_key_env": KEY_ENV}, model={"attempts": 2})
    root = str(workspace.root)
    env = {**os.environ, KEY_ENV: KEY}
    # The first call is refused with an error body that quotes the key, as some servers do.
    openai_server.then(Status(401, body=f'{{"error": "invalid key {KEY}"}}'))
    outputs = []
    for argv in (
        ["submit", "--workspace", root, "--role", "planner", "--scope", "Add CSV export",
         "--request-id", "req-a"],
        ["run", "--once", "--workspace", root],
        ["config", "--workspace", root],
        ["metrics", "--workspace", root, "--json"],
        ["metrics", "--workspace", root],
    ):  # fmt: skip
        done = _cli(*argv, env=env)
        assert done.returncode == 0, done.stderr
        outputs += [done.stdout, done.stderr]
    run_out, config_out, metrics_json, metrics_table = outputs[2:9:2]
    assert "Finished 4 envelopes: 4 done, 0 failed" in run_out and "5 model calls" in run_out
    assert {seen.headers["authorization"] for seen in openai_server.requests} == {f"Bearer {KEY}"}
    config = json.loads(config_out)["model"]
    assert config["backend"] == "openai" and config["openai"]["api_key_env"] == KEY_ENV
    totals = json.loads(metrics_json)["totals"]
    answered = openai_server.requests[1:]  # the 401 reported no usage
    assert totals["prompts"] == 5 and totals["prompts_with_usage"] == 4
    assert totals["prompt_tokens"] == sum(
        len(seen.prompt) // PROMPT_TOKENS_PER_CHAR for seen in answered
    )
    assert totals["completion_tokens"] > 0
    assert "tokens in/out" in metrics_table
    log = workspace.logs_dir / "prompt_context.jsonl"
    records = [json.loads(line) for line in log.read_text().splitlines()]
    assert [r["prompt_tokens"] is None for r in records] == [True, False, False, False, False]
    # The key is nowhere: not in what the CLI printed, nor in any file it wrote.
    assert not [text for text in outputs if KEY in text]
    written = [path for path in Path(root).rglob("*") if path.is_file()]
    kept = [path.read_text() for path in written if "attempts" in path.parts]
    assert len(kept) == 1 and "invalid key [api key]" in kept[0]  # the 401 body, scrubbed
    assert not [path for path in written if KEY.encode() in path.read_bytes()]


async def test_a_timed_out_call_closes_its_connection(
    openai_server: FakeOpenAIServer, prompt_bundle: MakeBundle
) -> None:
    openai_server.then("stall")
    await _failure(_backend(openai_server, timeout_seconds=0.3), prompt_bundle())
    assert await anyio.to_thread.run_sync(openai_server.wait_for_hang_up, 10)


def test_stopping_a_run_closes_the_call_in_flight_and_keeps_the_envelope(
    openai_workspace: MakeWorkspace, openai_server: FakeOpenAIServer, seed: Seed,
    read_record: ReadRecord,
) -> None:  # fmt: skip
    workspace = openai_workspace(openai={"timeout_seconds": 120})
    seed(workspace, "req-1", "qa", events=5)
    openai_server.then("stall")
    runner = subprocess.Popen(
        [sys.executable, "-m", "teams_runtime", "run", "--workspace", str(workspace.root)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    eventually_sync(  # the call is in flight (or the run ended: the assert says why)
        lambda: openai_server.requests or runner.poll() is not None, "the model call", 60
    )
    assert runner.poll() is None, runner.communicate()
    runner.send_signal(signal.SIGINT)
    out, err = runner.communicate(timeout=60)
    assert runner.returncode == 0, err
    assert "Stopped; 1 envelope queued for the next run." in out
    assert openai_server.wait_for_hang_up(10)  # the run closed the connection
    assert read_record(workspace, "req-1").get("status") != "failed"
    done = _cli("run", "--once", "--workspace", str(workspace.root), env=dict(os.environ))
    assert done.returncode == 0 and "Finished 1 envelope: 1 done, 0 failed" in done.stdout
    assert read_record(workspace, "req-1")["status"] == "completed"
