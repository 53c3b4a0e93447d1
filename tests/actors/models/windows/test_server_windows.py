"""``probe_window``: each model server's context window for a model, from its own endpoints
(fakes answering as llama.cpp, vLLM, Ollama, LM Studio and llama-cpp-python do), else
``model.openai.context_tokens``, else unknown; never a crash, never past the timeout."""

from __future__ import annotations

import anyio
import pytest

from teams_runtime.actors.models import ServerWindow, probe_window
from teams_runtime.codecs.config import OpenAIConfig

from ....support.fake_openai_server import FakeOpenAIServer, Raw, Status
from ....support.fake_server_endpoints import TRAINED_TOKENS

pytestmark = pytest.mark.anyio


def _settings(server: FakeOpenAIServer, **more: object) -> OpenAIConfig:
    return OpenAIConfig(base_url=server.base_url, model=server.model_name, **more)  # type: ignore[arg-type]


async def _window(server: FakeOpenAIServer, **more: object) -> ServerWindow:
    with anyio.fail_after(20):
        return await probe_window(_settings(server, **more))


@pytest.mark.parametrize(
    ("flavour", "window"),
    [
        pytest.param(
            "llama.cpp",
            ServerWindow(context_tokens=4096, slots=2, source="llama.cpp /props n_ctx"),
            id="llama.cpp",
        ),
        pytest.param(
            "vllm",
            ServerWindow(context_tokens=4096, source="vLLM /v1/models max_model_len"),
            id="vllm",
        ),
        pytest.param(
            "ollama",
            ServerWindow(context_tokens=4096, source="Ollama /api/ps context_length"),
            id="ollama-loaded",
        ),
        pytest.param(
            "lmstudio",
            ServerWindow(
                context_tokens=4096, source="LM Studio /api/v0/models loaded_context_length"
            ),
            id="lmstudio-loaded",
        ),
    ],
)
async def test_the_server_says_the_window_it_runs(
    openai_server: FakeOpenAIServer, flavour: str, window: ServerWindow
) -> None:
    openai_server.flavour = flavour
    openai_server.slots = 2
    # The config's figure is for servers that say none: the server's own comes first.
    assert await _window(openai_server, context_tokens=999) == window
    assert openai_server.requests == []  # no chat completion: nothing is generated


async def test_llama_server_is_read_from_props_not_its_trained_length(
    openai_server: FakeOpenAIServer,
) -> None:
    openai_server.flavour = "llama.cpp"
    openai_server.window_tokens = 8192
    window = await _window(openai_server)
    assert (window.context_tokens, window.slots) == (8192, 1)
    assert window.context_tokens != TRAINED_TOKENS  # /v1/models' meta.n_ctx_train


async def test_ollama_num_ctx_parameter_when_the_model_is_not_loaded(
    openai_server: FakeOpenAIServer,
) -> None:
    openai_server.flavour = "ollama"
    openai_server.loaded = False
    openai_server.num_ctx = 16384
    window = await _window(openai_server)
    assert window == ServerWindow(
        context_tokens=16384, source="Ollama /api/show parameters num_ctx"
    )


async def test_ollama_without_num_ctx_is_its_default_not_the_trained_length(
    openai_server: FakeOpenAIServer,
) -> None:
    openai_server.flavour = "ollama"
    openai_server.loaded = False
    window = await _window(openai_server)
    assert window.context_tokens == 4096
    assert window.source == (
        f"Ollama's default context (the model holds {TRAINED_TOKENS}: model_info "
        "qwen2.context_length)"
    )
    # The config knows better than a default.
    assert (await _window(openai_server, context_tokens=12000)).context_tokens == 12000


async def test_lmstudio_model_not_loaded_gives_way_to_the_config(
    openai_server: FakeOpenAIServer,
) -> None:
    openai_server.flavour = "lmstudio"
    openai_server.loaded = False
    window = await _window(openai_server)
    assert window.context_tokens == TRAINED_TOKENS
    assert window.source.endswith("max_context_length (the model is not loaded)")
    assert await _window(openai_server, context_tokens=8192) == ServerWindow(
        context_tokens=8192, source="model.openai.context_tokens"
    )


@pytest.mark.parametrize("flavour", ["llama-cpp-python", "openai"])
async def test_a_server_that_says_none_is_the_config_or_unknown(
    openai_server: FakeOpenAIServer, flavour: str
) -> None:
    openai_server.flavour = flavour
    assert await _window(openai_server, context_tokens=4096) == ServerWindow(
        context_tokens=4096, source="model.openai.context_tokens"
    )
    unknown = await _window(openai_server)
    assert unknown.context_tokens is None and unknown.slots is None
    assert unknown.source == "unknown: the server says none (set model.openai.context_tokens)"


@pytest.mark.parametrize(
    "behaviour",
    [
        pytest.param(Status(500, body='{"error": "boom"}'), id="500"),
        pytest.param(Raw(b"<html>not json", content_type="text/html"), id="not-json"),
        pytest.param(Raw(b'{"default_generation_settings": {"n_ctx": -5}}'), id="bad-n_ctx"),
        pytest.param(Raw(b'{"default_generation_settings": {"n_ctx": true}}'), id="bool-n_ctx"),
        pytest.param(Raw(b"[1, 2]"), id="a-list"),
    ],
)
async def test_a_broken_answer_is_no_window(
    openai_server: FakeOpenAIServer, behaviour: Status | Raw
) -> None:
    openai_server.flavour = "llama.cpp"
    openai_server.endpoint_behaviours["/props"] = behaviour
    window = await _window(openai_server, context_tokens=2048)
    assert window == ServerWindow(context_tokens=2048, source="model.openai.context_tokens")


async def test_a_stalled_server_is_unknown_within_the_timeout(
    openai_server: FakeOpenAIServer,
) -> None:
    openai_server.flavour = "llama.cpp"
    openai_server.endpoint_behaviours["/props"] = "stall"
    started = anyio.current_time()
    window = await _window(openai_server, timeout_seconds=0.5)
    assert window.context_tokens is None
    assert anyio.current_time() - started < 5  # the timeout bounds the whole probe


async def test_a_server_that_is_down_is_unknown(openai_server: FakeOpenAIServer) -> None:
    openai_server.down()
    try:
        window = await _window(openai_server, context_tokens=4096)
    finally:
        openai_server.up()
    assert window.source == "model.openai.context_tokens"


async def test_the_key_goes_with_each_request(
    openai_server: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_KEY", "sk-test-123")
    openai_server.flavour = "vllm"
    await _window(openai_server, api_key_env="FAKE_KEY")
    assert openai_server.endpoint_requests
    seen = {request.headers.get("authorization") for request in openai_server.endpoint_requests}
    assert seen == {"Bearer sk-test-123"}
