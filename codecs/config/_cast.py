"""``Cast``: the roles of one team as its config declares them, and what each may do.

Every part of the runtime that needs the team's roles takes them from here
(``TeamConfig.cast``), passed down as a value: the queue's folders and NATS consumers, the
Team's role actors, each role's prompt (its rules, its prompt kind, the roles it may hand to)
and contract (``next_roles``), ``status``, the logs, the CLI's role flags.
"""

from __future__ import annotations

import msgspec

from teams_runtime.codecs.config._roles_section import RoleConfig
from teams_runtime.codecs.config._value_messages import nearest
from teams_runtime.codecs.prompt_names import KIND_NAMES, PromptKind
from teams_runtime.codecs.roles import (
    BUILT_IN_PROMPT_KINDS,
    BUILT_IN_RULES,
    ROLES,
    NextRoles,
)

__all__ = ["DEFAULT_CAST", "DEFAULT_CONCURRENCY", "Cast", "built_in_role"]

# Envelopes of one role a worker handles at once, unless `roles.<role>.concurrency` says.
DEFAULT_CONCURRENCY = 4


def built_in_role(name: str) -> RoleConfig:
    """A built-in role as the default team has it (its rules, its prompt kind, the default
    model)."""
    return RoleConfig(
        rules=list(BUILT_IN_RULES.get(name, ())),
        prompt_kind=BUILT_IN_PROMPT_KINDS.get(name, "role_task"),
    )


class Cast(msgspec.Struct, frozen=True):
    """A team's roles, in the order the config lists them (``team.roles``), each with its
    settings (``RoleConfig``)."""

    roles: dict[str, RoleConfig]

    @property
    def names(self) -> tuple[str, ...]:
        """The roles' names, in the team's order."""
        return tuple(self.roles)

    @property
    def takes_new_work(self) -> tuple[str, ...]:
        """The roles ``submit`` may queue work for: all but those whose prompt is
        ``version_control`` (their work comes from a hand-off, which says what to commit)."""
        return tuple(
            name for name, role in self.roles.items() if role.prompt_kind != "version_control"
        )

    @property
    def intake_actor(self) -> str:
        """Who a new request's ``created`` and ``delegated`` events credit: ``orchestrator``,
        as upstream's records do, when the team has one; else ``user`` (a team without an
        orchestrator must not be shown a role it does not have)."""
        return "orchestrator" if "orchestrator" in self.roles else "user"

    def check(self, name: str) -> str:
        """Return ``name`` if it is a role of the team, else raise ``ValueError`` naming the
        team's roles."""
        if name not in self.roles:
            raise ValueError(
                f"unknown role {name!r}; roles are: {', '.join(self.roles)}{self.guess(name)}"
            )
        return name

    def guess(self, name: str, among: tuple[str, ...] | None = None) -> str:
        """`` (did you mean writer?)`` when ``name`` is close to one of ``among`` (the team's
        roles by default), else ``""``: the end of a refusal of ``name``."""
        close = nearest(name, list(self.names if among is None else among))
        return f" (did you mean {close}?)" if close else ""

    def role(self, name: str) -> RoleConfig:
        """The settings of role ``name`` (``ValueError`` if the team has no such role)."""
        return self.roles[self.check(name)]

    def rules_of(self, name: str) -> tuple[str, ...]:
        """The "Role rules" lines of role ``name``'s prompts."""
        return tuple(self.role(name).rules)

    def prompt_kind_of(self, name: str) -> PromptKind:
        """The prompt role ``name`` gets for new work (``task``, ``research_decision`` or
        ``version_control``)."""
        return KIND_NAMES[self.role(name).prompt_kind]

    def is_version_control(self, name: str) -> bool:
        """Whether a hand-off to ``name`` asks for a commit (its prompt is
        ``version_control``: the hand-off writes the record's ``version_control`` section)."""
        role = self.roles.get(name)
        return role is not None and role.prompt_kind == "version_control"

    def next_roles(self, name: str) -> NextRoles:
        """What role ``name`` may name as ``next_role``: its ``hands_to`` (``""`` among them:
        it may finish the request), or any role of the team, or none."""
        hands_to = self.role(name).hands_to
        if hands_to is None:
            return NextRoles(roles=self.names)
        return NextRoles(
            roles=tuple(target for target in hands_to if target),
            finish="" in hands_to,
            limited=True,
        )

    def asks_output(self, name: str) -> bool:
        """Whether role ``name``'s contract asks for its deliverable (``roles.<name>.output``):
        its prompts then name ``output`` (a role outside the team: no)."""
        role = self.roles.get(name)
        return role is not None and role.output

    def concurrency_of(self, name: str, default: int = DEFAULT_CONCURRENCY) -> int:
        """How many envelopes of role ``name`` one worker handles at once (``default``: the
        Team's, unless the role sets its own)."""
        own = self.role(name).concurrency
        return own if own is not None else default


DEFAULT_CAST = Cast({name: built_in_role(name) for name in ROLES})
