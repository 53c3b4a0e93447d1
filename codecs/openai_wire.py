"""The OpenAI-compatible chat-completions wire: the request body, the server-sent-event stream
of the answer and its chunks, and ``Retry-After``. Shapes only: the HTTP calls are
``actors.openai_backend``.

Only the fields the runtime uses are decoded (``choices[].delta.content``, ``finish_reason``,
``usage``, ``error``); servers add many others, which are ignored.
"""

from __future__ import annotations

from datetime import datetime
from email.utils import parsedate_to_datetime
from typing import Annotated

import msgspec

from teams_runtime.codecs.model_replies import TokenUsage

__all__ = [
    "DONE",
    "REQUEST_TAIL",
    "ChatChunk",
    "EventStreamDecoder",
    "decode_chunk",
    "decode_completion",
    "json_string_fragment",
    "request_head",
    "retry_after_seconds",
]

DONE = b"[DONE]"  # the data of the stream's last event
REQUEST_TAIL = b'"}]}'  # closes the user message, the messages list and the body

_Count = Annotated[int, msgspec.Meta(ge=0, le=2**53)]


class _Usage(msgspec.Struct, frozen=True):
    prompt_tokens: _Count | None = None
    completion_tokens: _Count | None = None


class _Text(msgspec.Struct, frozen=True):
    content: str | None = None


class _Choice(msgspec.Struct, frozen=True):
    delta: _Text | None = None  # a stream chunk
    message: _Text | None = None  # a whole completion (a server that ignored `stream`)
    finish_reason: str | None = None


class ChatChunk(msgspec.Struct, frozen=True):
    """One event of the answer's stream (or a whole completion), reduced to what is used."""

    choices: list[_Choice] = []
    usage: _Usage | None = None
    # Some servers report a failure inside the stream. (A Raw cannot sit in a union with
    # None: empty when absent, the bytes `null` when null.)
    error: msgspec.Raw = msgspec.Raw()

    def text(self) -> str:
        """The answer text this chunk carries."""
        parts = []
        for choice in self.choices:
            carrier = choice.delta or choice.message
            if carrier is not None and carrier.content:
                parts.append(carrier.content)
        return "".join(parts)

    def error_text(self) -> str | None:
        """The ``error`` the server put in this chunk, as its JSON text; ``None`` if none."""
        raw = bytes(self.error)
        return None if raw in (b"", b"null") else raw.decode("utf-8", "replace")

    def finished(self) -> bool:
        """Whether a choice says the answer is complete (``finish_reason`` set)."""
        return any(choice.finish_reason for choice in self.choices)

    def token_usage(self) -> TokenUsage | None:
        """The usage the server reported, when it gave both counts."""
        usage = self.usage
        if usage is None or usage.prompt_tokens is None or usage.completion_tokens is None:
            return None
        return TokenUsage(
            prompt_tokens=usage.prompt_tokens, completion_tokens=usage.completion_tokens
        )


_CHUNK = msgspec.json.Decoder(ChatChunk)
_ENCODER = msgspec.json.Encoder()


def decode_chunk(data: bytes) -> ChatChunk:
    """Decode one event's data; raises ``msgspec.DecodeError`` (``ValidationError`` too)."""
    return _CHUNK.decode(data)


def decode_completion(body: bytes) -> ChatChunk:
    """Decode a whole (non-streamed) completion, as some servers answer; raises like
    ``decode_chunk``."""
    return _CHUNK.decode(body)


def request_head(model: str) -> bytes:
    """The body up to the opening quote of the user message's content: streamed, with usage.

    The prompt follows as ``json_string_fragment``s and ``REQUEST_TAIL`` ends the body, so the
    prompt is sent as it is rendered, never held whole.
    """
    return (
        b'{"model":'
        + _ENCODER.encode(model)
        + b',"stream":true,"stream_options":{"include_usage":true},'
        + b'"messages":[{"role":"user","content":"'
    )


def json_string_fragment(text: str) -> bytes:
    """``text`` escaped for the inside of a JSON string (escaping is per character, so the
    fragments of a text joined are the escaped text)."""
    return _ENCODER.encode(text)[1:-1]


class EventStreamDecoder:
    """Split a ``text/event-stream`` body into the data of its events (the WHATWG rules the
    chat-completions stream uses: ``data:`` lines, joined by newlines, ended by a blank line;
    comments and other fields ignored)."""

    def __init__(self) -> None:
        self._pending = b""
        self._data: list[bytes] = []

    def feed(self, chunk: bytes) -> list[bytes]:
        """Take the next bytes of the body; return the data of every event they complete."""
        self._pending += chunk
        *lines, self._pending = self._pending.split(b"\n")
        events = []
        for raw in lines:
            line = raw.removesuffix(b"\r")
            if not line:
                if self._data:
                    events.append(b"\n".join(self._data))
                    self._data = []
                continue
            field, _, value = line.partition(b":")  # a line without a colon: an empty value
            if field == b"data":
                self._data.append(value.removeprefix(b" "))
        return events

    def close(self) -> list[bytes]:
        """The body ended: an event without its closing blank line still counts (lenient: some
        servers end the stream right after ``[DONE]``'s line)."""
        return self.feed(b"\n\n") if self._pending or self._data else []


def retry_after_seconds(value: str | None, now: datetime) -> float | None:
    """The wait a ``Retry-After`` header asks for (seconds, or an HTTP date); ``None`` when
    there is none or it cannot be read."""
    if value is None:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        return None
    return max((when - now).total_seconds(), 0.0)
