"""The prompt's layout: ``prompt_context.layout`` (``upstream``, the default, or
``shared_prefix``) and ``prompt_context.step`` (docs/configuration.md)."""

from __future__ import annotations

import re

import pytest

from teams_runtime.codecs.config import (
    DEFAULT_CONFIG_TEXT,
    DEFAULT_STEP,
    PromptContextConfig,
    parse_team_config,
)
from teams_runtime.exceptions import ConfigError

FILE = "team_runtime.yaml"


def test_the_default_is_upstream_and_init_writes_no_layout() -> None:
    config = parse_team_config(DEFAULT_CONFIG_TEXT, FILE)
    assert (config.prompt_context.layout, config.prompt_context.step) == ("upstream", DEFAULT_STEP)
    assert "layout" not in DEFAULT_CONFIG_TEXT and "step" not in DEFAULT_CONFIG_TEXT


def test_shared_prefix_takes_a_step_or_the_default_one() -> None:
    written = parse_team_config("prompt_context: {layout: shared_prefix, step: 3}\n", FILE)
    assert (written.prompt_context.layout, written.prompt_context.step) == ("shared_prefix", 3)
    default = parse_team_config("prompt_context: {layout: shared_prefix, step: null}\n", FILE)
    assert default.prompt_context.step == DEFAULT_STEP == 8


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param(
            "prompt_context: {layout: shared-prefix}",
            f"{FILE} prompt_context.layout must be upstream (the default) or shared_prefix, "
            "not 'shared-prefix'.",
            id="typo",
        ),
        pytest.param(
            "prompt_context: {layout: 2}",
            f"{FILE} prompt_context.layout must be upstream (the default) or shared_prefix, not 2.",
            id="number",
        ),
        pytest.param(
            "prompt_context: {layout: shared_prefix, step: 0}",
            f"{FILE} prompt_context.step must be a positive integer (events the tail grows by).",
            id="zero-step",
        ),
        pytest.param(
            "prompt_context: {layout: shared_prefix, step: 2.5}",
            f"{FILE} prompt_context.step must be a positive integer (events the tail grows by).",
            id="float-step",
        ),
        pytest.param(
            "prompt_context: {layout: shared_prefix, step: true}",
            f"{FILE} prompt_context.step must be a positive integer (events the tail grows by).",
            id="bool-step",
        ),
        pytest.param(
            "prompt_context: {step: 4}",
            f"{FILE} prompt_context.step applies only with layout: shared_prefix; set "
            "prompt_context.layout: shared_prefix, or remove step.",
            id="step-without-shared-prefix",
        ),
        pytest.param(
            "prompt_context: {layout: upstream, step: 4}",
            f"{FILE} prompt_context.step applies only with layout: shared_prefix; set "
            "prompt_context.layout: shared_prefix, or remove step.",
            id="step-with-upstream",
        ),
        pytest.param(
            "roles: {qa: {prompt_context: {layout: shared_prefix}}}",
            f"{FILE} roles.qa.prompt_context.layout cannot be set per role: every role gets "
            "the same prompt_context (set prompt_context.layout); only max_prompt_tokens may "
            "differ per role.",
            id="per-role-layout",
        ),
        pytest.param(
            "roles: {qa: {prompt_context: {step: 4}}}",
            f"{FILE} roles.qa.prompt_context.step cannot be set per role: every role gets "
            "the same prompt_context (set prompt_context.step); only max_prompt_tokens may "
            "differ per role.",
            id="per-role-step",
        ),
        pytest.param(
            "prompt_context: {layuot: shared_prefix}",
            f"{FILE} prompt_context.layuot is not a setting; did you mean layout?",
            id="misspelt-key",
        ),
    ],
)
def test_a_bad_layout_or_step_names_the_key_and_what_to_write(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=f"^{re.escape(message)}$"):
        parse_team_config(text + "\n", FILE)


def test_a_config_built_in_code_is_checked_the_same() -> None:
    with pytest.raises(ConfigError, match=r"prompt_context\.layout must be upstream"):
        PromptContextConfig(layout="cache")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"prompt_context\.step must be a positive integer"):
        PromptContextConfig(layout="shared_prefix", step=0)
