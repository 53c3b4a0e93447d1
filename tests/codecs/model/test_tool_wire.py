"""Tool calls on the chat-completions wire: pieces assembled by index (OpenAI, vLLM,
llama.cpp), whole calls without an index (older Ollama), a whole completion's calls, and the
body's end with a round's messages."""

from __future__ import annotations

import json

from teams_runtime.codecs.model import (
    REQUEST_TAIL,
    ToolCall,
    ToolCallParts,
    decode_chunk,
    request_tail,
    tool_message,
)


def _delta(*calls: dict[str, object]) -> bytes:
    return json.dumps({"choices": [{"index": 0, "delta": {"tool_calls": list(calls)}}]}).encode()


def test_pieces_are_assembled_by_index_whatever_their_order() -> None:
    parts = ToolCallParts()
    for data in (
        _delta({"index": 0, "id": "a", "function": {"name": "read_events", "arguments": ""}}),
        _delta({"index": 1, "id": "b", "function": {"name": "read_record", "arguments": "{"}}),
        _delta({"index": 0, "function": {"arguments": '{"ind'}}),
        _delta({"index": 0, "function": {"arguments": 'ex": 2}'}}),
        _delta({"index": 1, "function": {"arguments": "}"}}),
    ):
        parts.take(decode_chunk(data).tool_calls())
    assert parts.assembled() == (
        ToolCall(id="a", name="read_events", arguments='{"index": 2}'),
        ToolCall(id="b", name="read_record", arguments="{}"),
    )


def test_whole_calls_without_an_index_are_calls_of_their_own() -> None:
    parts = ToolCallParts()
    for call_id in ("x", "y"):
        whole = {"id": call_id, "function": {"name": "read_record", "arguments": "{}"}}
        parts.take(decode_chunk(_delta(whole)).tool_calls())
    assert [call.id for call in parts.assembled()] == ["x", "y"]


def test_a_whole_completion_carries_its_calls() -> None:
    message = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c", "type": "function", "function": {"name": "n", "arguments": "{}"}}
        ],
    }
    data = json.dumps({"choices": [{"message": message, "finish_reason": "tool_calls"}]})
    chunk = decode_chunk(data.encode())
    parts = ToolCallParts()
    assert parts.take(chunk.tool_calls()) == 3  # the bytes of name and arguments
    assert parts.assembled() == (ToolCall(id="c", name="n", arguments="{}"),)
    assert chunk.finish_reason() == "tool_calls"


def test_the_body_ends_with_the_rounds_after_the_prompt() -> None:
    head = b'{"messages":[{"role":"user","content":"hi'
    assert json.loads(head + request_tail([])) == json.loads(head + REQUEST_TAIL)
    body = json.loads(head + request_tail([tool_message("c", 'a "quoted" result')]))
    assert body["messages"][1] == {
        "role": "tool",
        "tool_call_id": "c",
        "content": 'a "quoted" result',
    }
