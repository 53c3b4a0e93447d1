"""The Team supervisor: the ContextActor and the role actors in one task group, its chores, reports
and ``run --once``."""

from __future__ import annotations

from teams_runtime.actors.team._reports import RoleStatus, RunSummary
from teams_runtime.actors.team._team import Team

__all__ = [
    "RoleStatus",
    "RunSummary",
    "Team",
]
