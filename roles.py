"""The team's roles and what each one is told to do."""

from __future__ import annotations

__all__ = ["PUBLIC_ROLES", "ROLES", "ROLE_RULES", "check_role"]

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

ROLE_RULES = {
    "orchestrator": (
        "Decide which role should act next and why; do not do the specialist work yourself.",
        "Close the request (empty next_role) only when its scope is done or cannot be done.",
    ),
    "research": (
        "Look for facts the team is missing; cite where each fact comes from.",
        "Prefer local sources already checked over new external research.",
    ),
    "planner": (
        "Break the scope into ordered, testable steps with a clear owner role for each.",
        "Name risks and open questions in `insights`.",
    ),
    "designer": (
        "Describe the user-facing behaviour and states; keep it consistent with the plan.",
    ),
    "architect": (
        "Choose the structure and interfaces; record decisions and their reasons in `proposals`.",
    ),
    "developer": (
        "Implement the planned step; list every file you changed in `artifacts`.",
        "Hand over to qa when the change is ready to be checked.",
    ),
    "qa": (
        "Check the latest work against the scope; report each failure with how to reproduce it.",
        "Send the work back (next_role developer) when a check fails.",
    ),
    "version_controller": (
        "Commit exactly the paths in `version_control`; never rewrite history.",
        "Report `commit_status` honestly: committed, no_changes, failed or no_repo.",
    ),
}


def check_role(value: str) -> str:
    """Return ``value`` if it names a role of the team, else raise ``ValueError``."""
    if value not in ROLES:
        raise ValueError(f"unknown role {value!r}; roles are: {', '.join(ROLES)}")
    return value
