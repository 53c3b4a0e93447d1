"""What each model server's own answer says of its context window: llama.cpp's ``/props``,
vLLM's ``/v1/models``, LM Studio's ``/api/v0/models``, Ollama's ``/api/ps`` and
``/api/show``; each read into a ``ServerWindow``, or ``None`` where the answer is not that
server's or names no window."""

from __future__ import annotations

from typing import NamedTuple

import msgspec

from teams_runtime.actors.models.windows._server_json import positive_int

__all__ = [
    "OLLAMA_DEFAULT_CONTEXT",
    "Found",
    "ServerWindow",
    "llama_props",
    "lmstudio_models",
    "ollama_ps",
    "ollama_show",
    "vllm_models",
]

# The context Ollama runs a model with when nothing sets `num_ctx` (OLLAMA_CONTEXT_LENGTH, a
# Modelfile, the app's slider): 4,096 tokens in current versions, the least their VRAM-based
# defaults give (older ones ran 2,048: there set num_ctx, or model.openai.context_tokens). A
# model's own length (model_info) is what it was trained for, not this.
OLLAMA_DEFAULT_CONTEXT = 4096


class ServerWindow(msgspec.Struct, frozen=True, kw_only=True):
    """A model server's context window for one model: its tokens (prompt and answer together),
    the requests it serves at once, and where the figures came from (``source``: the endpoint
    and field, ``model.openai.context_tokens``, or why it is unknown). ``None``: unknown."""

    context_tokens: int | None
    slots: int | None = None
    source: str


class Found(NamedTuple):
    """A window an answer gave; ``sure``: the window the server runs the model with, not only
    the most the model holds (which the config's ``context_tokens`` overrides)."""

    window: ServerWindow
    sure: bool = True


def _entries(answer: object, key: str) -> list[dict[str, object]]:
    """The objects of the list under ``key`` in ``answer`` (``data``, ``models``)."""
    listed = answer.get(key) if isinstance(answer, dict) else None
    if not isinstance(listed, list):
        return []
    return [entry for entry in listed if isinstance(entry, dict)]


def llama_props(answer: object) -> Found | None:
    """llama.cpp's ``llama-server``: ``GET /props`` holds ``default_generation_settings.n_ctx``
    (the context of each slot, which is each request's) and ``total_slots`` (``--parallel``)."""
    settings = answer.get("default_generation_settings") if isinstance(answer, dict) else None
    tokens = positive_int(settings.get("n_ctx")) if isinstance(settings, dict) else None
    if tokens is None or not isinstance(answer, dict):
        return None
    slots = positive_int(answer.get("total_slots"))
    return Found(ServerWindow(context_tokens=tokens, slots=slots, source="llama.cpp /props n_ctx"))


def vllm_models(answer: object, model: str) -> Found | None:
    """vLLM: ``GET /v1/models`` gives each served model's ``max_model_len`` (``--max-model-
    len``); the entry named ``model``, else the first that has one (its LoRA adapters share
    it). Other servers' lists have no such field."""
    entries = [e for e in _entries(answer, "data") if positive_int(e.get("max_model_len"))]
    chosen = next((entry for entry in entries if entry.get("id") == model), None)
    chosen = chosen or (entries[0] if entries else None)
    if chosen is None:
        return None
    tokens = positive_int(chosen.get("max_model_len"))
    return Found(ServerWindow(context_tokens=tokens, source="vLLM /v1/models max_model_len"))


def lmstudio_models(answer: object, model: str) -> Found | None:
    """LM Studio: ``GET /api/v0/models`` lists each model by ``id``: a loaded one with the
    ``loaded_context_length`` it was loaded with, every one with its ``max_context_length``
    (the most it holds: not ``sure``, it loads with less unless told)."""
    entry = next((e for e in _entries(answer, "data") if e.get("id") == model), None)
    if entry is None:
        return None
    loaded = positive_int(entry.get("loaded_context_length"))
    if loaded is not None:
        source = "LM Studio /api/v0/models loaded_context_length"
        return Found(ServerWindow(context_tokens=loaded, source=source))
    most = positive_int(entry.get("max_context_length"))
    if most is None:
        return None
    source = "LM Studio /api/v0/models max_context_length (the model is not loaded)"
    return Found(ServerWindow(context_tokens=most, source=source), sure=False)


def _same_ollama_model(name: object, model: str) -> bool:
    # Ollama names a model with its tag: `qwen2.5-coder` is `qwen2.5-coder:latest`.
    return isinstance(name, str) and model in (name, name.removesuffix(":latest"))


def ollama_ps(answer: object, model: str) -> Found | None:
    """Ollama: ``GET /api/ps`` lists the loaded models with the ``context_length`` each was
    loaded with (Ollama 0.12 and later)."""
    for entry in _entries(answer, "models"):
        if _same_ollama_model(entry.get("model"), model) or _same_ollama_model(
            entry.get("name"), model
        ):
            tokens = positive_int(entry.get("context_length"))
            if tokens is not None:
                source = "Ollama /api/ps context_length"
                return Found(ServerWindow(context_tokens=tokens, source=source))
    return None


def ollama_show(answer: object) -> Found | None:
    """Ollama: ``POST /api/show`` gives the model's ``parameters`` (a ``num_ctx`` line when its
    Modelfile sets one: the context it runs with) and ``model_info``
    (``<architecture>.context_length``: the most it holds, not ``sure``; Ollama runs it with
    ``OLLAMA_DEFAULT_CONTEXT`` unless told, so no more than that is taken from it)."""
    if not isinstance(answer, dict):
        return None
    parameters = answer.get("parameters")
    for line in parameters.splitlines() if isinstance(parameters, str) else []:
        name, _, value = line.strip().partition(" ")
        if name == "num_ctx" and value.strip().isdigit() and int(value) > 0:
            source = "Ollama /api/show parameters num_ctx"
            return Found(ServerWindow(context_tokens=int(value), source=source))
    info = answer.get("model_info")
    lengths = [
        (key, tokens)
        for key, value in (info.items() if isinstance(info, dict) else ())
        if key.endswith(".context_length") and (tokens := positive_int(value)) is not None
    ]
    if not lengths:
        return None
    key, most = lengths[0]
    if most <= OLLAMA_DEFAULT_CONTEXT:
        window = ServerWindow(context_tokens=most, source=f"Ollama /api/show model_info {key}")
    else:
        source = f"Ollama's default context (the model holds {most}: model_info {key})"
        window = ServerWindow(context_tokens=OLLAMA_DEFAULT_CONTEXT, source=source)
    return Found(window, sure=False)
