"""The fake OpenAI-compatible server's own endpoints, besides chat completions: what each
flavour of ``FakeOpenAIServer`` answers where the real server says its context window, its
slots and its token counts (shapes as their docs and sources give them):

    llama.cpp          GET /props (default_generation_settings.n_ctx, total_slots, a chat
                       template); POST /tokenize {"content"} -> {"tokens": [...]}; GET
                       /v1/models with meta.n_ctx_train (the model's trained length: a trap,
                       not the window)
    vllm               GET /v1/models (data[].max_model_len); POST /tokenize {"model",
                       "prompt", "add_special_tokens"} -> {"count", "max_model_len", "tokens"}
    llama-cpp-python   GET /v1/models without a window; POST /extras/tokenize and
                       /extras/tokenize/count {"input", "model"} -> {"tokens"} / {"count"},
                       a BOS token counted with every text
    ollama             GET /api/ps (the loaded models' context_length, Ollama 0.12+), POST
                       /api/show (parameters with num_ctx when set, model_info's
                       <arch>.context_length: the trained length)
    lmstudio           GET /api/v0/models (state, max_context_length, loaded_context_length
                       when loaded); any other endpoint: 200 and an ``error`` object, as LM
                       Studio answers them
    openai, ...        none: 404

The fake counts one token per 4 characters of a text, rounded up (``fake_token_count``).
"""

from __future__ import annotations

import json
from typing import Any

# The model's trained length, as its metadata says (larger than the window a server runs).
TRAINED_TOKENS = 32768
_BOS = 1


def fake_token_count(text: str) -> int:
    """The fake tokenizer's count of ``text``: a token per 4 characters, rounded up."""
    return -(-len(text) // 4)


def _tokens(text: str) -> list[int]:
    return list(range(100, 100 + fake_token_count(text)))


def _models(data: list[dict[str, Any]]) -> dict[str, Any]:
    return {"object": "list", "data": data}


def _field(body: bytes, name: str) -> Any:
    request = json.loads(body)
    return request.get(name) if isinstance(request, dict) else None


def endpoint_answer(server: Any, method: str, path: str, body: bytes) -> tuple[int, Any] | None:
    """The status and JSON of ``server``'s answer to ``method path``, or ``None`` when it is a
    chat completion (any other POST). ``server`` is the ``FakeOpenAIServer``."""
    flavour, window, model = server.flavour, server.window_tokens, server.model_name
    match (flavour, method, path):
        case ("llama.cpp", "GET", "/props"):
            settings = {"id": 0, "n_ctx": window, "params": {"n_predict": -1}}
            return 200, {"default_generation_settings": settings, "total_slots": server.slots,
                         "model_path": model, "chat_template": "{{ messages }}" * 200}  # fmt: skip
        case ("llama.cpp", "POST", "/tokenize"):
            content = _field(body, "content")  # none: llama-server counts nothing
            return 200, {"tokens": _tokens(content) if isinstance(content, str) else []}
        case ("llama.cpp", "GET", "/v1/models"):
            meta = {"n_ctx_train": TRAINED_TOKENS, "n_vocab": 49152}
            return 200, _models([{"id": model, "object": "model", "meta": meta}])
        case ("vllm", "GET", "/v1/models"):
            entry = {"id": model, "object": "model", "root": model, "max_model_len": window}
            return 200, _models([entry])
        case ("vllm", "POST", "/tokenize"):
            if not isinstance(prompt := _field(body, "prompt"), str):
                return 400, {"object": "error", "message": "Field required: prompt"}
            tokens = _tokens(prompt)
            return 200, {"count": len(tokens), "max_model_len": window, "tokens": tokens}
        case ("llama-cpp-python", "GET", "/v1/models"):
            entry = {"id": model, "object": "model", "owned_by": "me", "permissions": []}
            return 200, _models([entry])
        case ("llama-cpp-python", "POST", "/extras/tokenize" | "/extras/tokenize/count"):
            text = _field(body, "input")
            if not isinstance(text, str):
                return 422, {"detail": [{"loc": ["body", "input"], "msg": "Field required"}]}
            if path.endswith("/count"):
                return 200, {"count": _BOS + fake_token_count(text)}
            return 200, {"tokens": [_BOS, *_tokens(text)]}
        case ("ollama", "GET", "/api/ps"):
            loaded = [{"name": f"{model}:latest", "model": f"{model}:latest",
                       "context_length": window}] if server.loaded else []  # fmt: skip
            return 200, {"models": loaded}
        case ("ollama", "POST", "/api/show"):
            parameters = 'stop "<|im_end|>"'
            if server.num_ctx is not None:
                parameters += f"\nnum_ctx {server.num_ctx}"
            info = {"general.architecture": "qwen2", "qwen2.context_length": TRAINED_TOKENS}
            return 200, {"parameters": parameters, "model_info": info}
        case ("lmstudio", "GET", "/api/v0/models"):
            entry = {"id": model, "object": "model", "type": "llm", "state": "not-loaded",
                     "max_context_length": TRAINED_TOKENS}  # fmt: skip
            if server.loaded:
                entry.update(state="loaded", loaded_context_length=window)
            return 200, _models([entry])
        case ("lmstudio", _, _) if not path.endswith("/chat/completions"):
            return 200, {"error": f"Unexpected endpoint or method. ({method} {path})"}
        case (_, "GET", _):
            return 404, {"detail": "Not Found"}
        case (_, "POST", "/tokenize" | "/extras/tokenize" | "/extras/tokenize/count" | "/api/show"):
            return 404, {"detail": "Not Found"}
    return None
