from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from teams_runtime import ConfigError, PromptContextConfig, load_team_config
from teams_runtime.codecs.config import DEFAULT_CONFIG_TEXT, EVENT_COUNT_LIMIT, parse_team_config

PREFIX = "team_runtime.yaml prompt_context"
TOP_LEVEL = (
    "prompt_context, model, roles, team, queue, backend, role_defaults, "
    "internal_agent_defaults, telemetry, sprint, ingress, allowed_guild_ids, research_defaults, "
    "actions"
)
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
        pytest.param("team: {max_hops: 3}\n", id="block-missing"),
        pytest.param("prompt_context:\n", id="block-null"),
        pytest.param("prompt_context: null\n", id="explicit-null"),
        pytest.param("prompt_context: {}\n", id="empty-mapping"),
        pytest.param("prompt_context:\n  recent_events:\n", id="recent-left-empty"),
        pytest.param("prompt_context: {recent_events: null, max_events: null}", id="counts-null"),
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
            "team_runtime.yaml model.comand is not a setting; did you mean command?",
            id="typo",
        ),
        pytest.param(
            "model: {dry_run: {route: [planner, boss]}}",
            "team_runtime.yaml model.dry_run.route names roles the team does not have (boss); "
            "roles are: orchestrator, research, planner, designer, architect, developer, qa, "
            "version_controller. List this team's roles in the route (the one `init` writes "
            "is for the default team), or remove it.",
            id="unknown-route-role",
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


# --- model.openai ---------------------------------------------------------------------------

OPENAI = "team_runtime.yaml model.openai"
SERVER = "base_url: http://127.0.0.1:11434/v1, model: qwen2.5-coder"


def test_the_openai_block_of_the_issue_is_read() -> None:
    text = """
model:
  backend: openai
  openai:
    base_url: http://127.0.0.1:11434/v1
    model: qwen2.5-coder
    api_key_env: OPENAI_API_KEY   # the variable's name; the key itself never sits in the file
    timeout_seconds: 300
    max_retries: 3                # 429 and 5xx, with backoff and Retry-After
"""
    model = parse_team_config(text, "team_runtime.yaml").model
    assert model.backend == "openai" and model.openai is not None
    assert (model.openai.base_url, model.openai.model) == (
        "http://127.0.0.1:11434/v1",
        "qwen2.5-coder",
    )
    assert (model.openai.api_key_env, model.openai.timeout_seconds, model.openai.max_retries) == (
        "OPENAI_API_KEY",
        300,
        3,
    )
    defaults = parse_team_config(f"model: {{backend: openai, openai: {{{SERVER}}}}}", "x").model
    assert defaults.openai is not None
    assert (defaults.openai.api_key_env, defaults.openai.max_retries) == ("", 3)
    assert defaults.openai.timeout_seconds == 300


@pytest.mark.parametrize(
    ("block", "message"),
    [
        pytest.param(
            "model: {backend: openai}",
            "team_runtime.yaml model.openai must be set when model.backend is openai (at least "
            "base_url and model); see docs/models.md.",
            id="block-missing",
        ),
        pytest.param(
            "model: {backend: openai, openai: {model: m}}",
            "team_runtime.yaml model.openai.base_url must be set; see docs/models.md.",
            id="base-url-missing",
        ),
        pytest.param(
            "model: {backend: openai, openai: {base_url: 'localhost:11434', model: m}}",
            f"{OPENAI}.base_url must be an http:// or https:// URL (for example: "
            "http://127.0.0.1:11434/v1).",
            id="base-url-no-scheme",
        ),
        pytest.param(
            "model: {openai: {base_url: 'https://me:secret@api.example/v1', model: m}}",
            f"{OPENAI}.base_url must not hold credentials; put the key in the variable named "
            "by api_key_env.",
            id="base-url-credentials",
        ),
        pytest.param(
            "model: {openai: {base_url: 'http://127.0.0.1:99999/v1', model: m}}",
            f"{OPENAI}.base_url has a port that is not a number from 1 to 65535.",
            id="base-url-port-too-big",
        ),
        pytest.param(
            "model: {openai: {base_url: 'http://127.0.0.1:0/v1', model: m}}",
            f"{OPENAI}.base_url has a port that is not a number from 1 to 65535.",
            id="base-url-port-zero",
        ),
        pytest.param(
            "model: {openai: {base_url: 'http://127.0.0.1:11434x/v1', model: m}}",
            f"{OPENAI}.base_url has a port that is not a number from 1 to 65535.",
            id="base-url-port-not-a-number",
        ),
        pytest.param(
            "model: {openai: {base_url: 'http://127.0.0.1:8080/v1?x=1#f', model: m}}",
            f"{OPENAI}.base_url must not hold a query or fragment (`?...`, `#...`); give the "
            "API's root, for example http://127.0.0.1:11434/v1.",
            id="base-url-query",
        ),
        pytest.param(
            "model: {openai: {base_url: 'http://exa mple.com/v1', model: m}}",
            f"{OPENAI}.base_url has a host that is not a name or an address (letters, digits, "
            "'-' and '.', or an IP address).",
            id="base-url-space-in-host",
        ),
        pytest.param(
            "model: {openai: {base_url: 'http://127.0.0.1%2f/v1', model: m}}",
            f"{OPENAI}.base_url has a host that is not a name or an address (letters, digits, "
            "'-' and '.', or an IP address).",
            id="base-url-escape-in-host",
        ),
        pytest.param(
            "model: {openai: {base_url: 'http://[abc]:80/v1', model: m}}",
            f"{OPENAI}.base_url has a host that is not a name or an address (letters, digits, "
            "'-' and '.', or an IP address).",
            id="base-url-no-address-in-brackets",  # its port is fine: not a port error
        ),
        pytest.param(
            "model: {openai: {base_url: 'http://::1]:80/v1', model: m}}",
            f"{OPENAI}.base_url has a host that is not a name or an address (letters, digits, "
            "'-' and '.', or an IP address).",
            id="base-url-ipv6-without-opening-bracket",
        ),
        pytest.param(
            "model: {openai: {base_url: 'http://[::1/v1', model: m}}",
            f"{OPENAI}.base_url has an IPv6 host without its closing bracket (write it as "
            "http://[::1]:8080/v1).",
            id="base-url-broken-ipv6",
        ),
        pytest.param(
            "model: {openai: {base_url: 'http://h/v1', model: ' '}}",
            f"{OPENAI}.model must be a non-empty model name.",
            id="model-empty",
        ),
        pytest.param(
            f"model: {{openai: {{{SERVER}, timeout_seconds: 0}}}}",
            f"{OPENAI}.timeout_seconds must be greater than 0.",
            id="timeout",
        ),
        pytest.param(
            f"model: {{openai: {{{SERVER}, max_retries: -1}}}}",
            f"{OPENAI}.max_retries must be between 0 and 100.",
            id="retries-negative",
        ),
        pytest.param(
            f"model: {{openai: {{{SERVER}, max_retries: true}}}}",
            "team_runtime.yaml model.openai.max_retries must be a whole number, not true or false.",
            id="retries-bool",
        ),
        pytest.param(
            f"model: {{openai: {{{SERVER}, api_key: x}}}}",
            "team_runtime.yaml model.openai.api_key is not a setting; did you mean api_key_env?",
            id="unknown-key",
        ),
    ],
)
def test_openai_errors_name_the_field(block: str, message: str) -> None:
    with pytest.raises(ConfigError, match=f"^{re.escape(message)}$"):
        parse_team_config(block, "team_runtime.yaml")


def test_a_key_pasted_as_api_key_env_is_refused_without_being_repeated() -> None:
    key = "sk-proj-AbC123xyz-0987"
    with pytest.raises(ConfigError) as caught:
        parse_team_config(
            f"model: {{openai: {{{SERVER}, api_key_env: {key}}}}}", "team_runtime.yaml"
        )
    assert str(caught.value) == (
        f"{OPENAI}.api_key_env must be the name of an environment variable (letters, digits "
        "and _, for example OPENAI_API_KEY), not the key itself."
    )
    assert key not in str(caught.value)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param(
            "prompt_context:\n  max_event: 10\n",
            "team_runtime.yaml prompt_context.max_event is not a setting; did you mean max_events?",
            id="prompt-context-typo",
        ),
        pytest.param(
            "modle:\n  backend: command\n",
            "team_runtime.yaml modle is not a setting; did you mean model?",
            id="top-level-typo",
        ),
        pytest.param(
            "model:\n  dry_run:\n    rout: [qa]\n",
            "team_runtime.yaml model.dry_run.rout is not a setting; did you mean route?",
            id="nested-typo",
        ),
        pytest.param(
            "queue: {lease_secs: 5}",
            "team_runtime.yaml queue.lease_secs is not a setting; did you mean lease_seconds?",
            id="queue-typo",
        ),
        pytest.param(
            "prompt_context: {colour: blue}",
            "team_runtime.yaml prompt_context.colour is not a setting; the settings in "
            "prompt_context are: enabled, recent_events, max_events, max_prompt_tokens, layout, "
            "step.",
            id="nothing-close-lists-the-section",
        ),
        pytest.param(
            "42: x",
            "team_runtime.yaml 42 is not a setting; the settings at the top level are: "
            f"{TOP_LEVEL}.",
            id="nothing-close-lists-the-top-level",
        ),
        pytest.param(
            "modle: {}\nprompt_context: {recent_events: 0}",
            "team_runtime.yaml modle is not a setting; did you mean model?",
            id="unknown-key-before-values",
        ),
    ],
)
def test_unknown_keys_anywhere_name_the_key_and_the_nearest_one(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=f"^{re.escape(message)}$"):
        parse_team_config(text, "team_runtime.yaml")


def test_user_keys_inside_env_are_not_settings() -> None:
    # `env` is a mapping of the user's own variable names, not a section: any name goes.
    text = "model: {env: {MODLE_HOME: /opt, anything: x}}"
    assert parse_team_config(text, "team_runtime.yaml").model.env["MODLE_HOME"] == "/opt"


def test_enabled_left_empty_is_still_an_error() -> None:
    # Only the counts default when empty: the rollback switch must be said out loud.
    with pytest.raises(ConfigError, match=f"^{re.escape(ENABLED)}$"):
        _config("prompt_context:\n  enabled:\n")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param(
            "prompt_context: {max_event: 1}",
            "cfg/team_runtime.yaml prompt_context.max_event is not a setting; "
            "did you mean max_events?",
            id="unknown-key",
        ),
        pytest.param(
            "prompt_context: {enabled: 1}",
            "cfg/team_runtime.yaml prompt_context.enabled must be a boolean.",
            id="value",
        ),
        pytest.param(
            "team: {max_hops: 0}",
            "cfg/team_runtime.yaml team.max_hops must be at least 1.",
            id="team",
        ),
        pytest.param(
            "team: {requests_in_flight: 0}",
            "cfg/team_runtime.yaml team.requests_in_flight must be at least 1.",
            id="requests-in-flight",
        ),
        pytest.param("[1]", "cfg/team_runtime.yaml: the top level must be a mapping", id="top"),
    ],
)
def test_errors_name_the_file_as_the_user_gave_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str, message: str
) -> None:
    (tmp_path / "cfg").mkdir()
    (tmp_path / "cfg" / "team_runtime.yaml").write_text(text)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match=f"^{re.escape(message)}"):
        load_team_config("cfg")


def test_missing_file_is_named_as_the_user_gave_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "cfg").mkdir()
    monkeypatch.chdir(tmp_path)
    message = "cfg/team_runtime.yaml: no such file; run `teams-runtime init cfg` to create one."
    with pytest.raises(ConfigError, match=f"^{re.escape(message)}$"):
        load_team_config("cfg")


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
            "team_runtime.yaml backend.kind 'redis' is not one of file, nats.",
            id="kind",
        ),
        pytest.param(
            "backend: {kind: nat}",
            "team_runtime.yaml backend.kind 'nat' is not one of file, nats; did you mean nats?",
            id="kind-typo",
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
            "backend: {kind: nats, nats: {url: 'nats://[abc]:4222'}}",
            "team_runtime.yaml backend.nats.url 'nats://[abc]:4222' is not a NATS URL; write it "
            "as nats://HOST:PORT (or tls://HOST:PORT; several, comma-separated, for a cluster).",
            id="url-ipv6-not-an-address",
        ),
        pytest.param(
            "backend: {kind: nats, nats: {url: 'nats://u:pw@h:99999'}}",
            "team_runtime.yaml backend.nats.url 'nats://***@h:99999' names port 99999, which no "
            "server can listen on; a port is between 1 and 65535.",
            id="url-port-too-high",
        ),
        pytest.param(
            "backend: {kind: nats, nats: {url: 'nats://h:4222,tls://h2:0'}}",
            "team_runtime.yaml backend.nats.url 'nats://h:4222,tls://h2:0' names port 0, which "
            "no server can listen on; a port is between 1 and 65535.",
            id="url-port-zero",
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
            "team_runtime.yaml backend.nats.ulr is not a setting; did you mean url?",
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


def test_every_url_of_a_cluster_is_shown_without_its_credentials() -> None:
    url = "nats://ann:pw1@a:4222, tls://bob:pw2@b:4222,nats://c:4222"
    settings = parse_team_config(f"backend: {{nats: {{url: '{url}'}}}}", "x").backend.nats
    assert settings.shown_url == "nats://***@a:4222, tls://***@b:4222,nats://c:4222"
    with pytest.raises(ConfigError) as raised:
        parse_team_config("backend: {nats: {url: 'nats://ann:pw1@a:1,bob:pw2@b'}}", "x")
    assert "'nats://***@a:1,***@b' is not a NATS URL" in str(raised.value)


# --- upper bounds: a number too large is an error naming it, never an overflow at run time -----

HUGE = "99999999999999999999999"  # more than a C ssize_t holds


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param(
            f"prompt_context: {{recent_events: {HUGE}, max_events: {HUGE}9}}",
            f"{PREFIX}.recent_events must be at most 1000000.",
            id="recent-huge",
        ),
        pytest.param(
            f"prompt_context: {{max_events: {HUGE}}}",
            f"{PREFIX}.max_events must be at most 1000000.",
            id="max-huge",
        ),
        pytest.param(
            "prompt_context: {recent_events: 8, max_events: 1000001}",
            f"{PREFIX}.max_events must be at most 1000000.",
            id="max-one-past-the-limit",
        ),
        pytest.param(
            "model: {timeout_seconds: 1.0e+999}",
            "team_runtime.yaml model.timeout_seconds must be at most 86400.",
            id="timeout-infinite",
        ),
        pytest.param(
            "model: {timeout_seconds: .inf}",
            "team_runtime.yaml model.timeout_seconds must be at most 86400.",
            id="timeout-inf",
        ),
        pytest.param(
            f"model: {{attempts: {HUGE}}}",
            "team_runtime.yaml model.attempts must be at most 100.",
            id="attempts",
        ),
        pytest.param(
            f"model: {{max_output_bytes: {HUGE}}}",
            "team_runtime.yaml model.max_output_bytes must be at most 1073741824.",
            id="max-output-bytes",
        ),
        pytest.param(
            f"team: {{max_hops: {HUGE}}}",
            "team_runtime.yaml team.max_hops must be at most 10000.",
            id="max-hops",
        ),
        pytest.param(
            f"team: {{requests_in_flight: {HUGE}}}",
            "team_runtime.yaml team.requests_in_flight must be at most 1024.",
            id="requests-in-flight",
        ),
        pytest.param(
            f"model: {{openai: {{{SERVER}, timeout_seconds: .inf}}}}",
            f"{OPENAI}.timeout_seconds must be at most 86400.",
            id="openai-timeout",
        ),
        pytest.param(
            f"queue: {{lease_seconds: {HUGE}}}",
            "team_runtime.yaml queue.lease_seconds must be between 1 and 86400.",
            id="lease",
        ),
        pytest.param(
            f"backend: {{nats: {{replicas: {HUGE}}}}}",
            "team_runtime.yaml backend.nats.replicas must be between 1 and 5.",
            id="replicas",
        ),
        pytest.param(
            "backend: {nats: {retry_seconds: .inf}}",
            "team_runtime.yaml backend.nats.connect_seconds must be in (0, 60] and "
            "retry_seconds in (0, 3600].",
            id="nats-retry",
        ),
    ],
)
def test_numbers_have_upper_bounds(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=f"^{re.escape(message)}$"):
        parse_team_config(text, "team_runtime.yaml")


def test_the_bounds_themselves_are_accepted() -> None:
    config = parse_team_config(
        "prompt_context: {recent_events: 1000000, max_events: 1000000}\n"
        "model: {timeout_seconds: 86400, attempts: 100, max_output_bytes: 1073741824}\n"
        "team: {max_hops: 10000, requests_in_flight: 1024}\n",
        "team_runtime.yaml",
    )
    assert (config.prompt_context.recent_events, config.prompt_context.max_events) == (
        EVENT_COUNT_LIMIT,
        EVENT_COUNT_LIMIT,
    )
    assert (config.model.attempts, config.team.max_hops) == (100, 10_000)
    assert config.team.requests_in_flight == 1024


def test_direct_construction_is_bounded_too() -> None:
    with pytest.raises(ConfigError, match=r"^team_runtime\.yaml prompt_context\.max_events must"):
        PromptContextConfig(recent_events=8, max_events=EVENT_COUNT_LIMIT + 1)


# --- a key written twice ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param(
            "prompt_context:\n  max_events: 20\nprompt_context:\n  enabled: false\n",
            "cfg/team_runtime.yaml prompt_context is written twice (lines 1 and 3); "
            "write each key once.",
            id="section-twice",
        ),
        pytest.param(
            "prompt_context: {recent_events: 2, recent_events: 3}\n",
            "cfg/team_runtime.yaml prompt_context.recent_events is written twice (both on "
            "line 1); write each key once.",
            id="setting-twice-in-a-flow-mapping",
        ),
        pytest.param(
            "model:\n  backend: command\n  command: [a]\n  env:\n    A: '1'\n    A: '2'\n",
            "cfg/team_runtime.yaml model.env.A is written twice (lines 5 and 6); "
            "write each key once.",
            id="a-user-key-twice",
        ),
        pytest.param(
            "backend:\n  nats:\n    url: nats://a:1\n    prefix: t\n    url: nats://b:1\n",
            "cfg/team_runtime.yaml backend.nats.url is written twice (lines 3 and 5); "
            "write each key once.",
            id="deep",
        ),
        pytest.param(
            "model:\n  command:\n    - {x: 1, x: 2}\n",
            "cfg/team_runtime.yaml model.command[0].x is written twice (both on line 3); "
            "write each key once.",
            id="inside-a-list",
        ),
        pytest.param(
            "model:\n  env:\n    <<: {A: '1'}\n    <<: {B: '2'}\n",
            "cfg/team_runtime.yaml model.env.<< is written twice (lines 3 and 4); "
            "write each key once.",
            id="merge-key-twice",
        ),
        pytest.param(
            "model: {env: {'1': a}}\nnull: 1\n~: 2\n",
            "cfg/team_runtime.yaml null is written twice (lines 2 and 3); write each key once.",
            id="null-twice",
        ),
    ],
)
def test_a_key_written_twice_is_an_error_naming_it_and_its_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str, message: str
) -> None:
    (tmp_path / "cfg").mkdir()
    (tmp_path / "cfg" / "team_runtime.yaml").write_text(text)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match=f"^{re.escape(message)}$"):
        load_team_config("cfg")


def test_merge_keys_still_work() -> None:
    # A mapping's own keys win over merged ones; of several merged, the first wins.
    text = (
        "model:\n"
        "  backend: command\n"
        "  command: [my-model]\n"
        "  env:\n"
        "    <<: [{A: a1, B: b1}, {B: b2, C: c2}]\n"
        "    A: own\n"
        "team:\n"
        "  <<: {max_hops: 3}\n"
    )
    config = parse_team_config(text, "team_runtime.yaml")
    assert config.model.env == {"A": "own", "B": "b1", "C": "c2"}
    assert config.team.max_hops == 3


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        pytest.param(
            f"team: {{max_hops: {'9' * 5000}}}\n", "a number with too many digits", id="long-int"
        ),
        pytest.param("model: {env: {A: 2026-13-45}}\n", "month must be in 1..12", id="date"),
    ],
)
def test_a_value_yaml_cannot_read_is_an_error_with_its_line(text: str, problem: str) -> None:
    with pytest.raises(
        ConfigError, match=rf"^x\.yaml: not valid YAML \({re.escape(problem)} at line 1, column"
    ):
        parse_team_config(text, "x.yaml")


# --- keys and the file named as the user wrote them ----------------------------------------------


@pytest.mark.parametrize(
    ("text", "written"),
    [
        pytest.param("null: 1\n", "null", id="null"),
        pytest.param("~: 1\n", "null", id="tilde"),
        pytest.param("true: 1\n", "true", id="true"),
        pytest.param("False: 1\n", "false", id="false"),
    ],
)
def test_a_key_that_is_not_a_string_is_named_as_yaml_writes_it(text: str, written: str) -> None:
    message = (
        f"team_runtime.yaml {written} is not a setting; the settings at the top level are: "
        f"{TOP_LEVEL}."
    )
    with pytest.raises(ConfigError, match=f"^{re.escape(message)}$"):
        parse_team_config(text, "team_runtime.yaml")
    with pytest.raises(ConfigError, match=rf"^x prompt_context\.{written} is not a setting"):
        parse_team_config(f"prompt_context:\n  {text}", "x")


def test_a_folder_named_like_the_config_is_said_to_be_a_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "cfg" / "team_runtime.yaml").mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    message = (
        "cfg/team_runtime.yaml: a folder, not a file; it must be the YAML file (move the folder "
        "away, then run `teams-runtime init cfg` to write a default one)."
    )
    with pytest.raises(ConfigError, match=f"^{re.escape(message)}$"):
        load_team_config("cfg")


def test_a_config_that_is_a_link_is_read_through_it(tmp_path: Path) -> None:
    shared = tmp_path / "shared.yaml"
    shared.write_text("prompt_context:\n  max_events: 30\n", encoding="utf-8")
    (tmp_path / "team_runtime.yaml").symlink_to(shared)  # the user's file, wherever it lives
    assert load_team_config(tmp_path).prompt_context.max_events == 30


def test_a_fifo_in_place_of_the_config_is_refused_without_blocking(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "cfg").mkdir()
    os.mkfifo(tmp_path / "cfg" / "team_runtime.yaml")  # no writer: a blocking open would hang
    monkeypatch.chdir(tmp_path)
    message = "cfg/team_runtime.yaml: not a regular file; it must be the YAML file."
    with pytest.raises(ConfigError, match=f"^{re.escape(message)}$"):
        load_team_config("cfg")
