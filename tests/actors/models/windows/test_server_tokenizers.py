"""``find_tokenizer``: a server's own token count where it has an endpoint for it (llama.cpp's
and vLLM's ``/tokenize``, llama-cpp-python's ``/extras/tokenize``), none elsewhere; the
``ServerFacts`` that keep it and the window for a run; and the answer's reserve of an ``auto``
budget."""

from __future__ import annotations

import anyio
import pytest

from teams_runtime.actors.models import (
    ServerFacts,
    ServerTokenizer,
    TokenizerGone,
    auto_budget,
    default_reserve,
    find_tokenizer,
)
from teams_runtime.actors.models.windows import _tokenizer as _tokenizer_module
from teams_runtime.codecs.config import OpenAIConfig
from teams_runtime.exceptions import ConfigError

from ....support.fake_openai_server import FakeOpenAIServer, Status
from ....support.fake_server_endpoints import fake_token_count

pytestmark = pytest.mark.anyio

_TEXT = '{"event": "developer_report", "payload": {"diff": "' + "x = 1\\n" * 300 + '"}}'


def _settings(server: FakeOpenAIServer, **more: object) -> OpenAIConfig:
    return OpenAIConfig(base_url=server.base_url, model=server.model_name, **more)  # type: ignore[arg-type]


async def _tokenizer(server: FakeOpenAIServer, **more: object) -> ServerTokenizer | None:
    with anyio.fail_after(20):
        return await find_tokenizer(_settings(server, **more))


@pytest.mark.parametrize(
    ("flavour", "source"),
    [
        pytest.param("llama.cpp", "llama.cpp /tokenize", id="llama.cpp"),
        pytest.param("vllm", "vLLM /tokenize", id="vllm"),
        pytest.param(
            "llama-cpp-python", "llama-cpp-python /extras/tokenize/count", id="llama-cpp-python"
        ),
    ],
)
async def test_the_server_counts_a_text_as_its_model_reads_it(
    openai_server: FakeOpenAIServer, flavour: str, source: str
) -> None:
    openai_server.flavour = flavour
    tokenizer = await _tokenizer(openai_server)
    assert tokenizer is not None and tokenizer.source == source
    with anyio.fail_after(20):
        # The text's own tokens: llama-cpp-python's BOS, counted with every text, is taken off.
        assert await tokenizer.count(_TEXT) == fake_token_count(_TEXT)
        assert await tokenizer.count("") == 0
    assert openai_server.requests == []  # no chat completion


async def test_llama_cpp_python_without_the_count_endpoint_uses_tokenize(
    openai_server: FakeOpenAIServer,
) -> None:
    openai_server.flavour = "llama-cpp-python"
    openai_server.endpoint_behaviours["/extras/tokenize/count"] = Status(404, body="{}")
    tokenizer = await _tokenizer(openai_server)
    assert tokenizer is not None
    assert tokenizer.source == "llama-cpp-python /extras/tokenize"
    with anyio.fail_after(20):
        assert await tokenizer.count(_TEXT) == fake_token_count(_TEXT)


async def test_vllm_is_asked_for_the_text_alone(openai_server: FakeOpenAIServer) -> None:
    openai_server.flavour = "vllm"
    tokenizer = await _tokenizer(openai_server)
    assert tokenizer is not None
    asked = openai_server.endpoint_requests[-1].json()
    assert asked == {"model": "fake-model", "prompt": "", "add_special_tokens": False}


@pytest.mark.parametrize("flavour", ["ollama", "lmstudio", "openai"])
async def test_a_server_without_a_tokenizer_has_none(
    openai_server: FakeOpenAIServer, flavour: str
) -> None:
    openai_server.flavour = flavour
    assert await _tokenizer(openai_server) is None


async def test_a_stalled_tokenizer_is_none_within_the_timeout(
    openai_server: FakeOpenAIServer,
) -> None:
    openai_server.flavour = "llama.cpp"
    openai_server.endpoint_behaviours["/tokenize"] = "stall"
    started = anyio.current_time()
    assert await _tokenizer(openai_server, timeout_seconds=0.3) is None
    assert anyio.current_time() - started < 10


async def test_a_count_waits_for_a_busy_server_as_long_as_its_call_would(
    openai_server: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # llama-cpp-python counts only after the completion it is busy with: a count that gave up
    # at the look-ups' bound (30 s) fell back to the default rate for a prompt that would
    # have waited for that server anyway.
    openai_server.flavour = "llama.cpp"
    tokenizer = await _tokenizer(openai_server, timeout_seconds=1.0)
    assert tokenizer is not None
    monkeypatch.setattr(_tokenizer_module, "MOST_SECONDS", 0.05)
    openai_server.endpoint_behaviours["/tokenize"] = "stall"
    started = anyio.current_time()
    with anyio.fail_after(20), pytest.raises(TokenizerGone):
        await tokenizer.count("hello")
    assert anyio.current_time() - started >= 0.9  # timeout_seconds, not the look-ups' bound


async def test_a_count_the_server_no_longer_gives_raises_tokenizer_gone(
    openai_server: FakeOpenAIServer,
) -> None:
    openai_server.flavour = "llama.cpp"
    tokenizer = await _tokenizer(openai_server)
    assert tokenizer is not None
    openai_server.endpoint_behaviours["/tokenize"] = Status(503, body="{}")
    with anyio.fail_after(20), pytest.raises(TokenizerGone, match=r"^llama\.cpp /tokenize at "):
        await tokenizer.count("hello")


async def test_facts_ask_each_server_once_per_run(openai_server: FakeOpenAIServer) -> None:
    openai_server.flavour = "llama.cpp"
    facts = ServerFacts()
    settings = _settings(openai_server)
    with anyio.fail_after(20):
        async with anyio.create_task_group() as group:  # roles asking at once
            for _ in range(4):
                group.start_soon(facts.window, settings)
                group.start_soon(facts.tokenizer, settings)
        asked = len(openai_server.endpoint_requests)
        window = await facts.window(settings)
        tokenizer = await facts.tokenizer(settings)
    assert window.context_tokens == 4096 and tokenizer is not None
    props = [r for r in openai_server.endpoint_requests if r.path == "/props"]
    assert len(props) == 1
    assert len(openai_server.endpoint_requests) == asked  # kept: nothing asked again
    facts.forget_tokenizer(settings)
    with anyio.fail_after(20):
        assert await facts.tokenizer(settings) is not None
    assert len(openai_server.endpoint_requests) > asked  # looked for again


@pytest.mark.parametrize(
    ("window", "max_tokens", "budget"),
    [
        pytest.param(4096, None, (3072, 1024), id="a-quarter-of-a-small-window"),
        pytest.param(131072, None, (129024, 2048), id="at-most-2048"),
        pytest.param(8192, 500, (7692, 500), id="max_tokens-set"),
        pytest.param(3, None, (2, 1), id="tiny"),
    ],
)
def test_auto_budget_leaves_the_answer_its_reserve(
    window: int, max_tokens: int | None, budget: tuple[int, int]
) -> None:
    assert auto_budget(window, max_tokens) == budget
    assert sum(auto_budget(window, max_tokens)) == window  # the answer never goes past it
    if max_tokens is None:
        assert default_reserve(window) == budget[1]


def test_auto_budget_refuses_a_reserve_that_fills_the_window() -> None:
    with pytest.raises(
        ConfigError,
        match=r"^model\.openai\.max_tokens \(4096\) leaves no room for a prompt in the model "
        r"server's window of 4096 tokens",
    ):
        auto_budget(4096, 4096)
