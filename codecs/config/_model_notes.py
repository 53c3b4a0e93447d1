"""The note ``config`` prints about upstream's ``role_defaults``: which roles take their model
name from it (``internal_agent_defaults`` for the version controller), and which name.

Upstream's scaffold names hosted models (``gpt-5.5``, ``gpt-5.4-mini``); a team moved over
to a local server would ask that server for them, role by role, without a word in the
``model`` section saying so. One line on ``config``'s stderr makes it visible.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from teams_runtime.codecs.config._cast import Cast
from teams_runtime.codecs.config._model_choices import ModelChoice
from teams_runtime.codecs.config._model_section import ModelConfig
from teams_runtime.codecs.config._roles_section import upstream_choice

__all__ = ["role_defaults_note"]


class TeamModels(Protocol):
    """What the note reads of a ``TeamConfig`` (which imports this module)."""

    @property
    def model(self) -> ModelConfig: ...

    @property
    def role_defaults(self) -> Mapping[str, ModelChoice]: ...

    @property
    def internal_agent_defaults(self) -> Mapping[str, ModelChoice]: ...

    @property
    def cast(self) -> Cast: ...

    def model_for(self, role: str) -> ModelConfig: ...


def _name_of(model: ModelConfig) -> str:
    """The model name the role's backend uses: sent to the server, or the command's."""
    if model.backend == "openai" and model.openai is not None:
        return model.openai.model
    return model.name if model.backend == "command" else ""


def role_defaults_note(config: TeamModels) -> str | None:
    """One line naming the roles whose model name comes from upstream's defaults (``None``
    when none does: no entry, an entry overridden by ``roles.<role>.model``, or a backend that
    names no model)."""
    by_name: dict[tuple[str, str], list[str]] = {}
    for role in config.cast.names:
        choice, source = upstream_choice(role, config.role_defaults, config.internal_agent_defaults)
        name = _name_of(config.model_for(role))
        if choice is not None and choice.model and name == choice.model:
            section = source.split(".", 1)[0]
            by_name.setdefault((name, section), []).append(role)
    if not by_name:
        return None
    parts = []
    for (name, section), roles in by_name.items():
        came = "" if section == "role_defaults" else f", from {section}"
        parts.append(f"{_listed(roles)} ({name}{came})")
    base = _name_of(config.model)
    instead = f", not the model section's {base!r}" if base else ""
    return (
        f"team_runtime.yaml role_defaults gives the model name of {'; '.join(parts)}: that is "
        f"the model each asks for{instead}; set roles.<role>.model to ask for another."
    )


def _listed(roles: list[str]) -> str:
    return roles[0] if len(roles) == 1 else f"{', '.join(roles[:-1])} and {roles[-1]}"
