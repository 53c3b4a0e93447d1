"""A model per role: ``roles.<role>.model`` over ``role_defaults.<role>`` over ``model``, laid
key by key, and the errors of each, naming where the bad value was written."""

from __future__ import annotations

import re

import pytest

from teams_runtime import ConfigError
from teams_runtime.codecs.config import TeamConfig, parse_team_config
from teams_runtime.codecs.roles import ROLES

SERVER = (
    "model:\n  backend: openai\n  attempts: 3\n  openai:\n    base_url: http://127.0.0.1:8080/v1\n"
    "    model: local-7b\n    temperature: 0.7\n    extra_body: {top_k: 40, min_p: 0.05}\n"
)


def _parse(text: str) -> TeamConfig:
    return parse_team_config(text, "team_runtime.yaml")


def _fails(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=f"^{re.escape(message)}$"):
        _parse(text)


def test_without_overrides_every_role_has_the_model_section() -> None:
    config = _parse(SERVER)
    assert set(config.roles) == set(ROLES)
    assert all(config.model_for(role) == config.model for role in ROLES)


def test_a_roles_model_is_laid_over_the_model_section_key_by_key() -> None:
    config = _parse(
        SERVER
        + "roles:\n  qa:\n    model:\n      attempts: 1\n"
        + "      openai: {model: small-1b, max_tokens: 512, extra_body: {top_k: 10}}\n"
    )
    qa = config.model_for("qa")
    assert qa.attempts == 1
    assert qa.openai is not None
    assert qa.openai.model == "small-1b"
    assert qa.openai.max_tokens == 512
    # Not written for qa: the model section's, key by key at every depth.
    assert qa.openai.base_url == "http://127.0.0.1:8080/v1"
    assert qa.openai.temperature == 0.7
    assert qa.openai.extra_body == {"top_k": 10, "min_p": 0.05}
    assert config.model_for("planner") == config.model


def test_precedence_roles_then_role_defaults_then_model() -> None:
    config = _parse(
        SERVER
        + "role_defaults:\n  planner: {model: big-70b, reasoning: high}\n"
        + "  qa: {model: mid-13b, reasoning: low}\n"
        + "roles:\n  qa:\n    model:\n      openai: {model: small-1b}\n"
    )
    planner, qa, developer = (
        config.model_for(role).openai for role in ("planner", "qa", "developer")
    )
    assert planner is not None and qa is not None and developer is not None
    assert (planner.model, planner.reasoning_effort) == ("big-70b", "high")
    assert (qa.model, qa.reasoning_effort) == (
        "small-1b",
        "low",
    )  # model from roles, level from role_defaults
    assert (developer.model, developer.reasoning_effort) == ("local-7b", "")


def test_role_defaults_set_a_commands_model_and_reasoning() -> None:
    config = _parse(
        "model: {backend: command, command: [my-cli], name: base}\n"
        "role_defaults: {planner: {model: big, reasoning: high}}\n"
        "roles: {qa: {model: {name: small}}}\n"
    )
    assert (config.model_for("planner").name, config.model_for("planner").reasoning) == (
        "big",
        "high",
    )
    assert config.model_for("qa").name == "small"
    assert config.model_for("developer").name == "base"


def test_a_role_may_use_another_backend() -> None:
    config = _parse(
        SERVER
        + "roles:\n  developer:\n    model: {backend: command, command: [my-cli]}\n"
        + "  qa:\n    model: {backend: dry_run}\n"
    )
    developer = config.model_for("developer")
    assert developer.backend == "command" and developer.command == ["my-cli"]
    assert config.model_for("qa").structured_output_form == "off"  # its own backend's default
    assert config.model_for("planner").structured_output_form == "json_schema"


def test_a_list_replaces_the_one_below_it() -> None:
    config = _parse(
        "model: {backend: command, command: [a, b, c]}\nroles: {qa: {model: {command: [d]}}}\n"
    )
    assert config.model_for("qa").command == ["d"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param(
            "roles: {planer: {model: {attempts: 1}}}",
            "team_runtime.yaml roles.planer is not a role of the team; did you mean planner?",
            id="role-typo",
        ),
        pytest.param(
            "roles: {boss: {}}",
            "team_runtime.yaml roles.boss is not a role of the team; the roles are: "
            + ", ".join(ROLES)
            + " (to add one, list the team in team.roles).",
            id="unknown-role",
        ),
        pytest.param(
            "roles: {qa: {modle: {}}}",
            "team_runtime.yaml roles.qa.modle is not a setting; did you mean model?",
            id="setting-typo",
        ),
        pytest.param(
            "roles: {qa: {model: {atempts: 1}}}",
            "team_runtime.yaml roles.qa.model.atempts is not a setting; did you mean attempts?",
            id="model-key-typo",
        ),
        pytest.param(
            SERVER + "roles: {qa: {model: {openai: {temprature: 1}}}}",
            "team_runtime.yaml roles.qa.model.openai.temprature is not a setting; did you mean "
            "temperature?",
            id="openai-key-typo",
        ),
        pytest.param("roles: [qa]", "team_runtime.yaml roles must be a mapping.", id="not-mapping"),
        pytest.param(
            "roles: {qa: 1}", "team_runtime.yaml roles.qa must be a mapping.", id="role-not-mapping"
        ),
        pytest.param(
            "roles: {qa: {model: small}}",
            "team_runtime.yaml roles.qa.model must be a mapping.",
            id="model-not-mapping",
        ),
    ],
)
def test_role_keys_are_checked(text: str, message: str) -> None:
    _fails(text, message)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param(
            SERVER + "roles: {qa: {model: {openai: {temperature: 5}}}}",
            "team_runtime.yaml roles.qa.model.openai.temperature must be a number from 0 to 2 "
            "(for example: 0.2), or left out to use the server's default.",
            id="own-value",
        ),
        pytest.param(
            "roles: {qa: {model: {attempts: many}}}",
            "team_runtime.yaml roles.qa.model.attempts must be a whole number, not text.",
            id="own-kind",
        ),
        pytest.param(
            "roles: {qa: {model: {backend: comand}}}",
            "team_runtime.yaml roles.qa.model.backend 'comand' is not one of dry_run, command, "
            "openai, human; did you mean command?",
            id="own-choice",
        ),
        pytest.param(
            SERVER + "role_defaults: {qa: {reasoning: ' high'}}",
            "team_runtime.yaml role_defaults.qa.reasoning must be text (for example: medium), "
            "not text with spaces around it.",
            id="role-defaults-value",
        ),
        pytest.param(
            "roles: {qa: {model: {backend: openai}}}",
            "team_runtime.yaml roles.qa.model, laid over model: model.openai must be set when "
            "model.backend is openai (at least base_url and model); see docs/models.md.",
            id="merged-whole",
        ),
        pytest.param(
            "model: {backend: command, command: [cli, -m, '{model}']}",
            "team_runtime.yaml model.command uses {model}, but role orchestrator has no model: "
            "set role_defaults.orchestrator.model, roles.orchestrator.model.name or model.name.",
            id="placeholder-without-model",
        ),
        pytest.param(
            "model: {backend: command, command: [cli, '--effort={reasoning}'], name: m}\n"
            "role_defaults: {orchestrator: {reasoning: low}}",
            "team_runtime.yaml model.command uses {reasoning}, but role research has no "
            "reasoning: set role_defaults.research.reasoning, roles.research.model.reasoning or "
            "model.reasoning.",
            id="placeholder-without-reasoning",
        ),
    ],
)
def test_a_roles_bad_model_is_named_where_it_was_written(text: str, message: str) -> None:
    _fails(text, message)


def test_placeholders_filled_for_every_role_pass() -> None:
    config = _parse(
        "model: {backend: command, command: [cli, -m, '{model}', -r, '{reasoning}'],"
        " name: m, reasoning: low}\n"
    )
    assert config.model_for("qa").command == ["cli", "-m", "{model}", "-r", "{reasoning}"]
