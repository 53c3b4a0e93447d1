"""Role names: the eight built-in roles (the default cast) and their rules, what a role's name
may be, and what a role may name as its ``next_role``.

A team may declare a cast of its own in ``team_runtime.yaml`` (``team.roles`` and
``roles.<name>``, read by ``codecs.config``); the whole runtime takes it from there
(``TeamConfig.cast``). The constants here are the team a workspace has without one.
"""

from __future__ import annotations

import unicodedata
from typing import Literal, get_args

import msgspec

from teams_runtime.codecs.request_ids import check_request_id
from teams_runtime.exceptions import UnsafeRequestIdError

__all__ = [
    "BUILT_IN_PROMPT_KINDS",
    "BUILT_IN_RULES",
    "DEFAULT_NEXT_ROLES",
    "MAX_ROLE_NAME_BYTES",
    "PUBLIC_ROLES",
    "RESERVED_ROLE_NAMES",
    "ROLES",
    "ROLE_PROMPT_KINDS",
    "NextRoles",
    "RolePromptKind",
    "check_role",
    "check_role_name",
    "role_name_problem",
]

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

# What each built-in role is told beside the rules every role gets: its "Role rules" lines. A
# team may write its own (`roles.<name>.rules`); these are the default.
BUILT_IN_RULES: dict[str, tuple[str, ...]] = {
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

# The prompt a role gets for new work, named as the logs name it (`roles.<name>.prompt_kind`).
RolePromptKind = Literal["role_task", "research_decision", "version_control"]
ROLE_PROMPT_KINDS: tuple[str, ...] = get_args(RolePromptKind)
BUILT_IN_PROMPT_KINDS: dict[str, RolePromptKind] = {
    "research": "research_decision",
    "version_controller": "version_control",
}

# Folders of the file queue that sit beside the roles' own (`queue/<role>/`).
RESERVED_ROLE_NAMES = ("claimed", "deferred", "rejected", "workers")
# A role's name goes into every log line, file names (with a request id of up to 200 bytes),
# NATS subjects and consumer names: short keeps all of them within their limits.
MAX_ROLE_NAME_BYTES = 32


def role_name_problem(value: object) -> str | None:
    """Why ``value`` cannot name a role (a phrase for "... is not a role name: <it>"), or
    ``None`` when it can.

    A role name is a safe request id (letters and digits of any script, ``-``, ``_``, ``.``,
    ``:``; no ``..``) in NFC, lower case (the projection knows a role's evidence by its
    lower-cased name), starting with a letter or digit, at most 32 bytes of UTF-8, and none of
    the file queue's own folders (claimed, deferred, rejected, workers).
    """
    if not isinstance(value, str) or not value:
        return "it must be non-empty text"
    try:
        normal = check_request_id(value)
    except UnsafeRequestIdError:
        return (
            "use only letters and digits (of any script), '-', '_', '.' and ':' "
            "(no '/', no '..', no spaces)"
        )
    if normal != value:
        return "write it in Unicode's composed form (NFC)"
    if len(value.encode("utf-8")) > MAX_ROLE_NAME_BYTES:
        return f"it must be at most {MAX_ROLE_NAME_BYTES} bytes long in UTF-8"
    if unicodedata.category(value[0])[0] not in "LN":
        return "it must start with a letter or a digit"
    if value != value.lower():
        return "it must be lower case"
    if value in RESERVED_ROLE_NAMES:
        return f"{', '.join(RESERVED_ROLE_NAMES)} are the queue's own folders"
    return None


def check_role_name(value: str) -> str:
    """Return ``value`` if it can name a role (and so a folder, subject or log file), else
    raise ``ValueError``. Whether a team has the role is ``check_role``'s question."""
    problem = role_name_problem(value)
    if problem is not None:
        raise ValueError(f"unknown role {value!r}: not a role name ({problem})")
    return value


def check_role(value: str, roles: tuple[str, ...] = ROLES) -> str:
    """Return ``value`` if it names a role of ``roles`` (a team's cast: the built-in one by
    default), else raise ``ValueError``."""
    if value not in roles:
        raise ValueError(f"unknown role {value!r}; roles are: {', '.join(roles)}")
    return value


class NextRoles(msgspec.Struct, frozen=True, kw_only=True):
    """What one role may name as ``next_role``: these ``roles``, or ``""`` (no role: the
    request ends with its result) when ``finish`` is true. ``limited`` says its
    ``hands_to`` narrows the cast; without it, it may hand to any role of the team."""

    roles: tuple[str, ...]
    finish: bool = True
    limited: bool = False

    @property
    def values(self) -> tuple[str, ...]:
        """Every value ``next_role`` may take, ``""`` first when it is one."""
        return ("", *self.roles) if self.finish else self.roles

    def allows(self, value: object) -> bool:
        """Whether ``value`` (``null`` read as ``""``) is a ``next_role`` this role may name."""
        value = "" if value is None else value
        return isinstance(value, str) and value in self.values


DEFAULT_NEXT_ROLES = NextRoles(roles=ROLES)  # the built-in team's: any of its roles, or none
