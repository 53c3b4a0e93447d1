"""The team's cast as ``team_runtime.yaml`` declares it: ``team.roles`` (who is in the team)
and each role's settings beside its model (``rules``, ``hands_to``, ``prompt_kind``,
``concurrency``, ``output``), checked with messages that name where the bad value was written.

Without ``team.roles`` the team is the eight built-in roles (``codecs.roles.ROLES``); a
built-in role keeps its rules and prompt kind unless its own settings say otherwise, and a
role of a team's own has none of either until it is given some (rules: none; prompt kind:
``role_task``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from teams_runtime.codecs.config._setting_checks import CONFIG_FILE_NAME, MOST_CONCURRENCY
from teams_runtime.codecs.config._value_messages import convert_section, kind_of, nearest
from teams_runtime.codecs.roles import (
    BUILT_IN_PROMPT_KINDS,
    BUILT_IN_RULES,
    ROLES,
    RolePromptKind,
    role_name_problem,
)
from teams_runtime.exceptions import ConfigError

__all__ = ["RoleSettings", "cast_names", "check_hands_to", "role_settings"]

_FILE = CONFIG_FILE_NAME
_DOC = "docs/roles.md"


class RoleSettings(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A role's settings beside its model, as written (``None``: not written)."""

    rules: list[str] | None = None
    hands_to: list[str] | None = None
    prompt_kind: RolePromptKind | None = None
    concurrency: int | None = None
    output: bool | None = None


_SETTINGS = frozenset(field.encode_name for field in msgspec.structs.fields(RoleSettings))


def _name_error(path: str, value: object) -> ConfigError:
    if not isinstance(value, str):
        # A number or true/false written bare is a name YAML read as another kind.
        quote = " (put it in quotes)" if isinstance(value, int | float) else ""
        return ConfigError(f"{_FILE} {path} must be text, not {kind_of(value)}{quote}.")
    problem = role_name_problem(value)
    return ConfigError(f"{_FILE} {path} {value!r} is not a role name: {problem}.")


def _twice(path: str, items: list[Any]) -> None:
    seen: set[Any] = set()
    for item in items:
        if item in seen:
            shown = f'"{item}"' if item == "" else item
            raise ConfigError(f"{_FILE} {path} lists {shown} twice; list each once.")
        seen.add(item)


def cast_names(team_block: object) -> tuple[str, ...]:
    """The names of the team's roles, in order: ``team.roles``, or the built-in eight.

    Checked before any other value of the file: every ``roles.<name>`` is one of them. A
    ``team`` that is not a mapping is left to its own check (``team must be a mapping``)."""
    written = team_block.get("roles") if isinstance(team_block, Mapping) else None
    if written is None:
        return ROLES
    if not isinstance(written, list):
        raise ConfigError(
            f"{_FILE} team.roles must be a list of role names (for example: [writer, "
            f"reviewer, editor]), not {kind_of(written)}; see {_DOC}."
        )
    if not written:
        raise ConfigError(
            f"{_FILE} team.roles must name at least one role; leave it out for the built-in "
            f"team ({', '.join(ROLES)})."
        )
    for index, name in enumerate(written):
        if not isinstance(name, str) or role_name_problem(name) is not None:
            raise _name_error(f"team.roles[{index}]", name)
    _twice("team.roles", written)
    return tuple(written)


def _check_rules(role: str, rules: list[str]) -> None:
    for index, line in enumerate(rules):
        path = f"{_FILE} roles.{role}.rules[{index}]"
        if not line.strip():
            raise ConfigError(f"{path} is empty; write the rule, or remove the line.")
        if "\n" in line or "\r" in line:
            raise ConfigError(f"{path} must be one line; write each rule as an item of its own.")


def _check_no_bare_dash(role: str, hands_to: object) -> None:
    """A bare ``-`` item of ``hands_to`` is YAML's null: most likely the writer meant "finish
    the request", which YAML needs written as ``""``."""
    if isinstance(hands_to, list) and None in hands_to:
        index = hands_to.index(None)
        raise ConfigError(
            f'{_FILE} roles.{role}.hands_to[{index}] is empty (null): write "" (in quotes) to '
            f"let {role} finish the request, or name a role."
        )


def check_hands_to(role: str, hands_to: list[str], names: Sequence[str]) -> None:
    """Refuse a ``hands_to`` that names a role outside the team (naming the nearest), names
    one twice, or is empty."""
    path = f"roles.{role}.hands_to"
    if not hands_to:
        raise ConfigError(
            f'{_FILE} {path} must name at least one role, or "" to let {role} finish the '
            "request; leave it out to let it hand to any role."
        )
    for index, target in enumerate(hands_to):
        if target == "" or target in names:
            continue
        close = nearest(target, list(names))
        hint = f"did you mean {close}?" if close else f"the roles are: {', '.join(names)}."
        raise ConfigError(
            f'{_FILE} {path}[{index}] {target!r} is not a role of the team (nor "", to '
            f"finish the request); {hint}"
        )
    _twice(path, hands_to)


def role_settings(role: str, settings: Mapping[str, Any], names: Sequence[str]) -> RoleSettings:
    """``roles.<role>``'s settings beside ``model`` in force: as written, else the built-in
    role's (rules, prompt kind), else none (a role of the team's own)."""
    # Only its own keys: `model` is read elsewhere, and an unknown key was refused already.
    written = {key: value for key, value in settings.items() if key in _SETTINGS}
    _check_no_bare_dash(role, written.get("hands_to"))
    own = convert_section(written, RoleSettings, f"roles.{role}", _DOC)
    rules = own.rules if own.rules is not None else list(BUILT_IN_RULES.get(role, ()))
    _check_rules(role, rules)
    if own.hands_to is not None:
        check_hands_to(role, own.hands_to, names)
    if own.concurrency is not None and not 1 <= own.concurrency <= MOST_CONCURRENCY:
        raise ConfigError(
            f"{_FILE} roles.{role}.concurrency must be a whole number from 1 to "
            f"{MOST_CONCURRENCY} (envelopes of {role} one worker handles at once)."
        )
    kind = own.prompt_kind or BUILT_IN_PROMPT_KINDS.get(role, "role_task")
    return RoleSettings(
        rules=rules,
        hands_to=own.hands_to,
        prompt_kind=kind,
        concurrency=own.concurrency,
        output=bool(own.output),
    )
