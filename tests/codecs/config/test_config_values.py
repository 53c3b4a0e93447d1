"""Values of the wrong kind: messages name the key and say what to write; a number may be
written with an exponent; a mistyped choice gets a "did you mean", as a mistyped key does."""

from __future__ import annotations

import re

import pytest

from teams_runtime import ConfigError
from teams_runtime.codecs.config import TeamConfig, parse_team_config

SERVER = "backend: openai, openai: {base_url: 'http://127.0.0.1:8080/v1', model: m"


def _parse(text: str) -> TeamConfig:
    return parse_team_config(text, "team_runtime.yaml")


@pytest.mark.parametrize(
    ("text", "read"),
    [
        pytest.param("model: {timeout_seconds: 1e3}", 1000.0, id="1e3"),
        pytest.param("model: {timeout_seconds: 1E3}", 1000.0, id="1E3"),
        pytest.param("model: {timeout_seconds: 2.5e2}", 250.0, id="2.5e2"),
        pytest.param("model: {timeout_seconds: 1e+3}", 1000.0, id="1e+3"),
        pytest.param("model: {timeout_seconds: 1000}", 1000.0, id="plain"),
    ],
)
def test_a_number_may_have_an_exponent(text: str, read: float) -> None:
    assert _parse(text).model.timeout_seconds == read


def test_an_exponent_reaches_nested_numbers_too() -> None:
    openai = _parse(f"model: {{{SERVER}, temperature: 5e-1, timeout_seconds: 6e1}}}}").model.openai
    assert openai is not None and (openai.temperature, openai.timeout_seconds) == (0.5, 60.0)


def test_an_event_count_with_an_exponent_is_still_not_an_integer() -> None:
    # Spec section 3: a count is an integer; 1e1 reads as the number 10.0, which is not one.
    with pytest.raises(ConfigError, match=r"recent_events must be a positive integer\.$"):
        _parse("prompt_context: {recent_events: 1e1}")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param(
            "model: {env: {A: 1}}",
            "team_runtime.yaml model.env.A must be text, not a whole number (put it in quotes).",
            id="env-number",
        ),
        pytest.param(
            "model: {env: {OK: x, FLAG: true}}",
            "team_runtime.yaml model.env.FLAG must be text, not true or false (put it in quotes).",
            id="env-second-bool",
        ),
        pytest.param(
            "model: {env: {A: }}",
            "team_runtime.yaml model.env.A must be text, not empty.",
            id="env-empty",
        ),
        pytest.param(
            "model: {env: [A]}",
            "team_runtime.yaml model.env must be a mapping, not a list.",
            id="env-list",
        ),
        pytest.param(
            "model: {command: [cli, 3]}",
            "team_runtime.yaml model.command[1] must be text, not a whole number (put it in "
            "quotes).",
            id="command-item",
        ),
        pytest.param(
            "model: {timeout_seconds: soon}",
            "team_runtime.yaml model.timeout_seconds must be a number, not text.",
            id="number-text",
        ),
        pytest.param(
            "model: {attempts: 2.5}",
            "team_runtime.yaml model.attempts must be a whole number, not a decimal number.",
            id="whole-decimal",
        ),
        pytest.param(
            f"model: {{{SERVER}, max_tokens: 1e3}}}}",
            "team_runtime.yaml model.openai.max_tokens must be a whole number, not a decimal "
            "number (write 1000).",
            id="max-tokens-exponent",
        ),
        pytest.param(
            f"model: {{{SERVER}, extra_body: {{1: x}}}}}}",
            "team_runtime.yaml model.openai.extra_body has a key that is not text; its keys must "
            "be text.",
            id="extra-body-key",
        ),
        pytest.param(
            "model: {backend: comand}",
            "team_runtime.yaml model.backend 'comand' is not one of dry_run, command, openai, "
            "human; did you mean command?",
            id="backend-typo",
        ),
        pytest.param(
            "model: {on_failure: requeu}",
            "team_runtime.yaml model.on_failure 'requeu' is not one of fail, requeue; did you "
            "mean requeue?",
            id="on-failure-typo",
        ),
        pytest.param(
            "model: {structured_output: json_schem}",
            "team_runtime.yaml model.structured_output 'json_schem' is not one of json_schema, "
            "json_object, off; did you mean json_schema?",
            id="structured-typo",
        ),
        pytest.param(
            "model: {backend: gpt}",
            "team_runtime.yaml model.backend 'gpt' is not one of dry_run, command, openai, human.",
            id="nothing-close",
        ),
        pytest.param(
            "model: {openai: {model: m}}",
            "team_runtime.yaml model.openai.base_url must be set; see docs/models.md.",
            id="required",
        ),
    ],
)
def test_bad_values_name_the_key_and_what_to_write(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=f"^{re.escape(message)}$"):
        _parse(text)
