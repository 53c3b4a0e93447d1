"""The names of the team's roles (what each is told to do is prompt text: ``prompts``)."""

from __future__ import annotations

__all__ = ["PUBLIC_ROLES", "ROLES", "check_role"]

# Public roles take work from envelopes; version_controller is internal (commits work).
PUBLIC_ROLES = (
    "orchestrator",
    "research",
    "planner",
    "designer",
    "architect",
    "developer",
    "qa",
)
ROLES = (*PUBLIC_ROLES, "version_controller")


def check_role(value: str) -> str:
    """Return ``value`` if it names a role of the team, else raise ``ValueError``."""
    if value not in ROLES:
        raise ValueError(f"unknown role {value!r}; roles are: {', '.join(ROLES)}")
    return value
