"""The settings a model request carries beside the prompt: model.openai's reasoning_effort,
temperature, max_tokens, system and extra_body, and model.structured_output."""

from __future__ import annotations

import re

import pytest

from teams_runtime import ConfigError
from teams_runtime.codecs.config import ModelConfig, parse_team_config

_SERVER = "backend: openai\n  openai:\n    base_url: http://127.0.0.1:8080/v1\n    model: m\n"


def _model(text: str) -> ModelConfig:
    return parse_team_config(text, "team_runtime.yaml").model


def _openai(extra: str) -> str:
    return "model:\n  " + _SERVER + "".join(f"    {line}\n" for line in extra.splitlines())


def test_request_settings_are_read() -> None:
    model = _model(
        _openai(
            "reasoning_effort: high\ntemperature: 0.2\nmax_tokens: 4096\n"
            "system: Answer in JSON.\nextra_body: {top_k: 40, cache_prompt: true}"
        )
    )
    assert model.openai is not None
    assert model.openai.reasoning_effort == "high"
    assert model.openai.temperature == 0.2
    assert model.openai.max_tokens == 4096
    assert model.openai.system == "Answer in JSON."
    assert model.openai.extra_body == {"top_k": 40, "cache_prompt": True}


def test_context_tokens_is_read_and_absent_by_default() -> None:
    openai = _model(_openai("context_tokens: 8192\nmax_tokens: 1024")).openai
    assert openai is not None and openai.context_tokens == 8192
    assert (openai_default := _model(_openai("")).openai) is not None
    assert openai_default.context_tokens is None  # ask the server


def test_request_settings_left_out_send_nothing() -> None:
    openai = _model(_openai("")).openai
    assert openai is not None
    assert (openai.reasoning_effort, openai.temperature, openai.max_tokens) == ("", None, None)
    assert (openai.system, openai.extra_body) == ("", {})


@pytest.mark.parametrize(
    ("text", "form"),
    [
        pytest.param(_openai(""), "json_schema", id="openai-default"),
        pytest.param(
            "model: {backend: command, command: [m]}", "json_schema", id="command-default"
        ),
        pytest.param("model: {}", "off", id="dry-run-default"),
        pytest.param(
            "model:\n  structured_output: json_object\n  " + _SERVER, "json_object", id="set"
        ),
        pytest.param("model:\n  structured_output: 'off'\n  " + _SERVER, "off", id="off"),
    ],
)
def test_structured_output_defaults_by_backend(text: str, form: str) -> None:
    model = _model(text)
    assert model.structured_output == model.structured_output_form == form  # filled in


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        pytest.param(
            "temperature: 2.5",
            "model.openai.temperature must be a number from 0 to 2",
            id="temperature-high",
        ),
        pytest.param(
            "temperature: -0.1",
            "model.openai.temperature must be a number from 0 to 2",
            id="temperature-negative",
        ),
        pytest.param(
            "temperature: .nan",
            "model.openai.temperature must be a number from 0 to 2",
            id="temperature-nan",
        ),
        pytest.param(
            "max_tokens: 0", "model.openai.max_tokens must be a whole number from 1", id="tokens-0"
        ),
        pytest.param(
            "context_tokens: 0",
            "model.openai.context_tokens must be a whole number from 1 to 10000000",
            id="window-0",
        ),
        pytest.param(
            "context_tokens: 4096\nmax_tokens: 4096",
            "model.openai.max_tokens (4096) must be less than context_tokens (4096)",
            id="answer-fills-window",
        ),
        pytest.param(
            "reasoning_effort: ' high'",
            "model.openai.reasoning_effort must be a level without spaces",
            id="effort-spaces",
        ),
        pytest.param(
            "extra_body: {messages: []}",
            "model.openai.extra_body.messages is set by the runtime itself",
            id="extra-body-messages",
        ),
        pytest.param(
            "extra_body: {model: other}",
            "model.openai.extra_body.model is set by the runtime itself",
            id="extra-body-model",
        ),
    ],
)
def test_bad_request_settings_name_the_key(extra: str, message: str) -> None:
    with pytest.raises(ConfigError, match=f"^team_runtime.yaml {re.escape(message)}"):
        _model(_openai(extra))
