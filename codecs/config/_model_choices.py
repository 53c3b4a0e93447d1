"""Upstream's ``role_defaults`` and ``internal_agent_defaults``: a model name and a reasoning
level per role (spec section 3b), which ``roles_section`` lays over the ``model`` section.

Only what is written applies: a role left out, or a key left out or empty, takes its model
from ``model`` (upstream's own defaults, gpt-5.5 and its levels, are not invented here: they
would send a model name a local server has never heard of).
"""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

from teams_runtime.codecs.config._value_messages import kind_of, nearest
from teams_runtime.codecs.roles import PUBLIC_ROLES
from teams_runtime.exceptions import ConfigError

__all__ = [
    "INTERNAL_AGENTS",
    "ModelChoice",
    "internal_agent_defaults_from_block",
    "role_defaults_from_block",
]

_FILE = "team_runtime.yaml"
# Upstream's internal agents; only version_controller is a role of this team.
INTERNAL_AGENTS = ("parser", "sourcer", "version_controller")
_KEYS = ("model", "reasoning")
_EXAMPLES = {"model": "a model name, for example: gpt-5.5", "reasoning": "for example: medium"}


class ModelChoice(msgspec.Struct, frozen=True, kw_only=True):
    """One role's ``{model, reasoning}``: its model name and reasoning level ("" = not set)."""

    model: str = ""
    reasoning: str = ""


def _entry(block: object, path: str) -> ModelChoice:
    if not isinstance(block, Mapping):
        raise ConfigError(f"{_FILE} {path} must be a mapping.")
    for key in block:
        if key not in _KEYS:
            close = nearest(str(key), list(_KEYS))
            hint = f"did you mean {close}?" if close else f"the settings are: {', '.join(_KEYS)}."
            raise ConfigError(f"{_FILE} {path}.{key} is not a setting; {hint}")
    given: dict[str, str] = {}
    for key in _KEYS:
        value = block.get(key)
        if value is None:
            continue
        if not isinstance(value, str) or value != value.strip():
            found = kind_of(value) if not isinstance(value, str) else "text with spaces around it"
            raise ConfigError(f"{_FILE} {path}.{key} must be text ({_EXAMPLES[key]}), not {found}.")
        given[key] = value
    return ModelChoice(**given)


def _entries(
    block: object, section: str, names: tuple[str, ...], kind: str
) -> dict[str, ModelChoice]:
    if block is None:
        return {}
    if not isinstance(block, Mapping):
        raise ConfigError(f"{_FILE} {section} must be a mapping.")
    choices: dict[str, ModelChoice] = {}
    for name, entry in block.items():
        if name not in names:
            close = nearest(str(name), list(names))
            hint = f"did you mean {close}?" if close else f"the {kind}s are: {', '.join(names)}."
            article = "an" if kind[0] in "aeiou" else "a"
            raise ConfigError(f"{_FILE} {section}.{name} is not {article} {kind}; {hint}")
        choices[name] = _entry(entry, f"{section}.{name}")
    return choices


def role_defaults_from_block(block: object) -> dict[str, ModelChoice]:
    """Check ``role_defaults``: ``{role: {model, reasoning}}`` for the team's public roles."""
    return _entries(block, "role_defaults", PUBLIC_ROLES, "role")


def internal_agent_defaults_from_block(block: object) -> dict[str, ModelChoice]:
    """Check ``internal_agent_defaults``: ``{agent: {model, reasoning}}`` for upstream's
    internal agents (``parser``, ``sourcer``, ``version_controller``)."""
    return _entries(block, "internal_agent_defaults", INTERNAL_AGENTS, "agent")
