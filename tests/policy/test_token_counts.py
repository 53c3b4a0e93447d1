"""Token estimates without a server's tokenizer (``policy.token_counts``): a conservative
default, then each model's own ratio from its calls, corrected when a server says more."""

from __future__ import annotations

import pytest

from teams_runtime.policy.token_counts import (
    DEFAULT_CHARS_PER_TOKEN,
    DEFAULT_RATE,
    LEARNED_AFTER,
    LEARNED_MARGIN,
    LearnedRatios,
    TokenRate,
    server_overshoot,
    server_prompt_tokens,
)


def test_the_default_rate_rounds_up_and_counts_nothing_as_nothing() -> None:
    assert DEFAULT_RATE.method == "default"
    assert DEFAULT_RATE.tokens(0) == 0
    assert DEFAULT_RATE.tokens(1) == 1
    assert DEFAULT_RATE.tokens(1000) == pytest.approx(1000 / DEFAULT_CHARS_PER_TOKEN)
    assert TokenRate(0.3, "learned").tokens(10) == 3


def test_a_model_is_learned_after_a_few_calls_with_its_margin() -> None:
    ratios = LearnedRatios()
    for _ in range(LEARNED_AFTER - 1):
        ratios.observe("local/qwen", 1_000, 4_000)
    assert ratios.rate("local/qwen") == DEFAULT_RATE  # too few calls yet
    ratios.observe("local/qwen", 1_000, 4_000)
    learned = ratios.rate("local/qwen")
    assert learned.method == "learned"
    assert learned.tokens_per_byte == pytest.approx(0.25 * (1 + LEARNED_MARGIN))
    assert ratios.rate("openai/gpt") == DEFAULT_RATE  # per model


def test_counts_that_cannot_be_a_ratio_are_not_taken() -> None:
    ratios = LearnedRatios()
    for tokens, chars in [(0, 100), (100, 0), (-1, 5)] * LEARNED_AFTER:
        ratios.observe("m/m", tokens, chars)
    assert ratios.rate("m/m") == DEFAULT_RATE


def test_a_server_that_counted_more_sets_the_models_floor() -> None:
    ratios = LearnedRatios()
    for _ in range(LEARNED_AFTER):
        ratios.observe("m/m", 1_000, 4_000)
    ratios.correct("m/m", 4_500, 9_000)  # the server said 0.5 a byte
    assert ratios.rate("m/m").tokens_per_byte == pytest.approx(0.5)
    fresh = LearnedRatios()
    fresh.correct("m/m", 3_000, 3_000)  # above the default, before anything was learned
    assert fresh.rate("m/m").tokens_per_byte == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("said", "tokens"),
    [
        pytest.param(
            '{"error":{"code":400,"type":"exceed_context_size_error","n_prompt_tokens":5012,'
            '"n_ctx":4096}}',
            5012,
            id="llama.cpp",
        ),
        pytest.param(
            "This model's maximum context length is 4096 tokens. However, you requested 5100 "
            "tokens (4100 in the messages, 1000 in the completion).",
            4100,
            id="vllm",
        ),
        pytest.param(
            "This model's maximum context length is 8192 tokens. However, your messages "
            "resulted in 9001 tokens.",
            9001,
            id="openai",
        ),
        pytest.param("context length exceeded", None, id="no-count"),
    ],
)
def test_what_a_server_said_the_prompt_took(said: str, tokens: int | None) -> None:
    assert server_prompt_tokens(said) == tokens


@pytest.mark.parametrize(
    ("said", "over"),
    [
        pytest.param('{"n_prompt_tokens":5012,"n_ctx":4096}', 916, id="llama.cpp"),
        pytest.param(
            "This model's maximum context length is 4096 tokens. However, you requested 5100 "
            "tokens (4100 in the messages, 1000 in the completion).",
            1004,
            id="vllm",
        ),
        pytest.param(
            "maximum context length is 8192 tokens. However, your messages resulted in 9001 "
            "tokens.",
            809,
            id="openai",
        ),
        pytest.param("the context is full", None, id="no-figures"),
    ],
)
def test_how_far_over_a_server_says_a_prompt_was(said: str, over: int | None) -> None:
    assert server_overshoot(said) == over
