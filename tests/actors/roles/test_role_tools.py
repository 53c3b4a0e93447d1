"""Tools on the ``openai`` backend, as a role uses them: ``read_events`` for an event its
projection left out, the event sent back verbatim in the next request, the round counted in
the prompt record and kept in the attempts folder; the loop bounded by ``max_rounds``; tool
errors answered to the model; a server that refuses tools remembered."""

from __future__ import annotations

import json
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from teams_runtime.actors.team._team import RunSummary
from teams_runtime.storage import Workspace

from ...support.fake_openai_server import FakeOpenAIServer, Status, ToolCalls

pytestmark = pytest.mark.anyio

RunOnce = Callable[..., Awaitable[RunSummary]]
Seed = Callable[..., None]
MakeWorkspace = Callable[..., Workspace]


def _tool_messages(server: FakeOpenAIServer, number: int) -> list[dict[str, Any]]:
    return [m for m in server.requests[number].messages if m["role"] == "tool"]


def _event_bytes(workspace: Workspace, request_id: str, index: int) -> str:
    """Event ``index`` of the record as stored (its raw JSON text)."""
    import msgspec

    from teams_runtime.codecs.request_records import decode_record

    fields = decode_record(workspace.request_path(request_id).read_bytes(), "test")
    events: list[msgspec.Raw] = fields["events"]
    return bytes(events[index]).decode()


def _tool_files(workspace: Workspace, request_id: str) -> list[dict[str, Any]]:
    folder = workspace.attempts_folder(request_id)
    return [json.loads(path.read_text()) for path in sorted(folder.glob("*-tools.json"))]


async def test_a_role_reads_an_omitted_event_and_the_next_request_carries_it(
    openai_workspace: MakeWorkspace,
    openai_server: FakeOpenAIServer,
    seed: Seed,
    run_once: RunOnce,
) -> None:
    workspace = openai_workspace(model={"tools": {"read_events": True}})
    seed(workspace, "req-1", "qa", events=30)
    openai_server.then(ToolCalls((("read_events", '{"index": 2}'),)))
    summary = await run_once(workspace)
    assert summary.failed == 0
    first = openai_server.requests[0].json()
    names = [tool["function"]["name"] for tool in first["tools"]]
    assert names == ["read_events", "read_record"]
    # The tool's description names what the prompt left out: event 2 among them.
    assert "left out events 0-" in first["tools"][0]["function"]["description"]
    assert "response_format" not in first  # no schema on a round that offers tools
    second = openai_server.requests[1]
    [assistant] = [m for m in second.messages if m["role"] == "assistant"]
    assert assistant["tool_calls"][0]["function"] == {
        "name": "read_events",
        "arguments": '{"index": 2}',
    }
    [result] = _tool_messages(openai_server, 1)
    assert result["tool_call_id"] == assistant["tool_calls"][0]["id"]
    event = _event_bytes(workspace, "req-1", 2)
    assert event in result["content"]  # verbatim
    assert event not in second.prompt  # it was omitted from the prompt
    [record] = [r for r in summary.prompts if r.role == "qa"]
    assert (record.tool_rounds, record.tool_calls, record.outcome) == (1, 1, "completed")
    [kept] = _tool_files(workspace, "req-1")
    assert kept["rounds"] == 1
    assert kept["tool_calls"][0]["name"] == "read_events"
    assert event in kept["tool_calls"][0]["result"]


async def test_the_loop_stops_at_max_rounds_with_a_closing_request(
    openai_workspace: MakeWorkspace,
    openai_server: FakeOpenAIServer,
    seed: Seed,
    run_once: RunOnce,
) -> None:
    workspace = openai_workspace(model={"tools": {"read_events": True, "max_rounds": 2}})
    seed(workspace, "req-1", "qa", events=30)
    again = ToolCalls((("read_record", "{}"),))
    openai_server.then(again, again, again)  # the third is the closing request's answer
    summary = await run_once(workspace)
    assert len(openai_server.requests) >= 3
    closing = openai_server.requests[2].json()
    assert closing["tool_choice"] == "none"
    assert closing["response_format"]["type"] == "json_schema"  # the schema again
    [record, *_] = [r for r in summary.prompts if r.role == "qa"]
    assert (record.tool_rounds, record.tool_calls, record.outcome) == (2, 2, "failed")


async def test_tool_errors_are_results_the_model_reads(
    openai_workspace: MakeWorkspace,
    openai_server: FakeOpenAIServer,
    seed: Seed,
    run_once: RunOnce,
) -> None:
    workspace = openai_workspace(model={"tools": {"read_events": True}})
    seed(workspace, "req-1", "qa", events=30)
    calls = (
        ("read_events", '{"index": 99}'),
        ("read_events", "not json"),
        ("delete_everything", "{}"),
        ("read_events", '{"start": 1, "end": 3}'),
    )
    openai_server.then(ToolCalls(calls, whole=True))
    summary = await run_once(workspace)
    assert summary.failed == 0
    results = [m["content"] for m in _tool_messages(openai_server, 1)]
    assert results[0] == "error: the record has events 0 to 29; no event 99-99"
    assert results[1] == "error: the arguments are not JSON; send a JSON object"
    assert results[2].startswith("error: no tool named 'delete_everything'")
    assert [line for line in results[3].splitlines() if line.startswith("event ")] == [
        "event 1 of 30:",
        "event 2 of 30:",
        "event 3 of 30:",
    ]


async def test_an_event_past_the_budget_is_answered_content_free(
    openai_workspace: MakeWorkspace,
    openai_server: FakeOpenAIServer,
    seed: Seed,
    run_once: RunOnce,
    tmp_path: Any,
) -> None:
    workspace = openai_workspace(model={"tools": {"read_events": True}})
    config = (tmp_path / "team_runtime.yaml").read_text()
    # A budget that the prompt itself nearly fills: no room for an event.
    (tmp_path / "team_runtime.yaml").write_text(
        config + "prompt_context:\n  max_events: 4\n  recent_events: 2\n  max_prompt_tokens: 1500\n"
    )
    seed(workspace, "req-1", "qa", events=30)
    openai_server.then(ToolCalls((("read_events", '{"index": 2}'),)))
    summary = await run_once(workspace)
    assert summary.failed == 0
    [result] = _tool_messages(openai_server, 1)
    assert result["content"].startswith("event 2: too large: ")
    assert ", budget " in result["content"]
    assert _event_bytes(workspace, "req-1", 2) not in result["content"]


async def test_a_server_that_refuses_tools_is_asked_without_them_for_the_run(
    openai_workspace: MakeWorkspace,
    openai_server: FakeOpenAIServer,
    seed: Seed,
    run_once: RunOnce,
) -> None:
    workspace = openai_workspace(model={"tools": {"read_events": True}})
    seed(workspace, "req-1", "qa", events=30)
    seed(workspace, "req-2", "qa", events=30)
    openai_server.then(Status(500, body='{"error": "tools param requires --jinja flag"}'))
    summary = await run_once(workspace)
    assert summary.failed == 0
    bodies = [request.json() for request in openai_server.requests]
    assert "tools" in bodies[0]
    assert all("tools" not in body for body in bodies[1:])  # remembered: never sent again
    assert all(body["response_format"]["type"] == "json_schema" for body in bodies[1:])
    assert all(record.tool_calls == 0 for record in summary.prompts)


async def test_an_mcp_stdio_server_serves_its_allowed_tools_to_a_role(
    openai_workspace: MakeWorkspace,
    openai_server: FakeOpenAIServer,
    seed: Seed,
    run_once: RunOnce,
) -> None:
    pytest.importorskip("mcp")
    server = {
        "name": "echo",
        "command": [
            sys.executable,
            str(Path(__file__).parents[2] / "support" / "mcp_echo_server.py"),
        ],
        "tools": ["shout", "fail"],
    }
    workspace = openai_workspace(model={"tools": {"mcp": [server]}})
    seed(workspace, "req-1", "qa", events=30)
    calls = (("shout", '{"text": "hello"}'), ("fail", '{"text": "x"}'), ("whisper", "{}"))
    openai_server.then(ToolCalls(calls))
    summary = await run_once(workspace)
    assert summary.failed == 0
    offered = [tool["function"]["name"] for tool in openai_server.requests[0].json()["tools"]]
    assert offered == ["shout", "fail"]  # the allow-list: whisper is not offered
    results = [m["content"] for m in _tool_messages(openai_server, 1)]
    assert results[0] == "HELLO"
    assert results[1].startswith("error: ")  # the tool's failure, told to the model
    assert results[2].startswith("error: no tool named 'whisper'")
    [record] = [r for r in summary.prompts if r.role == "qa"]
    assert (record.tool_rounds, record.tool_calls) == (1, 3)
