"""The ``openai`` model backend: any OpenAI-compatible chat-completions server (OpenAI, Ollama,
vLLM, llama.cpp's server, LM Studio), over httpx.

One call is one ``POST {base_url}/chat/completions``: the prompt goes as the user message,
streamed from the prompt's chunks (chunked transfer encoding: the prompt is never held whole),
and the answer is read as a server-sent-event stream, with the token usage the server reports.
A 429 or 5xx answer is tried again (``max_retries`` times, waiting as ``Retry-After`` says or
with exponential backoff); anything else that goes wrong fails the call with a content-free
``ModelFailure``, as a failed model command does, and the role's ``model.attempts`` decide
what comes next.

The key is read from the variable ``api_key_env`` names at each call, sent only in the
``Authorization`` header, and scrubbed from whatever server text is kept for the attempts
folder. No message, log line or config output holds it.
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

from teams_runtime.codecs.config import OpenAIConfig
from teams_runtime.codecs.model_replies import ModelReply, TokenUsage
from teams_runtime.codecs.openai_wire import (
    DONE,
    REQUEST_TAIL,
    EventStreamDecoder,
    decode_chunk,
    decode_completion,
    json_string_fragment,
    request_head,
    retry_after_seconds,
)
from teams_runtime.exceptions import ConfigError, ModelFailure
from teams_runtime.prompts import PromptBundle

__all__ = ["BACKOFF_FIRST_SECONDS", "BACKOFF_MAX_SECONDS", "ERROR_BODY_BYTES", "OpenAIBackend"]

# The wait before the first retry without Retry-After; it doubles each time, up to the max.
BACKOFF_FIRST_SECONDS = 1.0
BACKOFF_MAX_SECONDS = 30.0
# How much of an error answer's body is kept for the attempts folder.
ERROR_BODY_BYTES = 8 * 1024
_SCRUBBED = "[api key]"


class _Retry(Exception):
    """A 429 or 5xx answer: worth another request after ``wait`` seconds (``None``: backoff)."""

    def __init__(self, status: int, phrase: str, wait: float | None, body: str) -> None:
        super().__init__(status)
        self.status = status
        self.phrase = phrase
        self.wait = wait
        self.body = body


class _Answer:
    """What the stream has said so far."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.parts: list[str] = []
        self.size = 0
        self.usage: TokenUsage | None = None
        self.finished = False  # a finish_reason or [DONE] came

    def text(self) -> str:
        return "".join(self.parts)

    def add(self, text: str) -> bool:
        """Keep ``text``; whether the answer is still within ``max_output_bytes``."""
        self.parts.append(text)
        self.size += len(text.encode("utf-8"))
        return self.size <= self.limit


class OpenAIBackend:
    """Send each prompt to an OpenAI-compatible chat-completions endpoint."""

    name = "openai"

    def __init__(self, config: OpenAIConfig, *, max_output_bytes: int = 1_048_576) -> None:
        """Raises ``ConfigError`` if the key's variable is not set: better no run at all than
        every queued request failed for want of it."""
        self._config = config
        self._url = config.base_url.rstrip("/") + "/chat/completions"
        self._max_output_bytes = max_output_bytes
        if config.api_key_env and not os.environ.get(config.api_key_env):
            raise ConfigError(f"{self._unset_key()}, then start again.")

    def _unset_key(self) -> str:
        return (
            f"the environment variable {self._config.api_key_env} (model.openai.api_key_env) "
            "is not set; export the model server's key in it"
        )

    def _key(self) -> str:
        """The key, read now (never kept: only the environment holds it); "" for none."""
        name = self._config.api_key_env
        if not name:
            return ""
        key = os.environ.get(name, "")
        if not key:  # unset since the run started
            raise ModelFailure(self._unset_key())
        return key

    async def complete(self, bundle: PromptBundle) -> ModelReply:
        """Ask the server once, plus up to ``max_retries`` more requests after a 429 or 5xx.
        Each request may take ``timeout_seconds`` (connecting, sending the prompt and reading
        the whole answer). Raises ``ModelFailure``; cancellation closes the connection."""
        config = self._config
        key = self._key()
        headers = {"Accept": "text/event-stream", "Content-Type": "application/json"}
        if key:
            headers["Authorization"] = f"Bearer {key}"
        log = logger.bind(role=bundle.role, request_id=bundle.request_id, purpose=bundle.purpose)
        # A client per call: calls take seconds to minutes, so a kept connection saves little,
        # and nothing is left open when a run stops.
        async with httpx.AsyncClient(timeout=config.timeout_seconds) as client:
            for retry in range(config.max_retries + 1):
                try:
                    return await self._request(client, bundle, headers, key)
                except _Retry as answer:
                    wait = self._wait(answer, retry, key)
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

    def _wait(self, answer: _Retry, retry: int, key: str) -> float:
        """How long to wait before retry number ``retry + 1``; raises ``ModelFailure`` when
        no retry is left or the server asks for a longer wait than ``timeout_seconds``."""
        config = self._config
        said = f"the model server answered {answer.status} {answer.phrase}".rstrip()
        output = _scrub(answer.body, key)
        if retry == config.max_retries:
            tries = config.max_retries + 1
            raise ModelFailure(
                f"{said} to {tries} request{'s' if tries != 1 else ''} "
                f"(max_retries {config.max_retries})",
                output=output,
            )
        if answer.wait is not None:
            if answer.wait > config.timeout_seconds:
                raise ModelFailure(
                    f"{said} and asked to retry after {answer.wait:g} s, longer than "
                    f"model.openai.timeout_seconds ({config.timeout_seconds:g} s)",
                    output=output,
                )
            return answer.wait
        backoff = min(BACKOFF_FIRST_SECONDS * 2.0**retry, BACKOFF_MAX_SECONDS)
        return backoff * random.uniform(0.5, 1.0)  # jitter: clients that failed together spread

    async def _request(
        self, client: httpx.AsyncClient, bundle: PromptBundle, headers: dict[str, str], key: str
    ) -> ModelReply:
        """One request and its whole answer, within ``timeout_seconds``."""
        timeout = self._config.timeout_seconds
        answer = _Answer(self._max_output_bytes)
        try:
            with anyio.fail_after(timeout):
                async with client.stream(
                    "POST", self._url, content=self._body(bundle), headers=headers
                ) as response:
                    await self._read(response, answer, key)
        except TimeoutError:
            raise self._failure(
                f"no answer within {timeout:g} s (timeout_seconds)", answer, key
            ) from None
        except httpx.TimeoutException:
            raise self._failure(
                f"no answer within {timeout:g} s (timeout_seconds)", answer, key
            ) from None
        except httpx.ConnectError as exc:
            raise self._failure(
                f"cannot connect to the model server at {self._config.base_url} ({exc})",
                answer,
                key,
            ) from None
        except httpx.TransportError as exc:  # the connection dropped, the server broke HTTP
            raise self._failure(
                f"the connection to the model server broke ({type(exc).__name__}) after "
                f"{answer.size} bytes of answer",
                answer,
                key,
            ) from None
        text = answer.text()
        if not text.strip():
            raise self._failure("the model answered nothing", answer, key)
        return ModelReply(text=text, usage=answer.usage)

    def _failure(self, reason: str, answer: _Answer, key: str) -> ModelFailure:
        return ModelFailure(reason, output=_scrub(answer.text(), key))

    async def _body(self, bundle: PromptBundle) -> AsyncIterator[bytes]:
        yield request_head(self._config.model)
        async for chunk in bundle.chunks():
            yield json_string_fragment(chunk)
        yield REQUEST_TAIL

    async def _read(self, response: httpx.Response, answer: _Answer, key: str) -> None:
        """Read a 2xx answer into ``answer``; raise ``_Retry`` for a 429 or 5xx, and
        ``ModelFailure`` for any other status or an answer that is not a chat completion."""
        status = response.status_code
        if status == 429 or status >= 500:
            wait = retry_after_seconds(response.headers.get("retry-after"), datetime.now(UTC))
            body = await _error_body(response)
            raise _Retry(status, response.reason_phrase, wait, body)
        if not 200 <= status < 300:
            body = await _error_body(response)
            raise ModelFailure(
                f"the model server answered {status} {response.reason_phrase}".rstrip()
                + _hint(status, self._config),
                output=_scrub(body, key),
            )
        content_type = response.headers.get("content-type", "")
        if content_type.startswith("application/json"):  # a server that does not stream
            await self._read_whole(response, answer, key)
        else:
            await self._read_stream(response, answer, key)

    async def _read_whole(self, response: httpx.Response, answer: _Answer, key: str) -> None:
        # The answer text inside JSON (escaped, beside the other fields) may take more bytes
        # than the text itself; past this the answer cannot be within max_output_bytes.
        limit = 2 * self._max_output_bytes + ERROR_BODY_BYTES
        body = bytearray()
        async for chunk in response.aiter_bytes():
            body += chunk
            if len(body) > limit:
                raise self._failure(
                    f"the model answered more than {self._max_output_bytes} bytes "
                    "(max_output_bytes)",
                    answer,
                    key,
                )
        try:
            completion = decode_completion(bytes(body))
        except msgspec.DecodeError:  # ValidationError included
            answer.parts = [bytes(body[:ERROR_BODY_BYTES]).decode("utf-8", "replace")]
            raise self._failure(
                f"the model server's answer is not a chat completion ({len(body)} bytes)",
                answer,
                key,
            ) from None
        self._take(completion.text(), answer, key)
        answer.usage = completion.token_usage()
        answer.finished = True

    async def _read_stream(self, response: httpx.Response, answer: _Answer, key: str) -> None:
        events = EventStreamDecoder()
        async for chunk in response.aiter_bytes():
            for data in events.feed(chunk):
                if self._event(data, answer, key):
                    return
        for data in events.close():
            if self._event(data, answer, key):
                return
        if not answer.finished:
            raise self._failure(
                f"the model server's stream ended before the answer was complete "
                f"(no [DONE], no finish_reason; {answer.size} bytes of answer)",
                answer,
                key,
            )

    def _event(self, data: bytes, answer: _Answer, key: str) -> bool:
        """Take one event of the stream; whether it was the last (``[DONE]``)."""
        if data.strip() == DONE:
            answer.finished = True
            return True
        try:
            chunk = decode_chunk(data)
        except msgspec.DecodeError:  # ValidationError included
            raise self._failure(
                f"the model server sent an event that is not a chat-completion chunk "
                f"({len(data)} bytes)",
                answer,
                key,
            ) from None
        error = chunk.error_text()
        if error is not None:
            answer.parts.append("\n" + error)
            raise self._failure("the model server reported an error in the stream", answer, key)
        self._take(chunk.text(), answer, key)
        answer.usage = chunk.token_usage() or answer.usage
        answer.finished = answer.finished or chunk.finished()
        return False

    def _take(self, text: str, answer: _Answer, key: str) -> None:
        if text and not answer.add(text):
            raise self._failure(
                f"the model answered more than {self._max_output_bytes} bytes (max_output_bytes)",
                answer,
                key,
            )


async def _error_body(response: httpx.Response) -> str:
    """The first ``ERROR_BODY_BYTES`` of an error answer (servers explain themselves there)."""
    body = bytearray()
    async for chunk in response.aiter_bytes():
        body += chunk
        if len(body) >= ERROR_BODY_BYTES:
            break
    return bytes(body[:ERROR_BODY_BYTES]).decode("utf-8", "replace")


def _hint(status: int, config: OpenAIConfig) -> str:
    if status in (401, 403):
        where = config.api_key_env or "a variable named by model.openai.api_key_env"
        return f"; check the key in {where}"
    if status == 404:
        return "; check model.openai.base_url (it usually ends in /v1) and model.openai.model"
    return ""


def _scrub(text: str, key: str) -> str:
    """``text`` without the key in it (a server may quote what it was sent)."""
    return text.replace(key, _SCRUBBED) if key else text
