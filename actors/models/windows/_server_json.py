"""One JSON request to a model server's own endpoints (``/props``, ``/tokenize``, ``/api/show``,
...): where they are, and their answer read as a JSON value, or ``None`` for anything else; and
what such a request runs inside (``Aside``): beside the worker's calls to that server."""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from urllib.parse import urlsplit, urlunsplit

import httpx
import msgspec

from teams_runtime.codecs.config import OpenAIConfig
from teams_runtime.codecs.formats import JsonObject

__all__ = [
    "MOST_SECONDS",
    "Aside",
    "ask_json",
    "no_pace",
    "positive_int",
    "server_client",
    "server_root",
]

# A look-up's requests run inside it: the server's pace in a worker (``actors.models._pace``),
# which counts them as overlapping the calls running there (llama-cpp-python cuts a running
# answer for any request that reads its model).
Aside = Callable[[], AbstractAsyncContextManager[None]]

# At most, per look-up (a window's or a tokenizer's): these are small questions, asked before
# a run needs the answer; a server that takes longer than this is treated as saying nothing.
MOST_SECONDS = 30.0
# The most of an answer read: /props carries the chat template (kilobytes), /v1/models a list.
_MOST_BYTES = 4 * 1024 * 1024


@contextlib.asynccontextmanager
async def no_pace() -> AsyncIterator[None]:
    """The ``Aside`` of a look-up no worker paces (``config --probe``, a check)."""
    yield


def server_root(config: OpenAIConfig) -> str:
    """The server's root URL: ``base_url`` less a last ``/v1`` (``http://host:8080/v1`` ->
    ``http://host:8080``), where llama.cpp's, vLLM's, Ollama's and LM Studio's own endpoints
    are; ``base_url`` as it is when it does not end so."""
    parts = urlsplit(config.base_url.rstrip("/"))
    path = parts.path.removesuffix("/v1")
    return urlunsplit((parts.scheme, parts.netloc, path, "", "")).rstrip("/")


def server_client(config: OpenAIConfig, seconds: float) -> httpx.AsyncClient:
    """A client for one look-up at ``config``'s server: its key (if any) on every request, and
    ``seconds`` for each connect and read."""
    key = os.environ.get(config.api_key_env, "") if config.api_key_env else ""
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return httpx.AsyncClient(timeout=seconds, headers=headers)


async def ask_json(
    client: httpx.AsyncClient, url: str, body: JsonObject | None = None
) -> object | None:
    """The JSON value a 2xx answer to ``GET url`` (``POST`` with ``body``) holds; ``None`` for
    any other status, a body that is not JSON or is over 4 MiB, or no answer (the server is
    down, refuses, or hangs up). Never raises for what the server does."""
    method = "GET" if body is None else "POST"
    try:
        async with client.stream(method, url, json=body) as response:
            if not 200 <= response.status_code < 300:
                return None
            data = bytearray()
            async for piece in response.aiter_bytes():
                data += piece
                if len(data) > _MOST_BYTES:
                    return None
        decoded: object = msgspec.json.decode(data)
        return decoded
    except (httpx.HTTPError, httpx.InvalidURL, msgspec.DecodeError, OSError, ValueError):
        return None


def positive_int(value: object) -> int | None:
    """``value`` when it is a whole number above 0 (never a bool), else ``None``."""
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    return None
