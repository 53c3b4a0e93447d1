"""``ServerFacts``: what a run has learned of its model servers (each one's window and
tokenizer for a model), asked once and kept for the run."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import anyio

from teams_runtime.actors.models.windows._server_json import Aside, no_pace
from teams_runtime.actors.models.windows._tokenizer import ServerTokenizer, find_tokenizer
from teams_runtime.actors.models.windows._window import probe_window
from teams_runtime.actors.models.windows._window_readings import ServerWindow
from teams_runtime.codecs.config import OpenAIConfig

__all__ = ["ASK_AGAIN_SECONDS", "ServerFacts"]

# A server that said nothing (down while the run started, still loading its model) is asked
# again after this long, not on every prompt: a stalled one would hold each for a timeout.
ASK_AGAIN_SECONDS = 60.0

_Key = tuple[str, str, int | None, str]


def _key(settings: OpenAIConfig) -> _Key:
    # What the answers depend on: the server, the model, the config's window, the key.
    return (settings.base_url.rstrip("/"), settings.model, settings.context_tokens,
            settings.api_key_env)  # fmt: skip


class ServerFacts:
    """Each server's window (``probe_window``) and tokenizer (``find_tokenizer``) for a model,
    asked on first use and kept: one per run, owned by whoever runs the roles (no process-wide
    cache). Concurrent first uses ask the server once. An unknown window or no tokenizer is
    asked again after ``ASK_AGAIN_SECONDS``. ``aside`` gives, for a ``base_url``, what each
    request to that server runs inside (a worker's: its pace there, ``ModelServers``)."""

    def __init__(self, aside: Callable[[str], Aside] | None = None) -> None:
        self._aside = aside
        self._windows: dict[_Key, tuple[ServerWindow, float]] = {}
        self._tokenizers: dict[_Key, tuple[ServerTokenizer | None, float]] = {}
        self._locks: dict[_Key, anyio.Lock] = {}

    def _lock(self, key: _Key) -> anyio.Lock:
        return self._locks.setdefault(key, anyio.Lock())

    def _beside(self, settings: OpenAIConfig) -> Aside:
        return no_pace if self._aside is None else self._aside(settings.base_url)

    async def window(self, settings: OpenAIConfig) -> ServerWindow:
        """``settings``' server's window for its model: kept, or asked (``probe_window``)."""
        key = _key(settings)
        async with self._lock(key):
            kept = self._windows.get(key)
            if kept is not None and (kept[0].context_tokens is not None or _fresh(kept[1])):
                return kept[0]
            async with self._beside(settings)():
                window = await probe_window(settings)
            self._windows[key] = (window, anyio.current_time())
            return window

    async def tokenizer(self, settings: OpenAIConfig) -> ServerTokenizer | None:
        """``settings``' server's tokenizer for its model: kept, or looked for
        (``find_tokenizer``)."""
        key = _key(settings)
        async with self._lock(key):
            kept = self._tokenizers.get(key)
            if kept is not None and (kept[0] is not None or _fresh(kept[1])):
                return kept[0]
            async with self._beside(settings)():
                tokenizer = await find_tokenizer(settings)
            if tokenizer is not None:  # its counts too: each a request beside the calls
                tokenizer = dataclasses.replace(tokenizer, aside=self._beside(settings))
            self._tokenizers[key] = (tokenizer, anyio.current_time())
            return tokenizer

    def forget_tokenizer(self, settings: OpenAIConfig) -> None:
        """Look for ``settings``' tokenizer again at its next use (its count failed: the server
        was restarted, maybe with another model)."""
        self._tokenizers.pop(_key(settings), None)


def _fresh(asked_at: float) -> bool:
    return anyio.current_time() - asked_at < ASK_AGAIN_SECONDS
