"""``model.tools``: off by default, global or per role as every ``model`` key, checked."""

from __future__ import annotations

import pytest

from teams_runtime.codecs.config import ToolsConfig, parse_team_config
from teams_runtime.exceptions import ConfigError

_OPENAI = "model:\n  backend: openai\n  openai: {base_url: 'http://127.0.0.1:1/v1', model: m}\n"


def _tools(text: str, role: str = "qa") -> ToolsConfig:
    return parse_team_config(text, "team_runtime.yaml").model_for(role).tools


def test_no_tools_unless_asked_for() -> None:
    assert _tools(_OPENAI) == ToolsConfig(read_events=False, max_rounds=4, mcp=[])
    assert not _tools(_OPENAI).enabled


def test_tools_per_role_over_the_global_ones() -> None:
    text = (
        _OPENAI
        + "  tools: {read_events: true, max_rounds: 3}\n"
        + "roles:\n  qa:\n    model:\n      tools: {max_rounds: 1}\n"
    )
    assert _tools(text, "qa") == ToolsConfig(read_events=True, max_rounds=1)
    assert _tools(text, "developer") == ToolsConfig(read_events=True, max_rounds=3)


@pytest.mark.parametrize(
    ("tools", "match"),
    [
        pytest.param("{max_rounds: 0}", r"max_rounds must be at least 1\.", id="no-rounds"),
        pytest.param("{max_rounds: 65}", r"max_rounds must be at most 64\.", id="many-rounds"),
        pytest.param("{mcp: [{name: fs, tools: [read]}]}", r"needs either command", id="no-server"),
        pytest.param("{mcp: [{name: fs, command: [x]}]}", r"tools must list", id="no-allow-list"),
        pytest.param(
            "{mcp: [{name: fs, url: 'ftp://x', tools: [read]}]}", r"url must start", id="bad-url"
        ),
        pytest.param("{read_event: true}", r"read_event", id="unknown-key"),
    ],
)
def test_bad_tools_settings_are_refused(tools: str, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        _tools(_OPENAI + f"  tools: {tools}\n")


def test_tools_are_for_the_openai_backend() -> None:
    text = "model:\n  backend: command\n  command: [x]\n  tools: {read_events: true}\n"
    with pytest.raises(ConfigError, match=r"model\.tools is for the openai backend"):
        _tools(text)


def test_a_persons_role_ignores_the_teams_tools() -> None:
    text = _OPENAI + "  tools: {read_events: true}\nroles:\n  qa:\n    model: {backend: human}\n"
    assert _tools(text, "qa").read_events  # taken, and unused: a person calls no tool
