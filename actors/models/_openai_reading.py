"""Reading one HTTP reply of an OpenAI-compatible server: a 2xx event stream (or a whole
completion) into an ``ServerReply``, and an error reply into what the backend does next.

What an error reply says is read for four things only, and never repeated: whether it
names ``response_format`` (``FormRefused``: the call is sent again with the next form), whether
it says the prompt does not fit the model's context (``ContextExceeded``), its status
(``Retry`` for 429 and 5xx), and whether a 429 limits the call's model only
(``limits_the_model``). Every text kept for the attempts folder is scrubbed of the key.

A stream cut short (no finish_reason) or empty, while the call overlapped others to the same
server, is the server busy with them (``ServerBusy``: sent again, ``actors.models._pace``), not
an answer, nor a prompt too long for the context.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable
from datetime import UTC, datetime

import anyio
import httpx
import msgspec

from teams_runtime.codecs.config import OpenAIConfig
from teams_runtime.codecs.model import (
    DONE,
    EventStreamDecoder,
    EventTooLong,
    FinishReason,
    KeyScrubber,
    ModelReply,
    TokenUsage,
    ToolCallDelta,
    ToolCallParts,
    decode_chunk,
    event_line_limit,
    names_context_limit,
    names_response_format,
    names_tools,
    retry_after_seconds,
)
from teams_runtime.exceptions import ModelFailure

__all__ = [
    "KEPT_CHARS",
    "ContextExceeded",
    "FormRefused",
    "Retry",
    "ServerBusy",
    "ServerReply",
    "answered",
    "limits_the_model",
    "on_a_local_network",
    "read_response",
]

# How much of a server's text that is not an answer (an error body, an HTML page, an event
# that cannot be read) is kept for the attempts folder, in characters.
KEPT_CHARS = 8 * 1024
# How much of such a body is read: room past the cut, so a key across it is still read whole.
_READ_BYTES = 2 * KEPT_CHARS
# The content types a reason may name (the reason is logged, so it holds nothing the server
# chose beyond these fixed names; any other type, which could echo the key in any case, is
# "a content type"). What a proxy or a server of another kind answers with, most often.
_NAMED_MEDIA_TYPES = frozenset(
    {
        "text/html",
        "text/plain",
        "text/xml",
        "application/xml",
        "application/xhtml+xml",
        "application/octet-stream",
        "application/problem+json",
        "application/x-ndjson",
    }
)


# The headers of a server that counts its limits per model: OpenAI's (and Groq's, Together's)
# x-ratelimit-limit-requests, x-ratelimit-remaining-tokens...
_PER_MODEL_HEADERS = "x-ratelimit-"
# Host names of this machine or a private network (beside the IP addresses that are not
# global): a name without a dot (a container's, a LAN host's) is one too.
_LOCAL_SUFFIXES = (".localhost", ".local", ".internal")


class Retry(Exception):
    """A 429 or 5xx reply: worth another request after ``wait`` seconds (``None``: backoff);
    ``said`` is its body, scrubbed; ``for_model``: a 429 that limits the call's model only."""

    def __init__(self, status: int, wait: float | None, said: str, for_model: bool = False) -> None:
        super().__init__(status)
        self.status = status
        self.wait = wait
        self.said = said
        self.for_model = for_model


class FormRefused(Exception):
    """An error reply (any status) that names ``response_format`` (``tools``: the tools, when
    some were offered): the server does not take the form sent."""

    def __init__(self, status: int, tools: bool = False) -> None:
        super().__init__(status)
        self.status = status
        self.tools = tools


class ContextExceeded(Exception):
    """The prompt does not fit the model's context: ``how`` the server said so (content-free),
    ``said`` what it said (scrubbed, for the attempts folder)."""

    def __init__(self, how: str, said: str = "") -> None:
        super().__init__(how)
        self.how = how
        self.said = said


class ServerBusy(Exception):
    """The stream was cut short or empty while other calls to the server ran (``how``:
    content-free): the server was busy with them (llama-cpp-python cuts a running stream when
    another request comes): the call is sent again."""

    def __init__(self, how: str) -> None:
        super().__init__(how)
        self.how = how


def _never_busy() -> bool:
    return False


class ServerReply:
    """What the server has said in answer to one request so far. Its text is scrubbed of the
    key whenever it leaves (as the reply, or as a failure's output), never held scrubbed
    piece by piece: a key may come split over several events."""

    def __init__(self, limit: int, scrubber: KeyScrubber) -> None:
        self.limit = limit
        self.scrubber = scrubber
        self.parts: list[str] = []
        self.size = 0
        self.events = 0  # events of the stream received (an empty stream has none)
        self.usage: TokenUsage | None = None
        self.finished = False  # a finish_reason or [DONE] came
        self.finish_reason: FinishReason | None = None  # the one the server sent, if any
        self.first_token_at: float | None = None  # anyio.current_time() of the first text
        self.calls = ToolCallParts()  # the tool calls it asked for, if any

    def add(self, text: str, calls: list[ToolCallDelta] | None = None) -> None:
        """Keep ``text`` and pieces of tool ``calls``; raises ``ModelFailure`` past
        ``max_output_bytes``."""
        if not text and not calls:
            return
        if self.first_token_at is None:
            self.first_token_at = anyio.current_time()
        self.parts.append(text)
        self.size += len(text.encode("utf-8")) + self.calls.take(calls or [])
        if self.size > self.limit:
            raise self.failure(
                f"the model answered more than {self.limit} bytes (max_output_bytes)"
            )

    def reply(self) -> ModelReply:
        """The whole answer, scrubbed; raises ``ModelFailure`` if it is empty."""
        text = self.scrubber.scrub("".join(self.parts))
        if not text.strip() and not self.calls:
            # What a reasoning model does when its thinking takes every token it may use.
            cut = " before its token limit (finish_reason length)" if self.cut() else ""
            raise self.failure(f"the model answered nothing{cut}")
        return ModelReply(
            text=text,
            usage=self.usage,
            first_token_at=self.first_token_at,
            finish_reason=self.finish_reason,
            tool_calls=self.calls.assembled(),
        )

    def cut(self) -> bool:
        """Whether the server says it stopped the answer at its token limit (``max_tokens``
        or its own)."""
        return self.finish_reason == "length"

    def failure(self, reason: str, said: str = "", *, said_more: bool = False) -> ModelFailure:
        """A failed call: ``reason``, with the answer so far for the attempts folder (scrubbed:
        it may have stopped inside the key) and ``said``, what else the server sent (an error,
        an event that cannot be read: scrubbed, ``KEPT_CHARS`` of it kept; ``said_more``: it is
        only the start of what the server sent)."""
        kept = [
            self.scrubber.scrub("".join(self.parts), more=True),
            self.scrubber.scrub(said, limit=KEPT_CHARS, more=said_more),
        ]
        output = "\n".join(part for part in kept if part)
        return ModelFailure(reason, output=output, finish_reason=self.finish_reason)


async def read_response(
    response: httpx.Response,
    answer: ServerReply,
    *,
    config: OpenAIConfig,
    max_output_bytes: int,
    form_sent: bool,
    busy: Callable[[], bool] = _never_busy,
    tools_sent: bool = False,
) -> None:
    """Read a 2xx answer into ``answer``. Raise ``FormRefused`` for an error reply naming
    ``response_format`` (when one was sent), ``Retry`` for a 429 or 5xx, ``ContextExceeded``
    for a 400 about the context length or an empty stream, and ``ModelFailure`` for any
    other status or an answer that is not a chat completion. ``busy`` says, when a stream
    ends cut short or empty, whether that is the server busy with other calls (``ServerBusy``)."""
    status = response.status_code
    if status == 429 or status >= 400:
        said, more = await _start_of_body(response)
        if (form_sent and names_response_format(said)) or (tools_sent and names_tools(said)):
            raise FormRefused(status, tools=tools_sent and names_tools(said))
        if status == 429 or status >= 500:
            wait = retry_after_seconds(response.headers.get("retry-after"), datetime.now(UTC))
            kept = answer.scrubber.scrub(said, limit=KEPT_CHARS, more=more)
            for_model = status == 429 and limits_the_model(response.headers, said, config)
            raise Retry(status, wait, kept, for_model)
        if status == 400 and names_context_limit(said):
            kept = answer.scrubber.scrub(said, limit=KEPT_CHARS, more=more)
            said_what = answered(status).removeprefix("the model server ")
            raise ContextExceeded(f"it {said_what} about the context length", kept)
        raise answer.failure(answered(status) + _hint(status, config), said, said_more=more)
    if not 200 <= status < 300:  # 1xx and 3xx: nothing a chat-completions server answers
        said, more = await _start_of_body(response)
        raise answer.failure(answered(status), said, said_more=more)
    content_type = response.headers.get("content-type", "").partition(";")[0].strip()
    media_type = content_type.lower()
    if media_type == "application/json":  # a server that does not stream
        await _read_whole(response, answer, max_output_bytes)
    elif media_type in ("text/event-stream", ""):
        await _read_stream(response, answer, max_output_bytes, busy)
    else:  # an HTML page from a proxy, a server that is not a chat-completions one
        said, more = await _start_of_body(response)
        what = (
            f"content type {media_type}"
            if media_type in _NAMED_MEDIA_TYPES
            else "another content type"
        )
        raise answer.failure(
            f"the model server answered with {what} instead of an event stream",
            said,
            said_more=more,
        )


async def _read_whole(response: httpx.Response, answer: ServerReply, max_output_bytes: int) -> None:
    # The reply text inside JSON (escaped, beside the other fields) may take more bytes
    # than the text itself; past this the answer cannot be within max_output_bytes.
    body, more = await _read_up_to(response, event_line_limit(max_output_bytes))
    if more:
        raise answer.failure(
            f"the model answered more than {max_output_bytes} bytes (max_output_bytes)"
        )
    try:
        completion = decode_chunk(body)  # a whole completion has a chunk's shape
    except msgspec.DecodeError:  # ValidationError included
        raise answer.failure(
            f"the model server's answer is not a chat completion ({len(body)} bytes)",
            body.decode("utf-8", "replace"),
        ) from None
    answer.add(completion.text(), completion.tool_calls())
    answer.usage = completion.token_usage()
    answer.finish_reason = completion.finish_reason()
    answer.finished = True


async def _read_stream(
    response: httpx.Response,
    answer: ServerReply,
    max_output_bytes: int,
    busy: Callable[[], bool],
) -> None:
    limit = event_line_limit(max_output_bytes)
    try:
        done = await _read_events(response, answer, limit)
    except EventTooLong:
        raise answer.failure(
            f"the model server sent an event stream line longer than {limit} bytes (more "
            "than an answer within max_output_bytes needs)"
        ) from None
    if answer.finish_reason is None and busy():
        # llama-cpp-python ends a running stream with [DONE] when another request comes.
        how = "it answered with an empty stream" if not answer.events else "its stream was cut"
        raise ServerBusy(f"{how} while other calls to it ran")
    if done:
        return
    if not answer.events:
        # What llama-cpp-python's server answers when the prompt is longer than its context:
        # the stream starts, the model refuses the prompt, the stream ends.
        raise ContextExceeded("it answered with an empty stream right after the prompt was sent")
    if not answer.finished:
        raise answer.failure(
            f"the model server's stream ended before the answer was complete "
            f"(no [DONE], no finish_reason; {answer.size} bytes of answer)"
        )


async def _read_events(response: httpx.Response, answer: ServerReply, limit: int) -> bool:
    """Read the stream's events into ``answer``; whether it ended with ``[DONE]``."""
    events = EventStreamDecoder(max_line_bytes=limit)
    async for chunk in response.aiter_bytes():
        for data in events.feed(chunk):
            if _event(data, answer):
                return True
    return any(_event(data, answer) for data in events.close())


def _event(data: bytes, answer: ServerReply) -> bool:
    """Take one event of the stream; whether it was the last (``[DONE]``)."""
    answer.events += 1
    if data.strip() == DONE:
        answer.finished = True
        return True
    try:
        chunk = decode_chunk(data)
    except msgspec.DecodeError:  # ValidationError included
        raise answer.failure(
            f"the model server sent an event that is not a chat-completion chunk "
            f"({len(data)} bytes)",
            data.decode("utf-8", "replace"),
        ) from None
    error = chunk.error_text()
    if error is not None:
        raise answer.failure("the model server reported an error in the stream", error)
    answer.add(chunk.text(), chunk.tool_calls())
    answer.usage = chunk.token_usage() or answer.usage
    reason = chunk.finish_reason()
    if reason is not None:  # llama.cpp sends it in the last delta, OpenAI in its own chunk
        answer.finish_reason = reason
        answer.finished = True
    return False


async def _read_up_to(response: httpx.Response, size: int) -> tuple[bytes, bool]:
    """The body's first ``size`` bytes, and whether it went on past them (the rest unread)."""
    body = bytearray()
    async for chunk in response.aiter_bytes():
        body += chunk
        if len(body) > size:
            return bytes(body[:size]), True
    return bytes(body), False


async def _start_of_body(response: httpx.Response) -> tuple[str, bool]:
    """The first ``_READ_BYTES`` of an answer that is not one (servers explain themselves
    there), and whether the body went on past them."""
    start, more = await _read_up_to(response, _READ_BYTES)
    return start.decode("utf-8", "replace"), more


def limits_the_model(headers: httpx.Headers, said: str, config: OpenAIConfig) -> bool:
    """Whether a 429 holds back only the model the call asked for, not the server's others:
    its body (``said``) names that model, it carries ``x-ratelimit-*`` headers (per model on
    OpenAI), or the server is a hosted API, whose limits are per model: not on this machine or
    a private network. Otherwise (a local server's 429 that names no model) the whole server
    is away, as for a 502, 503 or 504 (docs/models.md)."""
    if any(name.lower().startswith(_PER_MODEL_HEADERS) for name in headers):
        return True
    return _names_model(said, config.model) or not on_a_local_network(config.base_url)


def _names_model(said: str, model: str) -> bool:
    """Whether ``said`` holds ``model`` as a name of its own ("Rate limit reached for gpt-4o
    in organization ...": not inside gpt-4o-mini; a full stop after it ends a sentence)."""
    name = re.escape(model)
    return re.search(rf"(?<![\w.:/@-]){name}(?![\w:/@-]|\.\w)", said) is not None


def on_a_local_network(base_url: str) -> bool:
    """Whether ``base_url``'s host is this machine or on a private network (a URL that cannot
    be read counts as local: its whole server is away, as before per-model limits)."""
    try:
        host = httpx.URL(base_url).host
    except httpx.InvalidURL:
        return True
    try:
        return not ipaddress.ip_address(host).is_global
    except ValueError:  # a name
        return "." not in host or host == "localhost" or host.endswith(_LOCAL_SUFFIXES)


def answered(status: int) -> str:
    """What the server answered, by its status code and that code's standard phrase: the
    phrase it sent is its own text, which may say anything (the key too) and is not repeated."""
    return f"the model server answered {status} {httpx.codes.get_reason_phrase(status)}".rstrip()


def _hint(status: int, config: OpenAIConfig) -> str:
    if status in (401, 403):
        where = config.api_key_env or "a variable named by model.openai.api_key_env"
        return f"; check the key in {where}"
    if status == 404:
        return "; check model.openai.base_url (it usually ends in /v1) and model.openai.model"
    return ""
