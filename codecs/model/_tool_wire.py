"""Tool calls on the OpenAI-compatible chat-completions wire: the pieces of ``tool_calls`` a
stream sends (assembled by ``index``, as OpenAI, vLLM, llama.cpp and Ollama send them), the
``tools`` a request offers, and the messages a round of calls adds to the next request.

A whole (non-streamed) completion's ``message.tool_calls`` has the same shape without
``index``: its calls are taken in order. A stream whose deltas carry no ``index`` (older
Ollama sends each call whole) starts a new call at each new ``id``.
"""

from __future__ import annotations

import msgspec

from teams_runtime.codecs.formats import JsonObject

__all__ = [
    "ToolCall",
    "ToolCallDelta",
    "ToolCallParts",
    "assistant_message",
    "names_tools",
    "request_tail",
    "tool_message",
    "tool_spec",
]

_ENCODER = msgspec.json.Encoder()


class _FunctionDelta(msgspec.Struct, frozen=True):
    name: str | None = None
    arguments: str | None = None


class ToolCallDelta(msgspec.Struct, frozen=True):
    """A piece of one tool call, as a stream's delta (or a whole message) carries it."""

    index: int | None = None
    id: str | None = None
    function: _FunctionDelta | None = None


class ToolCall(msgspec.Struct, frozen=True, kw_only=True):
    """One whole call the model asked for: its id, the tool's name, its arguments (JSON text,
    as the model wrote it: read by the tool loop)."""

    id: str
    name: str
    arguments: str


class ToolCallParts:
    """The tool calls of one answer, assembled from their pieces."""

    def __init__(self) -> None:
        self._ids: dict[int, str] = {}
        self._names: dict[int, list[str]] = {}
        self._arguments: dict[int, list[str]] = {}

    def __bool__(self) -> bool:
        return bool(self._names)

    def take(self, deltas: list[ToolCallDelta]) -> int:
        """Add ``deltas``; returns the bytes of names and arguments they added."""
        size = 0
        for delta in deltas:
            index = self._index_of(delta)
            if delta.id:
                self._ids[index] = delta.id
            self._names.setdefault(index, [])
            self._arguments.setdefault(index, [])
            function = delta.function
            if function is not None:
                for part, into in (
                    (function.name, self._names),
                    (function.arguments, self._arguments),
                ):
                    if part:
                        into[index].append(part)
                        size += len(part.encode("utf-8"))
        return size

    def _index_of(self, delta: ToolCallDelta) -> int:
        if delta.index is not None:
            return delta.index
        if not self._names:
            return 0
        last = max(self._names)
        if delta.id and self._ids.get(last, delta.id) != delta.id:
            return last + 1  # a whole call of its own, without an index
        return last

    def assembled(self) -> tuple[ToolCall, ...]:
        """The calls in index order; a call without an id gets one (``call_<index>``)."""
        return tuple(
            ToolCall(
                id=self._ids.get(index) or f"call_{index}",
                name="".join(self._names[index]),
                arguments="".join(self._arguments[index]),
            )
            for index in sorted(self._names)
        )


def tool_spec(name: str, description: str, parameters: JsonObject) -> JsonObject:
    """One entry of a request's ``tools``: a function, its description and its parameters'
    JSON schema."""
    return {
        "type": "function",
        "function": {"name": name, "description": description, "parameters": parameters},
    }


def assistant_message(text: str, calls: tuple[ToolCall, ...]) -> JsonObject:
    """The model's turn that asked for ``calls``, as the next request repeats it."""
    return {
        "role": "assistant",
        "content": text or None,
        "tool_calls": [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments},
            }
            for call in calls
        ],
    }


def tool_message(call_id: str, content: str) -> JsonObject:
    """What a tool answered to the call ``call_id``."""
    return {"role": "tool", "tool_call_id": call_id, "content": content}


def request_tail(messages: list[JsonObject]) -> bytes:
    """The end of a body whose prompt (the user message) is followed by ``messages``: it
    closes the user message, adds them, then closes the list and the body (``REQUEST_TAIL``
    when there are none)."""
    return b'"}' + b"".join(b"," + _ENCODER.encode(message) for message in messages) + b"]}"


def names_tools(said: str) -> bool:
    """Whether an error reply's text is about the request's ``tools`` (a server that takes
    none: llama-server without ``--jinja``, an Ollama model without tool support)."""
    return "tool" in said.lower()
