"""``teams-runtime config --graph``: who may hand a request to whom, as the team's config says
(``team.roles``, ``roles.<role>.hands_to``), as text or as JSON."""

from __future__ import annotations

from typing import Any

from teams_runtime.codecs.config import Cast

__all__ = ["graph_lines", "hand_off_graph"]

_DONE = "done"  # what the text calls finishing the request (next_role "")


def hand_off_graph(cast: Cast) -> dict[str, Any]:
    """Each role of the team, in its order: its prompt kind, whether ``submit`` may queue work
    for it, the roles it may hand to (``hands_to``, or every role of the team), whether it may
    finish the request, and whether its ``hands_to`` narrows the team."""
    new_work = set(cast.takes_new_work)
    roles = {}
    for name in cast.names:
        next_roles = cast.next_roles(name)
        roles[name] = {
            "prompt_kind": cast.role(name).prompt_kind,
            "takes_new_work": name in new_work,
            "hands_to": list(next_roles.roles),
            "may_finish": next_roles.finish,
            "limited": next_roles.limited,
        }
    return {"roles": roles}


def graph_lines(cast: Cast) -> list[str]:
    """The graph as text: the team, then a line per role, ``writer -> reviewer``."""
    width = max(len(name) for name in cast.names)
    lines = [
        f"team: {', '.join(cast.names)} (new work: {', '.join(cast.takes_new_work) or 'none'})"
    ]
    for name in cast.names:
        next_roles = cast.next_roles(name)
        if not next_roles.limited:
            targets = "any role, or done"
        elif not next_roles.roles:
            targets = _DONE
        else:
            targets = ", ".join(next_roles.roles) + (f", or {_DONE}" if next_roles.finish else "")
        lines.append(f"{name:<{width}} -> {targets}")
    return lines
