"""The workspace configuration file ``team_runtime.yaml`` and its ``prompt_context`` block."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import msgspec
import yaml

from teams_runtime.exceptions import ConfigError

__all__ = [
    "CONFIG_FILE_NAME",
    "DEFAULT_CONFIG_TEXT",
    "PromptContextConfig",
    "TeamConfig",
    "load_team_config",
    "parse_team_config",
    "prompt_context_from_mapping",
]

CONFIG_FILE_NAME = "team_runtime.yaml"

# What `teams-runtime init` writes. The prompt_context block is exactly the defaults.
DEFAULT_CONFIG_TEXT = """\
# teams-runtime workspace configuration.
# Read once when role services start: restart them after changing it.

# How much of a request's event history goes into each role's prompt.
# Rollback: set `enabled: false` and restart to put the full history back in prompts.
prompt_context:
  enabled: true
  recent_events: 8
  max_events: 16

# Other sections (the model backend, ...) go here.
"""

_PREFIX = "team_runtime.yaml prompt_context"


def _is_positive_int(value: object) -> bool:
    # bool is an int subclass: `true` must not pass as 1.
    return type(value) is int and value > 0


class PromptContextConfig(msgspec.Struct, frozen=True, kw_only=True):
    """How a request's events are projected into prompts (spec section 3).

    Constructing one directly is checked like the YAML block, in the same order and with the
    same messages, so a config with ``recent_events > max_events`` can never be used.
    """

    enabled: bool = True
    recent_events: int = 8
    max_events: int = 16

    def __post_init__(self) -> None:
        if type(self.enabled) is not bool:
            raise ConfigError(f"{_PREFIX}.enabled must be a boolean.")
        if not _is_positive_int(self.recent_events):
            raise ConfigError(f"{_PREFIX}.recent_events must be a positive integer.")
        if not _is_positive_int(self.max_events):
            raise ConfigError(f"{_PREFIX}.max_events must be a positive integer.")
        if self.max_events < self.recent_events:
            raise ConfigError(
                f"{_PREFIX}.max_events must be greater than or equal to recent_events."
            )


class TeamConfig(msgspec.Struct, frozen=True, kw_only=True):
    """Everything read from ``team_runtime.yaml`` when role services start."""

    prompt_context: PromptContextConfig = PromptContextConfig()


def prompt_context_from_mapping(block: object) -> PromptContextConfig:
    """Check a ``prompt_context`` block; missing, ``null`` or ``{}`` gives the defaults.

    Unknown keys inside the block are ignored (spec section 3).
    """
    if block is None:
        return PromptContextConfig()
    if not isinstance(block, Mapping):
        raise ConfigError(f"{_PREFIX} must be a mapping.")
    known = {key: block[key] for key in ("enabled", "recent_events", "max_events") if key in block}
    return PromptContextConfig(**known)


def parse_team_config(text: str, source: str) -> TeamConfig:
    """Parse the text of a ``team_runtime.yaml``; ``source`` names the file in errors."""
    try:
        document: Any = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(
            f"{source}: not valid YAML ({_yaml_problem(exc)}); fix the file and try again."
        ) from exc
    if document is None:  # an empty file: every section takes its defaults
        document = {}
    if not isinstance(document, Mapping):
        raise ConfigError(
            f"{source}: the top level must be a mapping of sections "
            f"(found {type(document).__name__})."
        )
    return TeamConfig(prompt_context=prompt_context_from_mapping(document.get("prompt_context")))


def load_team_config(workspace: str | Path) -> TeamConfig:
    """Read ``<workspace>/team_runtime.yaml``; a missing or unreadable file is a ``ConfigError``."""
    path = Path(workspace) / CONFIG_FILE_NAME
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise ConfigError(
            f"{path}: no such file; run `teams-runtime init {workspace}` to create one."
        ) from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot be read ({exc}).") from exc
    return parse_team_config(text, str(path))


def _yaml_problem(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or type(exc).__name__
    if mark is None:
        return str(problem)
    return f"{problem} at line {mark.line + 1}, column {mark.column + 1}"
