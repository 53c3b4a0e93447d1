"""The token budget of a role's prompts: ``prompt_context.max_prompt_tokens`` and its one
per-role override, ``roles.<role>.prompt_context.max_prompt_tokens`` (docs/configuration.md)."""

from __future__ import annotations

import re

import pytest

from teams_runtime.codecs.config import (
    DEFAULT_CONFIG_TEXT,
    PromptBudget,
    PromptContextConfig,
    parse_team_config,
)
from teams_runtime.exceptions import ConfigError

FILE = "team_runtime.yaml"
OPENAI = "model: {backend: openai, openai: {base_url: 'http://127.0.0.1:9/v1', model: m}}\n"


def _parse(text: str) -> object:
    return parse_team_config(text, FILE)


def test_no_budget_unless_one_is_written_and_init_writes_none() -> None:
    config = parse_team_config(DEFAULT_CONFIG_TEXT, FILE)
    assert config.prompt_context == PromptContextConfig()
    block = DEFAULT_CONFIG_TEXT.split("prompt_context:\n", 1)[1].split("\n\n", 1)[0]
    assert block == "  enabled: true\n  recent_events: 8\n  max_events: 16"  # the spec's
    assert "`max_prompt_tokens: auto`" in DEFAULT_CONFIG_TEXT  # said in a comment, not set
    assert config.prompt_budget("qa") == PromptBudget(max_prompt_tokens=None, source="none")
    empty = parse_team_config("prompt_context: {max_prompt_tokens: null}\n", FILE)
    assert empty.prompt_budget("qa").source == "none"


def test_a_role_budget_wins_over_the_global_one() -> None:
    config = parse_team_config(
        "prompt_context: {max_prompt_tokens: 8000}\n"
        "roles: {qa: {prompt_context: {max_prompt_tokens: 2000}}, planner: {prompt_context: }}\n",
        FILE,
    )
    assert config.prompt_budget("qa") == PromptBudget(max_prompt_tokens=2000, source="role")
    assert config.prompt_budget("planner") == PromptBudget(max_prompt_tokens=8000, source="global")


def test_a_role_opts_out_of_the_global_budget_with_none() -> None:
    config = parse_team_config(
        "prompt_context: {max_prompt_tokens: 8000}\n"
        "roles: {qa: {prompt_context: {max_prompt_tokens: none}}}\n",
        FILE,
    )
    assert config.prompt_budget("qa") == PromptBudget(max_prompt_tokens=None, source="role")
    assert config.prompt_budget("planner") == PromptBudget(max_prompt_tokens=8000, source="global")
    # A global auto that a role on another backend opts out of is taken.
    config = parse_team_config(
        OPENAI + "prompt_context: {max_prompt_tokens: auto}\n"
        "roles: {qa: {model: {backend: dry_run}, prompt_context: {max_prompt_tokens: none}}}\n",
        FILE,
    )
    assert config.prompt_budget("qa").max_prompt_tokens is None


def test_auto_is_taken_for_a_role_on_an_openai_server_and_for_a_person() -> None:
    config = parse_team_config(
        OPENAI + "prompt_context: {max_prompt_tokens: auto}\n"
        "roles: {qa: {model: {backend: human}}}\n",
        FILE,
    )
    assert config.prompt_budget("planner") == PromptBudget(
        max_prompt_tokens="auto", source="global"
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param(
            "prompt_context: {max_prompt_tokens: 0}",
            f"{FILE} prompt_context.max_prompt_tokens must be a positive integer or auto.",
            id="zero",
        ),
        pytest.param(
            "prompt_context: {max_prompt_tokens: true}",
            f"{FILE} prompt_context.max_prompt_tokens must be a positive integer or auto.",
            id="bool",
        ),
        pytest.param(
            "prompt_context: {max_prompt_tokens: '4096'}",
            f"{FILE} prompt_context.max_prompt_tokens must be a positive integer or auto.",
            id="text-number",
        ),
        pytest.param(
            "prompt_context: {max_prompt_tokens: 4096.0}",
            f"{FILE} prompt_context.max_prompt_tokens must be a positive integer or auto "
            "(write 4096).",
            id="float",
        ),
        pytest.param(
            "prompt_context: {max_prompt_tokens: 2.5e3}",
            f"{FILE} prompt_context.max_prompt_tokens must be a positive integer or auto "
            "(write 2500).",
            id="exponent",
        ),
        pytest.param(
            "prompt_context: {max_prompt_tokens: none}",
            f"{FILE} prompt_context.max_prompt_tokens must be a positive integer or auto (none "
            "is a role's word: leave the key out for no budget).",
            id="none-is-a-roles-word",
        ),
        pytest.param(
            "prompt_context: {max_prompt_tokens: Auto}",
            f"{FILE} prompt_context.max_prompt_tokens must be a positive integer or auto.",
            id="auto-capitalised",
        ),
        pytest.param(
            "prompt_context: {max_prompt_tokens: 1000000000}",
            f"{FILE} prompt_context.max_prompt_tokens must be at most 100000000.",
            id="too-large",
        ),
        pytest.param(
            "roles: {qa: {prompt_context: {max_prompt_tokens: -5}}}",
            f"{FILE} roles.qa.prompt_context.max_prompt_tokens must be a positive integer, auto "
            "or none.",
            id="role-negative",
        ),
        pytest.param(
            "roles: {qa: {prompt_context: [1]}}",
            f"{FILE} roles.qa.prompt_context must be a mapping.",
            id="role-not-a-mapping",
        ),
        pytest.param(
            "roles: {qa: {prompt_context: {max_events: 4}}}",
            f"{FILE} roles.qa.prompt_context.max_events cannot be set per role: every role gets "
            "the same prompt_context (set prompt_context.max_events); only max_prompt_tokens "
            "may differ per role.",
            id="role-shared-key",
        ),
        pytest.param(
            "roles: {qa: {prompt_context: {max_prompt_token: 4}}}",
            f"{FILE} roles.qa.prompt_context.max_prompt_token is not a setting; did you mean "
            "max_prompt_tokens?",
            id="role-typo",
        ),
        pytest.param(
            "team: {roles: [planner, qa]}\nprompt_context: {max_prompt_tokens: auto}",
            f"{FILE} prompt_context.max_prompt_tokens is auto, which only the openai backend "
            "can resolve (its server's context size), and the roles' model.backend is not "
            "openai (planner, qa use dry_run): give a number of tokens, or set "
            "roles.<role>.prompt_context.max_prompt_tokens (a number, or none for no budget) "
            "for planner, qa.",
            id="auto-global-on-dry-run-names-every-role",
        ),
        pytest.param(
            OPENAI + "prompt_context: {max_prompt_tokens: auto}\n"
            "roles: {qa: {model: {backend: command, command: [m]}}}",
            f"{FILE} prompt_context.max_prompt_tokens is auto, which only the openai backend "
            "can resolve (its server's context size), and the qa role's model.backend is "
            "command: give a number of tokens, or set roles.<role>.prompt_context."
            "max_prompt_tokens (a number, or none for no budget) for qa.",
            id="auto-global-on-one-command-role",
        ),
        pytest.param(
            OPENAI + "roles: {qa: {model: {backend: dry_run}, "
            "prompt_context: {max_prompt_tokens: auto}}}",
            f"{FILE} roles.qa.prompt_context.max_prompt_tokens is auto, which only the openai "
            "backend can resolve (its server's context size), and the qa role's model.backend "
            "is dry_run: give a number of tokens.",
            id="auto-role-on-dry-run",
        ),
    ],
)
def test_a_bad_budget_is_an_error_naming_its_field(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=f"^{re.escape(message)}$"):
        _parse(text)


def test_a_budget_built_in_code_is_checked_as_the_file_is() -> None:
    with pytest.raises(ConfigError, match="max_prompt_tokens must be a positive integer or auto"):
        PromptContextConfig(max_prompt_tokens=0)
    assert PromptContextConfig(max_prompt_tokens="auto").max_prompt_tokens == "auto"
