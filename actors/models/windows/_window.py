"""``probe_window``: a model server's context window for one model, asked of the server's own
endpoints in turn (llama.cpp, vLLM, LM Studio, Ollama), else ``model.openai.context_tokens``,
else unknown."""

from __future__ import annotations

import anyio
import httpx

from teams_runtime.actors.models.windows._server_json import (
    MOST_SECONDS,
    ask_json,
    server_client,
    server_root,
)
from teams_runtime.actors.models.windows._window_readings import (
    Found,
    ServerWindow,
    llama_props,
    lmstudio_models,
    ollama_ps,
    ollama_show,
    vllm_models,
)
from teams_runtime.codecs.config import OpenAIConfig

__all__ = ["CONFIG_SOURCE", "UNKNOWN_SOURCE", "probe_window"]

CONFIG_SOURCE = "model.openai.context_tokens"
UNKNOWN_SOURCE = "unknown: the server says none (set model.openai.context_tokens)"


async def probe_window(settings: OpenAIConfig) -> ServerWindow:
    """The context window of ``settings``' server for ``settings.model``.

    The server's own figure for the context it runs the model with comes first (llama.cpp's
    ``/props``, vLLM's ``/v1/models``, LM Studio's ``/api/v0/models`` for a loaded model,
    Ollama's ``/api/ps`` or a ``num_ctx`` parameter); then ``model.openai.context_tokens``;
    then what the server says of the model alone (LM Studio's ``max_context_length``,
    Ollama's default context); else ``context_tokens`` is ``None``. Asks at most five small
    requests, one after the other, and waits at most ``timeout_seconds`` in all (never over
    ``MOST_SECONDS``). Never raises for what the server does: a server that is down, slow or
    answers otherwise is a window unknown (``source`` says so)."""
    seconds = min(settings.timeout_seconds, MOST_SECONDS)
    found: Found | None = None
    with anyio.move_on_after(seconds):
        async with server_client(settings, seconds) as client:
            found = await _ask_server(client, settings)
    if found is not None and found.sure:
        return found.window
    if settings.context_tokens is not None:
        return ServerWindow(context_tokens=settings.context_tokens, source=CONFIG_SOURCE)
    if found is not None:
        return found.window
    return ServerWindow(context_tokens=None, source=UNKNOWN_SOURCE)


async def _ask_server(client: httpx.AsyncClient, settings: OpenAIConfig) -> Found | None:
    """The first window the server's endpoints give, in the order ``probe_window`` says; one
    that is not ``sure`` is kept while the rest are asked (Ollama's may be better)."""
    root, model = server_root(settings), settings.model
    found = llama_props(await ask_json(client, f"{root}/props"))
    if found is not None:
        return found
    found = vllm_models(await ask_json(client, settings.base_url.rstrip("/") + "/models"), model)
    if found is not None:
        return found
    lmstudio = lmstudio_models(await ask_json(client, f"{root}/api/v0/models"), model)
    if lmstudio is not None and lmstudio.sure:
        return lmstudio
    running = await ask_json(client, f"{root}/api/ps")
    if not isinstance(running, dict) or not isinstance(running.get("models"), list):
        return lmstudio  # not Ollama: it lists its running models, even none
    found = ollama_ps(running, model)
    if found is None:
        found = ollama_show(await ask_json(client, f"{root}/api/show", {"model": model}))
    return found or lmstudio
