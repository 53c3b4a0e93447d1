"""``--role`` of ``submit`` and ``ab``: a role of the team that takes new work."""

from __future__ import annotations

from teams_runtime.actors.intake import check_new_work
from teams_runtime.cli._output import UserError
from teams_runtime.codecs.config import Cast

__all__ = ["new_work_role"]


def new_work_role(cast: Cast, role: str) -> str:
    """``role`` if ``submit`` may queue new work for it (``--role`` of ``submit``, ``ab``)."""
    try:
        return check_new_work(cast, role)
    except ValueError as exc:
        raise UserError(f"--role: {exc}") from None
