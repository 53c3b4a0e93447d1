"""Upstream's team_runtime.yaml (spec section 3b): its scaffold loads as it is, each of its
sections is checked with upstream's messages in upstream's order, and unknown keys elsewhere
stay errors."""

from __future__ import annotations

import re

import pytest

from teams_runtime import ConfigError
from teams_runtime.codecs.config import RateCard, TeamConfig, parse_team_config, section_notes

from ...support.fixtures import fixture_text

SCAFFOLD = fixture_text("upstream_shaped_team_runtime.yaml")


def _parse(text: str) -> TeamConfig:
    return parse_team_config(text, "team_runtime.yaml")


def _fails(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=f"^{re.escape(message)}$"):
        _parse(text)


def test_the_upstream_scaffold_loads_verbatim() -> None:
    config = _parse(SCAFFOLD)
    assert config.sprint is not None and config.sprint["id"] == "sprint-42"
    assert config.ingress == {"dm": True, "mentions": True}
    assert config.allowed_guild_ids == []
    assert config.research_defaults is not None
    assert config.research_defaults["completion_timeout"] == 300
    assert config.actions == {}
    assert config.telemetry.enabled is True and config.telemetry.rate_cards == {}
    assert config.role_defaults["research"].reasoning == "xhigh"
    assert config.internal_agent_defaults["version_controller"].model == "local-small"


def test_its_role_defaults_give_each_role_its_model() -> None:
    config = _parse(SCAFFOLD)
    # No model section: the dry run, whose model name is the command's `{model}` slot.
    chosen = {
        role: (config.model_for(role).name, config.model_for(role).reasoning)
        for role in config.roles
    }
    assert chosen == {
        "orchestrator": ("gpt-5.5", "medium"),
        "research": ("gpt-5.5", "xhigh"),
        "planner": ("gpt-5.5", "xhigh"),
        "designer": ("gpt-5.5", "medium"),
        "architect": ("gpt-5.5", "xhigh"),
        "developer": ("gpt-5.5", "high"),
        "qa": ("gpt-5.5", "medium"),
        "version_controller": ("local-small", "low"),
    }


def test_an_absent_version_controller_inherits_the_orchestrators_model() -> None:
    text = SCAFFOLD.replace(
        '  version_controller:\n    model: "local-small"\n    reasoning: "low"\n', ""
    )
    assert "version_controller" not in _parse(text).internal_agent_defaults
    model = _parse(text).model_for("version_controller")
    assert (model.name, model.reasoning) == ("gpt-5.5", "medium")


def test_config_says_which_sections_are_checked_but_not_used() -> None:
    notes = section_notes(_parse(SCAFFOLD))
    named = [re.match(r"team_runtime\.yaml (\S+)", note).group(1) for note in notes]  # type: ignore[union-attr]
    assert named == [
        "sprint",
        "ingress",
        "allowed_guild_ids",
        "research_defaults",
        "actions",
        "internal_agent_defaults.parser",
    ]
    assert all("checked but not used" in note for note in notes)
    assert section_notes(_parse("model: {}")) == []


LOCAL_SERVER = (
    "model: {backend: openai, openai: {base_url: 'http://127.0.0.1:8080/v1', model: local}}\n"
)


def test_config_names_the_roles_whose_model_name_role_defaults_gives() -> None:
    """Moved to a local server, the scaffold's role_defaults still name hosted models: each
    role asks the server for gpt-5.5 or local-small, not the model section's name."""
    notes = section_notes(_parse(SCAFFOLD + LOCAL_SERVER))
    assert notes[-1] == (
        "team_runtime.yaml role_defaults gives the model name of orchestrator, research, "
        "planner, designer, architect, developer and qa (gpt-5.5); version_controller "
        "(local-small, from internal_agent_defaults): that is the model each asks for, not the "
        "model section's 'local'; set roles.<role>.model to ask for another."
    )
    own = "roles: {qa: {model: {openai: {model: small}}}}\n"  # qa's own name wins: not listed
    (note,) = [n for n in section_notes(_parse(SCAFFOLD + LOCAL_SERVER + own)) if "gives" in n]
    assert "architect and developer (gpt-5.5)" in note and "qa" not in note
    assert section_notes(_parse(LOCAL_SERVER)) == []  # no role_defaults: nothing to say
    assert not any("gives" in n for n in section_notes(_parse(SCAFFOLD)))  # dry run: no name


SPRINT = "sprint: {id: s1, %s}"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param(
            "sprint: {mode: hybrid}", "team_runtime.yaml must define sprint.id.", id="no-id"
        ),
        pytest.param("sprint: {id: ''}", "team_runtime.yaml must define sprint.id.", id="empty-id"),
        pytest.param(
            SPRINT % "interval_minutes: 0",
            "team_runtime.yaml sprint.interval_minutes must be a positive integer.",
            id="interval-zero",
        ),
        pytest.param(
            SPRINT % "interval_minutes: '180'",
            "team_runtime.yaml sprint.interval_minutes must be a positive integer.",
            id="interval-text",
        ),
        pytest.param(
            SPRINT % "mode: daily",
            "team_runtime.yaml sprint.mode must be hybrid, rolling, or wall_clock.",
            id="mode",
        ),
        pytest.param(
            SPRINT % "start_mode: manual",
            "team_runtime.yaml sprint.start_mode must be auto or manual_daily.",
            id="start-mode",
        ),
        pytest.param(
            SPRINT % "cutoff_time: '24:00'",
            "team_runtime.yaml sprint.cutoff_time must use HH:MM 24-hour format.",
            id="cutoff-24",
        ),
        pytest.param(
            SPRINT % "cutoff_time: 22:00",  # unquoted, YAML 1.1 reads the number 1320
            "team_runtime.yaml sprint.cutoff_time must use HH:MM 24-hour format.",
            id="cutoff-unquoted",
        ),
        pytest.param(
            SPRINT % "overlap_policy: overlap",
            "team_runtime.yaml sprint.overlap_policy currently supports only no_overlap.",
            id="overlap",
        ),
        pytest.param(
            "ingress: {dm: 'yes'}", "team_runtime.yaml ingress.dm must be a boolean.", id="dm"
        ),
        pytest.param(
            "approval: {}", "team_runtime.yaml approval is no longer supported.", id="approval"
        ),
        pytest.param(
            "approval:", "team_runtime.yaml approval is no longer supported.", id="approval-null"
        ),
        pytest.param(
            "role_defaults: []", "team_runtime.yaml role_defaults must be a mapping.", id="rd"
        ),
        pytest.param(
            "internal_agent_defaults: 3",
            "team_runtime.yaml internal_agent_defaults must be a mapping.",
            id="iad",
        ),
        pytest.param(
            "internal_agent_defaults: {parser: low}",
            "team_runtime.yaml internal_agent_defaults.parser must be a mapping.",
            id="iad-entry",
        ),
        pytest.param(
            "research_defaults: [x]",
            "team_runtime.yaml research_defaults must be a mapping.",
            id="research",
        ),
        pytest.param("telemetry: on", "team_runtime.yaml telemetry must be a mapping.", id="tel"),
        pytest.param(
            "telemetry: {enabled: 1}",
            "team_runtime.yaml telemetry.enabled must be a boolean.",
            id="tel-enabled",
        ),
        pytest.param(
            "telemetry: {rate_cards: []}",
            "team_runtime.yaml telemetry.rate_cards must be a mapping.",
            id="tel-cards",
        ),
        pytest.param("actions: []", "team_runtime.yaml actions must be a mapping.", id="actions"),
        pytest.param(
            "actions: {test: {command: []}}",
            "Action 'test' must declare a non-empty string command list.",
            id="action-empty",
        ),
        pytest.param(
            "actions: {test: {command: [pytest, 3]}}",
            "Action 'test' must declare a non-empty string command list.",
            id="action-not-strings",
        ),
        pytest.param(
            "allowed_guild_ids: 123",
            "team_runtime.yaml allowed_guild_ids must be a list.",
            id="guilds",
        ),
    ],
)
def test_upstream_sections_have_upstreams_messages(text: str, message: str) -> None:
    _fails(text, message)


def test_upstream_sections_are_checked_in_upstreams_order() -> None:
    # Every section wrong at once: each fix reveals the next, in upstream's order.
    broken = {
        "sprint": "sprint: {}",
        "ingress": "ingress: {mentions: 1}",
        "approval": "approval: {}",
        "role_defaults": "role_defaults: 1",
        "internal_agent_defaults": "internal_agent_defaults: 1",
        "research_defaults": "research_defaults: 1",
        "prompt_context": "prompt_context: 1",
        "telemetry": "telemetry: 1",
        "actions": "actions: 1",
        "allowed_guild_ids": "allowed_guild_ids: 1",
    }
    seen = []
    for section in list(broken):
        with pytest.raises(ConfigError) as caught:
            _parse("\n".join(broken.values()))
        seen.append(section)
        assert section.replace("sprint", "sprint.id") in str(caught.value)
        del broken[section]
    assert seen[0] == "sprint" and seen[-1] == "allowed_guild_ids"


def test_actions_are_read_as_upstream_writes_them() -> None:
    config = _parse("actions:\n  test: {command: [pytest, -q]}\n  lint: [ruff, check]\n")
    assert config.actions == {"test": {"command": ["pytest", "-q"]}, "lint": ["ruff", "check"]}


def test_rate_cards_are_read() -> None:
    config = _parse(
        "telemetry:\n  rate_cards:\n"
        "    openai/gpt-5.5: {input_per_million_usd: 1.25, output_per_million_usd: 10,"
        " cached_input_per_million_usd: 0.125}\n"
        "    local/qwen: {per_invocation_usd: 0}\n"
    )
    assert config.telemetry.rate_cards == {
        "openai/gpt-5.5": RateCard(
            input_per_million_usd=1.25,
            cached_input_per_million_usd=0.125,
            output_per_million_usd=10.0,
        ),
        "local/qwen": RateCard(per_invocation_usd=0.0),
    }


@pytest.mark.parametrize("block", ["telemetry:", "telemetry: {}", "telemetry: {rate_cards: }"])
def test_empty_telemetry_gives_the_defaults(block: str) -> None:
    telemetry = _parse(block).telemetry
    assert telemetry.enabled is True and telemetry.rate_cards == {}


CARDS = "team_runtime.yaml telemetry.rate_cards"


@pytest.mark.parametrize(
    ("card", "message"),
    [
        pytest.param(
            "gpt-5.5: {per_invocation_usd: 1}",
            f"{CARDS}.gpt-5.5 must use an exact provider/model key.",
            id="no-provider",
        ),
        pytest.param(
            "'openai/*': {per_invocation_usd: 1}",
            f"{CARDS}.openai/* must use an exact provider/model key.",
            id="wildcard",
        ),
        pytest.param(
            "'': {per_invocation_usd: 1}",
            f"{CARDS}.<empty> must use an exact provider/model key.",
            id="empty-key",
        ),
        pytest.param(
            "a/b: {input_per_million_usd: 1, output_per_million_usd: 1, per_invocation_usd: 1}",
            f"{CARDS}.a/b cannot mix token and per-invocation pricing.",
            id="mixed",
        ),
        pytest.param(
            "a/b: {}", f"{CARDS}.a/b must define token rates or per_invocation_usd.", id="none"
        ),
        pytest.param(
            "a/b: {input_per_million_usd: 1}",
            f"{CARDS}.a/b token pricing requires input and output rates.",
            id="input-only",
        ),
        pytest.param(
            "a/b: {per_invocation_usd: -1}",
            f"{CARDS}.a/b.per_invocation_usd must be a non-negative finite number.",
            id="negative",
        ),
        pytest.param(
            "a/b: {input_per_million_usd: .inf, output_per_million_usd: 1}",
            f"{CARDS}.a/b.input_per_million_usd must be a non-negative finite number.",
            id="infinite",
        ),
        pytest.param(
            "a/b: {per_invocation_usd: true}",
            f"{CARDS}.a/b.per_invocation_usd must be a non-negative finite number.",
            id="bool",
        ),
        pytest.param(
            "a/b: {per_invocation: 1}",
            f"{CARDS}.a/b.per_invocation is not a setting; did you mean per_invocation_usd?",
            id="typo",
        ),
    ],
)
def test_bad_rate_cards_have_upstreams_messages(card: str, message: str) -> None:
    _fails(f"telemetry:\n  rate_cards:\n    {card}\n", message)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param(
            "role_defaults: {planer: {model: m}}",
            "team_runtime.yaml role_defaults.planer is not a role; did you mean planner?",
            id="role-typo",
        ),
        pytest.param(
            "role_defaults: {planner: {modle: m}}",
            "team_runtime.yaml role_defaults.planner.modle is not a setting; did you mean model?",
            id="key-typo",
        ),
        pytest.param(
            "role_defaults: {planner: {model: 5}}",
            "team_runtime.yaml role_defaults.planner.model must be text (a model name, for "
            "example: gpt-5.5), not a whole number.",
            id="model-number",
        ),
        pytest.param(
            "internal_agent_defaults: {versioncontroller: {model: m}}",
            "team_runtime.yaml internal_agent_defaults.versioncontroller is not an agent; did "
            "you mean version_controller?",
            id="agent-typo",
        ),
        pytest.param(
            "telemetry: {enabld: true}",
            "team_runtime.yaml telemetry.enabld is not a setting; did you mean enabled?",
            id="telemetry-typo",
        ),
        pytest.param(
            "sprnt: {id: s}",
            "team_runtime.yaml sprnt is not a setting; did you mean sprint?",
            id="top-level-typo",
        ),
    ],
)
def test_unknown_keys_elsewhere_stay_errors(text: str, message: str) -> None:
    _fails(text, message)


def test_unknown_keys_inside_upstreams_unused_sections_are_its_own() -> None:
    # sprint's ingress_mode, discovery_scope... are upstream's: kept, not judged here.
    config = _parse("sprint: {id: s, anything: 1}\nresearch_defaults: {whatever: [1]}")
    assert config.sprint == {"id": "s", "anything": 1}
