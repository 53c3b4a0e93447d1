"""The role flags (``--role``, ``--roles``) checked against the workspace's team.

The parser can only check that a flag names a role a team could have (``flag_types``); which
roles there are is the workspace's ``team_runtime.yaml`` (``TeamConfig.cast``), read when the
command runs. A role the team does not have is a user error (exit 2) naming the team's roles.
"""

from __future__ import annotations

from collections.abc import Sequence

from teams_runtime.actors.intake import check_new_work
from teams_runtime.cli.output import UserError
from teams_runtime.codecs.config import Cast

__all__ = ["new_work_role", "team_role", "team_roles"]


def team_role(cast: Cast, role: str) -> str:
    """``role`` if it is one of the team's (``--role`` of ``prompt``)."""
    try:
        return cast.check(role)
    except ValueError as exc:
        raise UserError(f"--role: {exc} (team.roles in team_runtime.yaml)") from None


def team_roles(cast: Cast, roles: Sequence[str]) -> list[str]:
    """``roles`` if each is one of the team's (``--roles`` of ``run``)."""
    unknown = [role for role in roles if role not in cast.roles]
    if unknown:
        raise UserError(
            f"--roles: {', '.join(unknown)} {'is' if len(unknown) == 1 else 'are'} not of the "
            f"team; its roles are: {', '.join(cast.names)} (team.roles in team_runtime.yaml)"
            + (cast.guess(unknown[0]) if len(unknown) == 1 else "")
        )
    return list(roles)


def new_work_role(cast: Cast, role: str) -> str:
    """``role`` if ``submit`` may queue new work for it (``--role`` of ``submit``, ``ab``)."""
    try:
        return check_new_work(cast, role)
    except ValueError as exc:
        raise UserError(f"--role: {exc}") from None
