"""The sections of upstream's ``team_runtime.yaml`` this runtime checks but does not use:
``sprint``, ``ingress``, ``allowed_guild_ids``, ``research_defaults``, ``actions``, and the
refused ``approval`` (spec section 3b).

A team moving over brings upstream's file as it is: each of these is checked for its shape
with upstream's own messages (so a file upstream refuses is refused here too), kept as written
on ``TeamConfig``, and otherwise left alone; ``team_config.section_notes`` says so, one line
a section.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from teams_runtime.codecs.formats import JsonObject
from teams_runtime.exceptions import ConfigError

__all__ = [
    "UNUSED_SECTIONS",
    "check_actions",
    "check_allowed_guild_ids",
    "check_approval",
    "check_ingress",
    "check_research_defaults",
    "check_sprint",
]

_FILE = "team_runtime.yaml"
_CUTOFF_TIME = re.compile(r"(?:[01][0-9]|2[0-3]):[0-5][0-9]")
_SPRINT_CHOICES = (
    ("mode", ("hybrid", "rolling", "wall_clock"), "must be hybrid, rolling, or wall_clock"),
    ("start_mode", ("auto", "manual_daily"), "must be auto or manual_daily"),
)

# Each section that is checked and kept but drives nothing here, with why (for `config`).
UNUSED_SECTIONS = {
    "sprint": "teams-runtime runs no sprints",
    "ingress": "requests come in through `submit` and `import`, not from chat",
    "allowed_guild_ids": "teams-runtime answers no chat server",
    "research_defaults": "the research role is prompted without them",
    "actions": "teams-runtime runs no actions",
}


def _mapping(block: object, name: str) -> JsonObject | None:
    """``block`` as a dict (``None`` when it is absent or empty); not a mapping: an error."""
    if block is None:
        return None
    if not isinstance(block, Mapping):
        raise ConfigError(f"{_FILE} {name} must be a mapping.")
    return dict(block)


def check_sprint(block: object) -> JsonObject | None:
    """Check ``sprint`` as upstream does (in its order, with its messages); absent: ``None``."""
    sprint = _mapping(block, "sprint")
    if sprint is None:
        return None
    if sprint.get("id") in (None, ""):
        raise ConfigError(f"{_FILE} must define sprint.id.")
    interval = sprint.get("interval_minutes")
    if interval is not None and (type(interval) is not int or interval < 1):
        raise ConfigError(f"{_FILE} sprint.interval_minutes must be a positive integer.")
    for key, choices, problem in _SPRINT_CHOICES:
        if sprint.get(key) is not None and sprint[key] not in choices:
            raise ConfigError(f"{_FILE} sprint.{key} {problem}.")
    cutoff = sprint.get("cutoff_time")
    # Unquoted, YAML 1.1 reads 22:00 as the number 1320: only text can be HH:MM.
    if cutoff is not None and not (isinstance(cutoff, str) and _CUTOFF_TIME.fullmatch(cutoff)):
        raise ConfigError(f"{_FILE} sprint.cutoff_time must use HH:MM 24-hour format.")
    if sprint.get("overlap_policy") not in (None, "no_overlap"):
        raise ConfigError(f"{_FILE} sprint.overlap_policy currently supports only no_overlap.")
    return sprint


def check_ingress(block: object) -> JsonObject | None:
    """Check ``ingress``: a mapping whose ``dm`` and ``mentions`` are booleans."""
    ingress = _mapping(block, "ingress")
    for key in ("dm", "mentions"):
        if ingress is not None and key in ingress and type(ingress[key]) is not bool:
            raise ConfigError(f"{_FILE} ingress.{key} must be a boolean.")
    return ingress


def check_approval(document: Mapping[str, Any]) -> None:
    """Refuse ``approval``, which upstream no longer supports either."""
    if "approval" in document:
        raise ConfigError(f"{_FILE} approval is no longer supported.")


def check_research_defaults(block: object) -> JsonObject | None:
    """Check ``research_defaults``: a mapping."""
    return _mapping(block, "research_defaults")


def _is_command(value: object) -> bool:
    return (
        isinstance(value, list)
        and bool(value)
        and all(isinstance(part, str) and part for part in value)
    )


def check_actions(block: object) -> JsonObject | None:
    """Check ``actions``: a mapping of names to a command list (written as the list itself,
    or as a mapping's ``command``)."""
    actions = _mapping(block, "actions")
    for name, action in (actions or {}).items():
        command = action.get("command") if isinstance(action, Mapping) else action
        if not _is_command(command):
            raise ConfigError(f"Action '{name}' must declare a non-empty string command list.")
    return actions


def check_allowed_guild_ids(block: object) -> list[Any] | None:
    """Check ``allowed_guild_ids``: a list."""
    if block is not None and not isinstance(block, list):
        raise ConfigError(f"{_FILE} allowed_guild_ids must be a list.")
    return block
