"""``find_tokenizer``: a model server's own token count of a text, where it has an endpoint
for it (llama.cpp's and vLLM's ``/tokenize``, llama-cpp-python's ``/extras/tokenize/count``
and ``/extras/tokenize``), as a ``ServerTokenizer``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import anyio

from teams_runtime.actors.models.windows._server_json import (
    MOST_SECONDS,
    Aside,
    ask_json,
    no_pace,
    positive_int,
    server_client,
    server_root,
)
from teams_runtime.codecs.config import OpenAIConfig
from teams_runtime.codecs.formats import JsonObject
from teams_runtime.exceptions import TeamsRuntimeError

__all__ = ["ServerTokenizer", "TokenizerGone", "find_tokenizer"]


class TokenizerGone(TeamsRuntimeError):
    """The server's tokenizer gave no count this time (down, slow, or it answered otherwise):
    count another way."""


def _count_of(answer: object) -> int | None:
    """The count an answer gives: ``count`` (vLLM, llama-cpp-python's count endpoint), else the
    length of ``tokens`` (llama.cpp, llama-cpp-python's tokenize endpoint)."""
    if not isinstance(answer, dict):
        return None
    count = answer.get("count")
    if isinstance(count, int) and not isinstance(count, bool) and count >= 0:
        return count
    tokens = answer.get("tokens")
    return len(tokens) if isinstance(tokens, list) and "count" not in answer else None


@dataclass(frozen=True, kw_only=True)
class _Endpoint:
    """One server kind's tokenize endpoint: its path under the server's root, its request body
    for a text, and its name in ``source``."""

    path: str
    body: Callable[[str, str], JsonObject]  # (model, text) -> the request's body
    source: str


# In the order they are tried. Special tokens are not added where the request can say so
# (llama.cpp's default; vLLM's `add_special_tokens`): a part's count is the text's alone.
_ENDPOINTS = (
    _Endpoint(
        path="/tokenize",
        body=lambda model, text: {"content": text},
        source="llama.cpp /tokenize",
    ),
    _Endpoint(
        path="/tokenize",
        body=lambda model, text: {"model": model, "prompt": text, "add_special_tokens": False},
        source="vLLM /tokenize",
    ),
    _Endpoint(
        path="/extras/tokenize/count",
        body=lambda model, text: {"model": model, "input": text},
        source="llama-cpp-python /extras/tokenize/count",
    ),
    _Endpoint(
        path="/extras/tokenize",
        body=lambda model, text: {"model": model, "input": text},
        source="llama-cpp-python /extras/tokenize",
    ),
)


@dataclass(frozen=True, kw_only=True)
class ServerTokenizer:
    """A server's own count of a text's tokens, as its model reads them. ``source`` names the
    endpoint. ``offset`` is what it counts for an empty text (llama-cpp-python adds a BOS
    token to every text it counts): taken off every count, so a count is the text's alone."""

    settings: OpenAIConfig
    endpoint: _Endpoint
    offset: int
    # What each count runs inside (``ServerFacts``: a request beside the worker's calls).
    aside: Aside = field(default=no_pace, compare=False)

    @property
    def source(self) -> str:
        """The endpoint counted with (``llama.cpp /tokenize``, ...)."""
        return self.endpoint.source

    async def count(self, text: str) -> int:
        """The tokens of ``text`` by the server's count; waits at most ``timeout_seconds``,
        as the call it counts for would: a server busy with another call may count only after
        it (llama-cpp-python's does), and the prompt would wait for it all the same. Raises
        ``TokenizerGone`` when the server gives none."""
        async with self.aside():
            counted = await _ask(self.settings, self.endpoint, text, self.settings.timeout_seconds)
        if counted is None:
            raise TokenizerGone(f"{self.source} at {self.settings.base_url} gave no count")
        return max(counted - self.offset, 0)


async def _ask(
    settings: OpenAIConfig, endpoint: _Endpoint, text: str, seconds: float | None = None
) -> int | None:
    """The endpoint's count of ``text``, waiting at most ``seconds`` (by default
    ``timeout_seconds``, never over ``MOST_SECONDS``: a look-up, not a count for a call)."""
    seconds = min(settings.timeout_seconds, MOST_SECONDS) if seconds is None else seconds
    url = server_root(settings) + endpoint.path
    with anyio.move_on_after(seconds):
        async with server_client(settings, seconds) as client:
            return _count_of(await ask_json(client, url, endpoint.body(settings.model, text)))
    return None


async def find_tokenizer(settings: OpenAIConfig) -> ServerTokenizer | None:
    """The tokenizer of ``settings``' server for ``settings.model``, or ``None`` when it has
    none this side can use (Ollama, LM Studio, a hosted API) or gives no answer.

    Each known endpoint is asked to count a short text, in turn, until one answers with a
    count; then the empty text, for the ``offset``. Waits at most ``timeout_seconds`` in all
    (never over ``MOST_SECONDS``). Never raises for what the server does. The caller keeps the
    answer for the run (``ServerFacts``): it does not change while the server runs."""
    with anyio.move_on_after(min(settings.timeout_seconds, MOST_SECONDS)):
        for endpoint in _ENDPOINTS:
            probe = await _ask(settings, endpoint, "Hello")
            if probe is None:
                continue
            offset = await _ask(settings, endpoint, "")
            if offset is None or positive_int(probe) is None or offset > probe:
                continue
            return ServerTokenizer(settings=settings, endpoint=endpoint, offset=offset)
    return None
