"""The ``openai`` model backend: any OpenAI-compatible chat-completions server (OpenAI, Ollama,
vLLM, llama.cpp's server, LM Studio), over httpx.

One call is one ``POST {base_url}/chat/completions``: the prompt goes as the user message,
streamed from the prompt's chunks (chunked transfer encoding: the prompt is never held whole),
and the answer is read as a server-sent-event stream, with the token usage the server reports.
A 429 or 5xx answer is tried again (``max_retries`` times, waiting as ``Retry-After`` says or
with exponential backoff); anything else that goes wrong fails the call with a content-free
``ModelFailure``, as a failed model command does, and the role's ``model.attempts`` decide
what comes next.

The key is read from the variable ``api_key_env`` names at each call and sent only in the
``Authorization`` header. Every text the server sends back (the answer, what came before a
failure, error bodies, errors in the stream) is scrubbed of it before it leaves the call as a
``ModelReply`` or ``ModelFailure``. No message, log line or config output holds it, nor
anything else the server said beyond its status code: reasons are content-free.
"""

from __future__ import annotations

import os
import random
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import anyio
import httpx
import msgspec
from loguru import logger

from teams_runtime.codecs.api_keys import KeyScrubber, header_safe
from teams_runtime.codecs.config import OpenAIConfig
from teams_runtime.codecs.model_replies import ModelReply, TokenUsage
from teams_runtime.codecs.openai_wire import (
    DONE,
    REQUEST_TAIL,
    EventStreamDecoder,
    EventTooLong,
    decode_chunk,
    event_line_limit,
    json_string_fragment,
    request_head,
    retry_after_seconds,
)
from teams_runtime.exceptions import ConfigError, ModelFailure
from teams_runtime.policy.prompts import PromptBundle

__all__ = ["BACKOFF_FIRST_SECONDS", "BACKOFF_MAX_SECONDS", "KEPT_CHARS", "OpenAIBackend"]

# The wait before the first retry without Retry-After; it doubles each time, up to the max.
BACKOFF_FIRST_SECONDS = 1.0
BACKOFF_MAX_SECONDS = 30.0
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


class _Retry(Exception):
    """A 429 or 5xx answer: worth another request after ``wait`` seconds (``None``: backoff);
    ``said`` is its body, scrubbed."""

    def __init__(self, status: int, wait: float | None, said: str) -> None:
        super().__init__(status)
        self.status = status
        self.wait = wait
        self.said = said


class _Answer:
    """What the server has said in answer to one request so far. Its text is scrubbed of the
    key whenever it leaves (as the reply, or as a failure's output), never held scrubbed
    piece by piece: a key may come split over several events."""

    def __init__(self, limit: int, scrubber: KeyScrubber) -> None:
        self.limit = limit
        self.scrubber = scrubber
        self.parts: list[str] = []
        self.size = 0
        self.usage: TokenUsage | None = None
        self.finished = False  # a finish_reason or [DONE] came

    def add(self, text: str) -> None:
        """Keep ``text``; raises ``ModelFailure`` past ``max_output_bytes``."""
        if not text:
            return
        self.parts.append(text)
        self.size += len(text.encode("utf-8"))
        if self.size > self.limit:
            raise self.failure(
                f"the model answered more than {self.limit} bytes (max_output_bytes)"
            )

    def reply(self) -> ModelReply:
        """The whole answer, scrubbed; raises ``ModelFailure`` if it is empty."""
        text = self.scrubber.scrub("".join(self.parts))
        if not text.strip():
            raise self.failure("the model answered nothing")
        return ModelReply(text=text, usage=self.usage)

    def failure(self, reason: str, said: str = "", *, said_more: bool = False) -> ModelFailure:
        """A failed call: ``reason``, with the answer so far for the attempts folder (scrubbed:
        it may have stopped inside the key) and ``said``, what else the server sent (an error,
        an event that cannot be read: scrubbed, ``KEPT_CHARS`` of it kept; ``said_more``: it is
        only the start of what the server sent)."""
        kept = [
            self.scrubber.scrub("".join(self.parts), more=True),
            self.scrubber.scrub(said, limit=KEPT_CHARS, more=said_more),
        ]
        return ModelFailure(reason, output="\n".join(part for part in kept if part))


class OpenAIBackend:
    """Send each prompt to an OpenAI-compatible chat-completions endpoint."""

    name = "openai"

    def __init__(self, config: OpenAIConfig, *, max_output_bytes: int = 1_048_576) -> None:
        """Raises ``ConfigError`` if the key's variable is not set or cannot be a key: better no
        run at all than every queued request failed for want of it."""
        self._config = config
        self._url = config.base_url.rstrip("/") + "/chat/completions"
        self._max_output_bytes = max_output_bytes
        _, problem = self._key()
        if problem:
            raise ConfigError(f"{problem}, then start again.")

    def _key(self) -> tuple[str, str]:
        """The key, read now (never kept: only the environment holds it; "" for none), and
        what is wrong with it ("" if nothing). The problem names the variable, never its
        value."""
        name = self._config.api_key_env
        if not name:
            return "", ""
        key = os.environ.get(name, "")
        variable = f"the environment variable {name} (model.openai.api_key_env)"
        if not key:
            return "", f"{variable} is not set; export the model server's key in it"
        if not header_safe(key):
            return "", (
                f"{variable} holds a space, a line break or a character that is not ASCII, "
                "which no API key has; export only the key in it"
            )
        return key, ""

    async def complete(self, bundle: PromptBundle) -> ModelReply:
        """Ask the server once, plus up to ``max_retries`` more requests after a 429 or 5xx.
        Each request may take ``timeout_seconds`` (connecting, sending the prompt and reading
        the whole answer). Raises ``ModelFailure``, for whatever goes wrong in the call;
        cancellation closes the connection."""
        key, problem = self._key()
        if problem:  # unset or changed since the run started: nothing is sent
            raise ModelFailure(problem)
        unexpected = ""
        try:
            return await self._complete(bundle, key)
        except ModelFailure:
            raise
        except Exception as exc:  # a bug, ours or a library's: it fails this call, not the run
            unexpected = type(exc).__name__
        # Raised outside the handler, so the error (whose text may quote the server, or the
        # key) is not even its context: the type alone is content-free.
        raise ModelFailure(f"the call to the model server failed unexpectedly ({unexpected})")

    async def _complete(self, bundle: PromptBundle, key: str) -> ModelReply:
        config = self._config
        scrubber = KeyScrubber(key)
        headers = {"Accept": "text/event-stream", "Content-Type": "application/json"}
        if key:
            headers["Authorization"] = f"Bearer {key}"
        log = logger.bind(role=bundle.role, request_id=bundle.request_id, purpose=bundle.purpose)
        # A client per call: calls take seconds to minutes, so a kept connection saves little,
        # and nothing is left open when a run stops.
        async with httpx.AsyncClient(timeout=config.timeout_seconds) as client:
            for retry in range(config.max_retries + 1):
                try:
                    return await self._request(client, bundle, headers, scrubber)
                except _Retry as answer:
                    wait = self._wait(answer, retry)
                    log.warning(
                        "model server answered {} for {} on request {}; retry {} of {} in {:.1f} s",
                        answer.status,
                        bundle.role,
                        bundle.request_id,
                        retry + 1,
                        config.max_retries,
                        wait,
                    )
                    await anyio.sleep(wait)
        raise AssertionError("unreachable")

    def _wait(self, answer: _Retry, retry: int) -> float:
        """How long to wait before retry number ``retry + 1``; raises ``ModelFailure`` when
        no retry is left or the server asks for a longer wait than ``timeout_seconds``."""
        config = self._config
        said = _answered(answer.status)
        if retry == config.max_retries:
            tries = config.max_retries + 1
            raise ModelFailure(
                f"{said} to {tries} request{'s' if tries != 1 else ''} "
                f"(max_retries {config.max_retries})",
                output=answer.said,
            )
        if answer.wait is not None:
            if answer.wait > config.timeout_seconds:
                raise ModelFailure(
                    f"{said} and asked to retry after {answer.wait:g} s, longer than "
                    f"model.openai.timeout_seconds ({config.timeout_seconds:g} s)",
                    output=answer.said,
                )
            return answer.wait
        backoff = min(BACKOFF_FIRST_SECONDS * 2.0**retry, BACKOFF_MAX_SECONDS)
        return backoff * random.uniform(0.5, 1.0)  # jitter: clients that failed together spread

    async def _request(
        self,
        client: httpx.AsyncClient,
        bundle: PromptBundle,
        headers: dict[str, str],
        scrubber: KeyScrubber,
    ) -> ModelReply:
        """One request and its whole answer, within ``timeout_seconds``."""
        timeout = self._config.timeout_seconds
        answer = _Answer(self._max_output_bytes, scrubber)
        try:
            with anyio.fail_after(timeout):
                async with client.stream(
                    "POST", self._url, content=self._body(bundle), headers=headers
                ) as response:
                    await self._read(response, answer)
        except (TimeoutError, httpx.TimeoutException):
            raise answer.failure(f"no answer within {timeout:g} s (timeout_seconds)") from None
        except httpx.ConnectError as exc:
            raise answer.failure(
                f"cannot connect to the model server at {self._config.base_url} ({exc})"
            ) from None
        except httpx.TransportError as exc:  # the connection dropped, the server broke HTTP
            raise answer.failure(
                f"the connection to the model server broke ({type(exc).__name__}) after "
                f"{answer.size} bytes of answer"
            ) from None
        return answer.reply()

    async def _body(self, bundle: PromptBundle) -> AsyncIterator[bytes]:
        yield request_head(self._config.model)
        async for chunk in bundle.chunks():
            yield json_string_fragment(chunk)
        yield REQUEST_TAIL

    async def _read(self, response: httpx.Response, answer: _Answer) -> None:
        """Read a 2xx answer into ``answer``; raise ``_Retry`` for a 429 or 5xx, and
        ``ModelFailure`` for any other status or an answer that is not a chat completion."""
        status = response.status_code
        if status == 429 or status >= 500:
            wait = retry_after_seconds(response.headers.get("retry-after"), datetime.now(UTC))
            said, more = await _start_of_body(response)
            raise _Retry(status, wait, answer.scrubber.scrub(said, limit=KEPT_CHARS, more=more))
        if not 200 <= status < 300:
            said, more = await _start_of_body(response)
            reason = _answered(status) + _hint(status, self._config)
            raise answer.failure(reason, said, said_more=more)
        content_type = response.headers.get("content-type", "").partition(";")[0].strip()
        media_type = content_type.lower()
        if media_type == "application/json":  # a server that does not stream
            await self._read_whole(response, answer)
        elif media_type in ("text/event-stream", ""):
            await self._read_stream(response, answer)
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

    async def _read_whole(self, response: httpx.Response, answer: _Answer) -> None:
        # The answer text inside JSON (escaped, beside the other fields) may take more bytes
        # than the text itself; past this the answer cannot be within max_output_bytes.
        body, more = await _read_up_to(response, event_line_limit(self._max_output_bytes))
        if more:
            raise answer.failure(
                f"the model answered more than {self._max_output_bytes} bytes (max_output_bytes)"
            )
        try:
            completion = decode_chunk(body)  # a whole completion has a chunk's shape
        except msgspec.DecodeError:  # ValidationError included
            raise answer.failure(
                f"the model server's answer is not a chat completion ({len(body)} bytes)",
                body.decode("utf-8", "replace"),
            ) from None
        answer.add(completion.text())
        answer.usage = completion.token_usage()
        answer.finished = True

    async def _read_stream(self, response: httpx.Response, answer: _Answer) -> None:
        limit = event_line_limit(self._max_output_bytes)
        events = EventStreamDecoder(max_line_bytes=limit)
        try:
            async for chunk in response.aiter_bytes():
                for data in events.feed(chunk):
                    if _event(data, answer):
                        return
            for data in events.close():
                if _event(data, answer):
                    return
        except EventTooLong:
            raise answer.failure(
                f"the model server sent an event stream line longer than {limit} bytes (more "
                "than an answer within max_output_bytes needs)"
            ) from None
        if not answer.finished:
            raise answer.failure(
                f"the model server's stream ended before the answer was complete "
                f"(no [DONE], no finish_reason; {answer.size} bytes of answer)"
            )


def _event(data: bytes, answer: _Answer) -> bool:
    """Take one event of the stream; whether it was the last (``[DONE]``)."""
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
    answer.add(chunk.text())
    answer.usage = chunk.token_usage() or answer.usage
    answer.finished = answer.finished or chunk.finished()
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


def _answered(status: int) -> str:
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
