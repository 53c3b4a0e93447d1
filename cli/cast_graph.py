"""``teams-runtime config --graph``: who may hand a request to whom, as the team's config says
(``team.roles``, ``roles.<role>.hands_to``), as text or as JSON."""

from __future__ import annotations

from typing import Any

from teams_runtime.actors.roles import is_person
from teams_runtime.codecs.config import Cast

__all__ = ["graph_lines", "graph_warnings", "hand_off_graph"]

_DONE = "done"  # what the text calls finishing the request (next_role "")


def hand_off_graph(cast: Cast) -> dict[str, Any]:
    """Each role of the team, in its order: its prompt kind, whether a person answers for it,
    whether ``submit`` may queue work for it, the roles it may hand to (``hands_to``, or every
    role of the team), whether it may finish the request, and whether its ``hands_to`` narrows
    the team; then the ``graph_warnings``."""
    new_work = set(cast.takes_new_work)
    roles = {}
    for name in cast.names:
        next_roles = cast.next_roles(name)
        roles[name] = {
            "prompt_kind": cast.role(name).prompt_kind,
            "person": is_person(cast.role(name).model),
            "takes_new_work": name in new_work,
            "hands_to": list(next_roles.roles),
            "may_finish": next_roles.finish,
            "limited": next_roles.limited,
        }
    return {"roles": roles, "warnings": graph_warnings(cast)}


def graph_warnings(cast: Cast) -> list[str]:
    """What the hand-off rules make impossible, worth saying before a request runs into it:
    roles from which no chain of hand-offs reaches one that may finish the request (it can
    then only fail, or stop at the hop limit), and roles that never get work."""
    next_roles = {name: cast.next_roles(name) for name in cast.names}
    may_end = {name for name, allowed in next_roles.items() if allowed.finish}
    grown = True
    while grown:  # every role with a hand-off to one that may end the request, and so on
        more = {n for n, a in next_roles.items() if n not in may_end and may_end & set(a.roles)}
        may_end |= more
        grown = bool(more)
    warnings = []
    stuck = [name for name in cast.names if name not in may_end]
    if len(stuck) == len(cast.names):
        warnings.append(
            'no role may finish a request (none has "" in its hands_to): every request ends '
            "failed, by a role's failed result or at the hop limit"
        )
    elif stuck:
        warnings.append(
            f"a request at {', '.join(stuck)} can never finish: no chain of hand-offs from "
            'there reaches a role with "" in its hands_to (it ends failed, at the latest at '
            "the hop limit)"
        )
    handed_to = {target for allowed in next_roles.values() for target in allowed.roles}
    idle = [n for n in cast.names if n not in handed_to and n not in cast.takes_new_work]
    if idle:
        them = "it" if len(idle) == 1 else "them"
        warnings.append(
            f"{', '.join(idle)} never {'gets' if len(idle) == 1 else 'get'} work: no role hands "
            f"to {them}, and submit queues only for roles whose prompt_kind is not "
            "version_control"
        )
    return warnings


def graph_lines(cast: Cast) -> list[str]:
    """The graph as text: the team, then a line per role, ``writer -> reviewer`` (``(a
    person)`` after a person's), then a ``warning:`` line per ``graph_warnings``."""
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
        person = " (a person)" if is_person(cast.role(name).model) else ""
        lines.append(f"{name:<{width}} -> {targets}{person}")
    return lines + [f"warning: {warning}" for warning in graph_warnings(cast)]
