from __future__ import annotations

import re
from pathlib import Path

import pytest

from teams_runtime import ConfigError, PromptContextConfig, load_team_config
from teams_runtime.codecs.config import DEFAULT_CONFIG_TEXT, parse_team_config

PREFIX = "team_runtime.yaml prompt_context"
NOT_MAPPING = f"{PREFIX} must be a mapping."
ENABLED = f"{PREFIX}.enabled must be a boolean."
RECENT = f"{PREFIX}.recent_events must be a positive integer."
MAXIMUM = f"{PREFIX}.max_events must be a positive integer."
ORDER = f"{PREFIX}.max_events must be greater than or equal to recent_events."


def _config(block: str) -> PromptContextConfig:
    return parse_team_config(block, "team_runtime.yaml").prompt_context


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("", id="empty-file"),
        pytest.param("other: 1\n", id="block-missing"),
        pytest.param("prompt_context:\n", id="block-null"),
        pytest.param("prompt_context: null\n", id="explicit-null"),
        pytest.param("prompt_context: {}\n", id="empty-mapping"),
        pytest.param("prompt_context:\n  unknown: 3\n", id="unknown-keys-ignored"),
    ],
)
def test_missing_or_empty_block_gives_defaults(text: str) -> None:
    assert _config(text) == PromptContextConfig(enabled=True, recent_events=8, max_events=16)


def test_default_file_is_exactly_the_defaults() -> None:
    assert "prompt_context:\n  enabled: true\n  recent_events: 8\n  max_events: 16\n" in (
        DEFAULT_CONFIG_TEXT
    )
    assert _config(DEFAULT_CONFIG_TEXT) == PromptContextConfig()


def test_valid_values_are_read() -> None:
    config = _config("prompt_context:\n  enabled: false\n  recent_events: 4\n  max_events: 4\n")
    assert config == PromptContextConfig(enabled=False, recent_events=4, max_events=4)


@pytest.mark.parametrize(
    ("block", "message"),
    [
        pytest.param("prompt_context: 3", NOT_MAPPING, id="int-block"),
        pytest.param("prompt_context: [1]", NOT_MAPPING, id="list-block"),
        pytest.param("prompt_context: off", NOT_MAPPING, id="bool-block"),
        pytest.param("prompt_context: {enabled: 'yes'}", ENABLED, id="enabled-string"),
        pytest.param("prompt_context: {enabled: 1}", ENABLED, id="enabled-int"),
        pytest.param("prompt_context: {enabled: null}", ENABLED, id="enabled-null"),
        pytest.param("prompt_context: {recent_events: 0}", RECENT, id="recent-zero"),
        pytest.param("prompt_context: {recent_events: -1}", RECENT, id="recent-negative"),
        pytest.param("prompt_context: {recent_events: true}", RECENT, id="recent-bool"),
        pytest.param("prompt_context: {recent_events: 8.0}", RECENT, id="recent-float"),
        pytest.param("prompt_context: {recent_events: '8'}", RECENT, id="recent-string"),
        pytest.param("prompt_context: {max_events: 0}", MAXIMUM, id="max-zero"),
        pytest.param("prompt_context: {max_events: -1}", MAXIMUM, id="max-negative"),
        pytest.param("prompt_context: {max_events: true}", MAXIMUM, id="max-bool"),
        pytest.param("prompt_context: {max_events: 16.0}", MAXIMUM, id="max-float"),
        pytest.param("prompt_context: {max_events: '16'}", MAXIMUM, id="max-string"),
        pytest.param("prompt_context: {recent_events: 20}", ORDER, id="recent-above-default-max"),
        pytest.param("prompt_context: {recent_events: 5, max_events: 4}", ORDER, id="max-below"),
        pytest.param("prompt_context: {max_events: 7}", ORDER, id="max-below-default-recent"),
    ],
)
def test_invalid_values_have_exact_messages(block: str, message: str) -> None:
    with pytest.raises(ConfigError, match=f"^{re.escape(message)}$") as caught:
        _config(block)
    assert isinstance(caught.value, ValueError)


@pytest.mark.parametrize(
    ("block", "message"),
    [
        pytest.param("{enabled: 1, recent_events: 0}", ENABLED, id="enabled-before-recent"),
        pytest.param("{recent_events: 0, max_events: 0}", RECENT, id="recent-before-max"),
        pytest.param("{max_events: 0, recent_events: 20}", MAXIMUM, id="types-before-order"),
        pytest.param("{max_events: x, recent_events: 20}", MAXIMUM, id="max-type-before-order"),
    ],
)
def test_checks_run_in_the_specified_order(block: str, message: str) -> None:
    with pytest.raises(ConfigError, match=f"^{re.escape(message)}$"):
        _config(f"prompt_context: {block}")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        pytest.param({"recent_events": 20, "max_events": 16}, ORDER, id="recent-above-max"),
        pytest.param({"recent_events": 0}, RECENT, id="recent-zero"),
        pytest.param({"enabled": "yes"}, ENABLED, id="enabled-string"),
        pytest.param({"max_events": True}, MAXIMUM, id="max-bool"),
    ],
)
def test_direct_construction_is_checked_too(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=f"^{re.escape(message)}$"):
        PromptContextConfig(**kwargs)  # type: ignore[arg-type]


def test_missing_file_names_the_file_and_the_fix(tmp_path: Path) -> None:
    with pytest.raises(
        ConfigError, match=r"team_runtime\.yaml: no such file; run `teams-runtime init"
    ):
        load_team_config(tmp_path)


def test_broken_yaml_names_the_file_and_line(tmp_path: Path) -> None:
    (tmp_path / "team_runtime.yaml").write_text("prompt_context: [\n  enabled: true\n")
    with pytest.raises(ConfigError, match=r"^.*team_runtime\.yaml: not valid YAML \(.* line \d+"):
        load_team_config(tmp_path)


@pytest.mark.parametrize("text", ["- a\n- b\n", "just text\n", "42\n"])
def test_top_level_must_be_a_mapping(tmp_path: Path, text: str) -> None:
    (tmp_path / "team_runtime.yaml").write_text(text)
    with pytest.raises(ConfigError, match=r"team_runtime\.yaml: the top level must be a mapping"):
        load_team_config(tmp_path)


def test_file_is_read_from_the_workspace(tmp_path: Path) -> None:
    (tmp_path / "team_runtime.yaml").write_text("prompt_context:\n  max_events: 30\n")
    assert load_team_config(tmp_path).prompt_context.max_events == 30


@pytest.mark.parametrize(
    ("block", "message"),
    [
        pytest.param("model: 3", "team_runtime.yaml model must be a mapping.", id="not-mapping"),
        pytest.param(
            "model: {backend: gpt}",
            "team_runtime.yaml model.backend: Invalid enum value 'gpt'; see docs/models.md.",
            id="unknown-backend",
        ),
        pytest.param(
            "model: {backend: command}",
            "team_runtime.yaml model.command must be a non-empty list of strings when "
            "model.backend is command (for example: [my-model-cli, --json]).",
            id="no-command",
        ),
        pytest.param(
            "model: {backend: command, command: []}",
            "team_runtime.yaml model.command must be a non-empty list of strings when "
            "model.backend is command (for example: [my-model-cli, --json]).",
            id="empty-command",
        ),
        pytest.param(
            "model: {command: ['']}",
            "team_runtime.yaml model.command must not hold empty strings.",
            id="empty-argument",
        ),
        pytest.param(
            "model: {timeout_seconds: 0}",
            "team_runtime.yaml model.timeout_seconds must be greater than 0.",
            id="zero-timeout",
        ),
        pytest.param(
            "model: {timeout_seconds: -5}",
            "team_runtime.yaml model.timeout_seconds must be greater than 0.",
            id="negative-timeout",
        ),
        pytest.param(
            "model: {attempts: 0}",
            "team_runtime.yaml model.attempts must be at least 1.",
            id="zero-attempts",
        ),
        pytest.param(
            "model: {comand: [x]}",
            "team_runtime.yaml model: Object contains unknown field `comand`; see docs/models.md.",
            id="typo",
        ),
        pytest.param(
            "model: {dry_run: {route: [planner, boss]}}",
            "team_runtime.yaml model.dry_run.route names unknown roles (boss); roles are: "
            "orchestrator, research, planner, designer, architect, developer, qa, "
            "version_controller.",
            id="unknown-route-role",
        ),
        pytest.param(
            "model: {timeout_seconds: soon}",
            "team_runtime.yaml model.timeout_seconds: Expected `float`, got `str`; "
            "see docs/models.md.",
            id="timeout-type",
        ),
    ],
)
def test_model_section_errors_name_the_field(block: str, message: str) -> None:
    with pytest.raises(ConfigError, match=f"^{re.escape(message)}$"):
        parse_team_config(block, "team_runtime.yaml")


def test_model_defaults_are_a_dry_run() -> None:
    model = parse_team_config(DEFAULT_CONFIG_TEXT, "team_runtime.yaml").model
    assert model.backend == "dry_run"
    assert model.dry_run.route == ["planner", "developer", "qa"]


# --- the backend section (docs/scaling.md) ------------------------------------------------------


def test_backend_defaults_to_the_file_store() -> None:
    backend = parse_team_config(DEFAULT_CONFIG_TEXT, "team_runtime.yaml").backend
    assert backend.kind == "file"
    assert (backend.nats.url, backend.nats.prefix, backend.nats.replicas) == (
        "nats://127.0.0.1:4222",
        "teams",
        1,
    )


def test_backend_nats_takes_a_list_of_cluster_urls() -> None:
    text = "backend: {nats: {url: 'nats://a:4222, nats://b:4222,nats://c:4222'}}"
    assert parse_team_config(text, "team_runtime.yaml").backend.nats.url.count("nats://") == 3


def test_backend_nats_is_read() -> None:
    text = "backend: {kind: nats, nats: {url: 'nats://10.0.0.5:4333', prefix: acme, replicas: 3}}"
    backend = parse_team_config(text, "team_runtime.yaml").backend
    assert (backend.kind, backend.nats.url, backend.nats.prefix, backend.nats.replicas) == (
        "nats",
        "nats://10.0.0.5:4333",
        "acme",
        3,
    )


@pytest.mark.parametrize(
    ("block", "message"),
    [
        pytest.param(
            "backend: {kind: redis}",
            "team_runtime.yaml backend.kind must be one of: file, nats.",
            id="kind",
        ),
        pytest.param(
            "backend: {kind: nats, nats: {url: 'http://host:4222'}}",
            "team_runtime.yaml backend.nats.url 'http://host:4222' is not a NATS URL; write it "
            "as nats://HOST:PORT (or tls://HOST:PORT; several, comma-separated, for a cluster).",
            id="url-scheme",
        ),
        pytest.param(
            "backend: {kind: nats, nats: {url: 'nats://'}}",
            "team_runtime.yaml backend.nats.url 'nats://' is not a NATS URL; write it as "
            "nats://HOST:PORT (or tls://HOST:PORT; several, comma-separated, for a cluster).",
            id="url-host",
        ),
        pytest.param(
            "backend: {kind: nats, nats: {prefix: 'a.b'}}",
            "team_runtime.yaml backend.nats.prefix must start with a letter and hold only "
            "letters, digits, '_' and '-' (at most 32 characters).",
            id="prefix",
        ),
        pytest.param(
            "backend: {nats: {replicas: 0}}",
            "team_runtime.yaml backend.nats.replicas must be between 1 and 5.",
            id="replicas",
        ),
        pytest.param(
            "backend: {kind: nats, nats: {ulr: 'nats://h:1'}}",
            "team_runtime.yaml backend.nats: Object contains unknown field `ulr`; "
            "see docs/scaling.md.",
            id="typo",
        ),
        pytest.param(
            "backend: nats",
            "team_runtime.yaml backend must be a mapping.",
            id="not-a-mapping",
        ),
    ],
)
def test_backend_section_errors_name_the_field(block: str, message: str) -> None:
    with pytest.raises(ConfigError, match=f"^{re.escape(message)}$"):
        parse_team_config(block, "team_runtime.yaml")


def test_a_password_in_the_nats_url_is_never_shown() -> None:
    text = "backend: {kind: nats, nats: {url: 'nats://bob:s3cret@10.0.0.5:4222'}}"
    settings = parse_team_config(text, "team_runtime.yaml").backend.nats
    assert settings.url == "nats://bob:s3cret@10.0.0.5:4222"  # used to connect
    assert settings.shown_url == "nats://***@10.0.0.5:4222"  # what errors and logs name
    with pytest.raises(ConfigError) as raised:
        parse_team_config("backend: {nats: {url: 'nats//bob:s3cret@h'}}", "team_runtime.yaml")
    assert "s3cret" not in str(raised.value)
