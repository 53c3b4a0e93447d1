"""The OpenAI-compatible chat-completions wire: the request body (with the role's settings and
the ``response_format`` forms), the server-sent-event stream of the answer and its chunks,
``Retry-After``, and what an error reply is about. Shapes only: the HTTP calls are
``actors.models._openai``.

Only the fields the runtime uses are decoded (``choices[].delta.content``, its ``tool_calls``
(``_tool_wire``), ``finish_reason``, ``usage``, ``error``); servers add many others, which are
ignored. ``usage`` is only counted, so a usage that cannot be counted is no usage, never a
reason to throw an answer away; a ``finish_reason`` is reduced to the fixed names of
``model_replies.FinishReason``.
"""

from __future__ import annotations

import re
from datetime import datetime
from email.utils import parsedate_to_datetime
from typing import Literal

import msgspec

from teams_runtime.codecs.config import OpenAIConfig, StructuredOutput
from teams_runtime.codecs.formats import JsonObject
from teams_runtime.codecs.model._replies import FinishReason, TokenUsage, finish_reason_of
from teams_runtime.codecs.model._tool_wire import ToolCallDelta

__all__ = [
    "DONE",
    "REQUEST_TAIL",
    "ChatChunk",
    "EventStreamDecoder",
    "EventTooLong",
    "ResponseFormat",
    "decode_chunk",
    "event_line_limit",
    "forms_to_try",
    "json_string_fragment",
    "names_context_limit",
    "names_response_format",
    "request_fields",
    "request_head",
    "response_format",
    "retry_after_seconds",
]

DONE = b"[DONE]"  # the data of the stream's last event
REQUEST_TAIL = b'"}]}'  # closes the user message, the messages list and the body

_MAX_COUNT = 2**53  # a JSON number any client reads exactly


def _count(value: object) -> int | None:
    """A token count the server reported, if it is one (a whole number, not negative)."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= _MAX_COUNT:
        return value
    return None


class _Text(msgspec.Struct, frozen=True):
    content: str | None = None
    tool_calls: list[ToolCallDelta] | None = None


class _Choice(msgspec.Struct, frozen=True):
    delta: _Text | None = None  # a stream chunk
    message: _Text | None = None  # a whole completion (a server that ignored `stream`)
    finish_reason: str | None = None


class ChatChunk(msgspec.Struct, frozen=True):
    """One event of the answer's stream (or a whole completion), reduced to what is used."""

    choices: list[_Choice] | None = None
    usage: object = None  # only counted: read leniently by token_usage()
    # Some servers report a failure inside the stream. (A Raw cannot sit in a union with
    # None: empty when absent, the bytes `null` when null.)
    error: msgspec.Raw = msgspec.Raw()

    def text(self) -> str:
        """The reply text this chunk carries."""
        parts = []
        for choice in self.choices or ():
            carrier = choice.delta or choice.message
            if carrier is not None and carrier.content:
                parts.append(carrier.content)
        return "".join(parts)

    def tool_calls(self) -> list[ToolCallDelta]:
        """The pieces of tool calls this chunk carries."""
        return [
            delta
            for choice in self.choices or ()
            for carrier in (choice.delta or choice.message,)
            if carrier is not None
            for delta in carrier.tool_calls or ()
        ]

    def error_text(self) -> str | None:
        """The ``error`` the server put in this chunk, as its JSON text; ``None`` if none."""
        raw = bytes(self.error)
        return None if raw in (b"", b"null") else raw.decode("utf-8", "replace")

    def finish_reason(self) -> FinishReason | None:
        """Why a choice says the answer ended (the first ``finish_reason`` set: one choice is
        asked for); ``None`` while the answer goes on."""
        for choice in self.choices or ():
            reason = finish_reason_of(choice.finish_reason)
            if reason is not None:
                return reason
        return None

    def token_usage(self) -> TokenUsage | None:
        """The usage the server reported, when it gave both counts as counts."""
        usage = self.usage
        if not isinstance(usage, dict):
            return None
        prompt, completion = (
            _count(usage.get("prompt_tokens")),
            _count(usage.get("completion_tokens")),
        )
        if prompt is None or completion is None:
            return None
        details = usage.get("prompt_tokens_details")
        cached = _count(details.get("cached_tokens")) if isinstance(details, dict) else None
        if cached is not None and cached > prompt:  # not a count of these prompt tokens
            cached = None
        return TokenUsage(
            prompt_tokens=prompt, completion_tokens=completion, cached_prompt_tokens=cached
        )


_CHUNK = msgspec.json.Decoder(ChatChunk)
_ENCODER = msgspec.json.Encoder()


def decode_chunk(data: bytes) -> ChatChunk:
    """Decode one event's data, or a whole (non-streamed) completion as some servers answer
    (the same shape: ``message`` instead of ``delta``); raises ``msgspec.DecodeError``
    (``ValidationError`` too)."""
    return _CHUNK.decode(data)


# How a call asks for the contract's shape: OpenAI's json_schema form, llama-cpp-python's
# json_object with a schema beside it, or no response_format at all.
ResponseFormat = Literal["json_schema", "json_object", "none"]
_FALLBACKS: dict[StructuredOutput, tuple[ResponseFormat, ...]] = {
    "json_schema": ("json_schema", "json_object", "none"),
    "json_object": ("json_object", "none"),
    "off": ("none",),
}


def forms_to_try(setting: StructuredOutput) -> tuple[ResponseFormat, ...]:
    """The forms to send, in order, for ``model.structured_output``: each is tried when the
    server refused the one before it (an error reply that names ``response_format``)."""
    return _FALLBACKS[setting]


def response_format(form: ResponseFormat, name: str, schema: JsonObject) -> JsonObject:
    """The ``response_format`` of ``form`` for ``schema`` (``{}`` for none). ``strict`` is
    false: OpenAI's strict mode takes no optional field and no open object (``proposals``),
    and the grammar-based servers (llama.cpp, vLLM) hold the model to the schema either way."""
    if form == "json_schema":
        return {
            "type": "json_schema",
            "json_schema": {"name": name, "strict": False, "schema": schema},
        }
    if form == "json_object":
        return {"type": "json_object", "schema": schema}
    return {}


def request_fields(config: OpenAIConfig, format_: JsonObject) -> JsonObject:
    """What a call's body holds beside the model, the stream and the messages: the role's
    settings that are set, ``response_format`` when there is one, then ``extra_body`` over
    them (a server's own knobs; the config refuses the keys the runtime writes itself)."""
    fields: JsonObject = {}
    if config.reasoning_effort:
        fields["reasoning_effort"] = config.reasoning_effort
    if config.temperature is not None:
        fields["temperature"] = config.temperature
    if config.max_tokens is not None:
        fields["max_tokens"] = config.max_tokens
    if format_:
        fields["response_format"] = format_
    return fields | config.extra_body


def request_head(model: str, fields: JsonObject | None = None, system: str = "") -> bytes:
    """The body up to the opening quote of the user message's content: streamed, with usage,
    ``fields`` (``request_fields``) and the ``system`` message, if any, before the prompt.

    The prompt follows as ``json_string_fragment``s and ``REQUEST_TAIL`` ends the body, so the
    prompt is sent as it is rendered, never held whole (the messages come last for that).
    """
    body = {"model": model, "stream": True, "stream_options": {"include_usage": True}}
    head = _ENCODER.encode(body | (fields or {}))[:-1] + b',"messages":['
    if system:
        head += _ENCODER.encode({"role": "system", "content": system}) + b","
    return head + b'{"role":"user","content":"'


# What servers say when a prompt does not fit: llama.cpp ("exceeds the available context
# size", exceed_context_size_error), OpenAI and llama-cpp-python ("maximum context length",
# context_length_exceeded), vLLM ("maximum context length"), Ollama and others ("context
# window", "n_ctx").
_CONTEXT_LIMIT = re.compile(
    r"context[ _](?:length|size|window)|n_ctx|exceed_context|maximum context|too many tokens",
    re.IGNORECASE,
)


def names_context_limit(said: str) -> bool:
    """Whether an error reply's text says the prompt does not fit the model's context."""
    return _CONTEXT_LIMIT.search(said) is not None


def names_response_format(said: str) -> bool:
    """Whether an error reply's text is about the request's ``response_format`` (a server
    that does not take the form sent: llama-cpp-python answers 500 naming
    ``response_format.type``)."""
    return "response_format" in said


def json_string_fragment(text: str) -> bytes:
    """``text`` escaped for the inside of a JSON string (escaping is per character, so the
    fragments of a text joined are the escaped text)."""
    return _ENCODER.encode(text)[1:-1]


def event_line_limit(max_output_bytes: int) -> int:
    """The longest line (and event) of an answer's stream that an answer within
    ``max_output_bytes`` can need: its text JSON-escaped (at most 6 bytes a byte, as
    ``\\u0001``) beside the chunk's other fields. A longer one is not worth reading."""
    return 6 * max_output_bytes + 64 * 1024


class EventTooLong(ValueError):
    """A line of the event stream, or the data of one event, is longer than the limit."""


_BOM = b"\xef\xbb\xbf"  # U+FEFF in UTF-8
_LINE_END = re.compile(rb"\r\n|\r|\n")


class EventStreamDecoder:
    """Split a ``text/event-stream`` body into the data of its events, by the WHATWG rules:
    lines end with CRLF, LF or CR; a leading U+FEFF is ignored; ``data:`` lines are joined by
    newlines; a blank line ends the event; comments and other fields are ignored.

    ``max_line_bytes`` bounds what is held: the line being received plus the data of the event
    so far (``EventTooLong`` past it). Only new bytes are scanned, so feeding a long line in
    small pieces costs what the line costs.
    """

    def __init__(self, max_line_bytes: int | None = None) -> None:
        self._limit = max_line_bytes
        self._line = bytearray()  # the line being received
        self._data: list[bytes] = []  # the data lines of the event being received
        self._data_bytes = 0
        self._head = b""  # the stream's first bytes, while they may still be a BOM
        self._started = False
        self._after_cr = False  # the last line ended with a CR: an LF next is part of its end

    def feed(self, chunk: bytes) -> list[bytes]:
        """Take the next bytes of the body; return the data of every event they complete.
        Raises ``EventTooLong``."""
        if not self._started:
            chunk = self._head + chunk
            if len(chunk) < len(_BOM) and _BOM.startswith(chunk):
                self._head = chunk
                return []
            self._started, self._head = True, b""
            chunk = chunk.removeprefix(_BOM)
        if not chunk:
            return []
        events: list[bytes] = []
        start = 1 if self._after_cr and chunk.startswith(b"\n") else 0
        for end in _LINE_END.finditer(chunk, start):
            self._line += chunk[start : end.start()]
            self._check()
            self._take(bytes(self._line), events)
            self._line.clear()
            start = end.end()
        self._line += chunk[start:]
        self._check()
        self._after_cr = chunk.endswith(b"\r")
        return events

    def close(self) -> list[bytes]:
        """The body ended: an event without its closing blank line still counts (lenient: some
        servers end the stream right after ``[DONE]``'s line)."""
        return self.feed(b"\n\n") if self._line or self._data or self._head else []

    def _check(self) -> None:
        if self._limit is not None and len(self._line) + self._data_bytes > self._limit:
            raise EventTooLong(self._limit)

    def _take(self, line: bytes, events: list[bytes]) -> None:
        if not line:  # the end of an event
            if self._data:
                events.append(b"\n".join(self._data))
            self._data, self._data_bytes = [], 0
            return
        field, _, value = line.partition(b":")  # a line without a colon: an empty value
        if field == b"data":
            value = value.removeprefix(b" ")
            self._data.append(value)
            self._data_bytes += len(value) + 1


def retry_after_seconds(value: str | None, now: datetime) -> float | None:
    """The wait a ``Retry-After`` header asks for (seconds, or an HTTP date); ``None`` when
    there is none or it cannot be read."""
    if value is None:
        return None
    value = value.strip()
    if value.isascii() and value.isdigit():  # "²".isdigit(), and float() refuses it
        return float(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        return None
    return max((when - now).total_seconds(), 0.0)
