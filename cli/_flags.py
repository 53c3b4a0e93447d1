"""The flags of the command line: the checks of their values, the flags several commands share
(--json, --workspace, a request's selector and overrides), and what they mean once a command
runs (the workspace found when --workspace is not given, the roles checked against the team).

A check of a value is an argparse ``type=``: it returns the value, or raises
``ArgumentTypeError`` with a message argparse prints after the flag's name (exit 2). What
needs the workspace is checked when the command runs: a ``UserError`` (exit 2).
"""

from __future__ import annotations

import argparse
import os
import unicodedata
from collections.abc import Sequence
from pathlib import Path

from teams_runtime.cli._output import UserError
from teams_runtime.codecs.config import (
    CONFIG_FILE_NAME,
    EVENT_COUNT_LIMIT,
    LAYOUTS,
    MOST_PROMPT_TOKENS,
    Cast,
    event_count_problem,
)
from teams_runtime.codecs.prompt_names import KIND_NAMES, PURPOSES, PromptKind
from teams_runtime.codecs.request_ids import check_request_id
from teams_runtime.codecs.roles import role_name_problem

__all__ = [
    "FOUND_WORKSPACE",
    "add_json",
    "add_overrides",
    "add_selector",
    "add_workspace",
    "cache_ttl",
    "event_count",
    "hours",
    "not_empty",
    "positive_count",
    "prompt_kind",
    "role_list",
    "role_name",
    "seconds",
    "settle",
    "team_role",
    "team_roles",
    "timestamp",
]


# --- the checks of their values -------------------------------------------------------------------


def event_count(text: str) -> int:
    """--recent-events, --max-events: checked as the config's counts are (one rule, one
    message)."""
    try:
        value = int(text)
    except ValueError:
        digits = text.strip().lstrip("+-")
        if not (digits.isascii() and digits.isdigit()):
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        # More digits than int() reads: far beyond any bound, on the side of its sign.
        value = -1 if text.strip().startswith("-") else EVENT_COUNT_LIMIT + 1
    problem = event_count_problem(value)
    if problem is not None:
        raise argparse.ArgumentTypeError(f"{text!r} {problem}")
    return value


def prompt_tokens(text: str) -> int:
    """--max-prompt-tokens: a whole number of tokens, as the config's budget is."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if not 1 <= value <= MOST_PROMPT_TOKENS:
        raise argparse.ArgumentTypeError(f"{text!r} must be from 1 to {MOST_PROMPT_TOKENS}")
    return value


# --hours: a century of logs is more than any workspace holds; past it the time would overflow.
_MOST_HOURS = 876_000


def hours(text: str) -> float:
    """--hours: a positive number of hours, at most a century."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be a positive number")
    if not value <= _MOST_HOURS:
        raise argparse.ArgumentTypeError(f"{text!r} must be at most {_MOST_HOURS} (a century)")
    return value


def seconds(text: str) -> float:
    """--interval: a number of seconds from 0.1 to a day (a redraw at a human pace)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0.1 <= value <= 86_400:
        raise argparse.ArgumentTypeError(f"{text!r} must be from 0.1 to 86400 seconds")
    return value


# --cache-ttl: a month is longer than any prompt cache keeps a prompt.
_MOST_TTL = 30 * 86_400


def cache_ttl(text: str) -> float:
    """--cache-ttl: how long a prompt cache keeps a prompt, from 0 to a month of seconds."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0 <= value <= _MOST_TTL:
        raise argparse.ArgumentTypeError(f"{text!r} must be from 0 to {_MOST_TTL} seconds")
    return value


def positive_count(text: str) -> int:
    """--count: a whole number from 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be 1 or more")
    return value


# Unicode's default-ignorable code points outside the format category (Cf), which are checked by
# category: fillers and selectors that show as nothing (Hangul fillers, variation selectors,
# the combining grapheme joiner, Khmer inherent vowels, Mongolian selectors), and the braille
# blank, which shows as a space.
_INVISIBLE = frozenset(
    [
        *(0x034F, 0x115F, 0x1160, 0x17B4, 0x17B5, 0x2800, 0x3164, 0xFFA0),
        *range(0x180B, 0x1810),
        *range(0xFE00, 0xFE10),
        *range(0xE0100, 0xE01F0),
    ]
)


def _is_blank(text: str) -> bool:
    """Whether ``text`` shows as nothing: whitespace, format characters (Cf: zero-width space,
    joiners, BOM, bidi marks) and the other invisible code points."""
    return all(
        char.isspace() or ord(char) in _INVISIBLE or unicodedata.category(char) == "Cf"
        for char in text
    )


def not_empty(text: str) -> str:
    """A text that shows as something (not empty, not only blanks or invisibles)."""
    if _is_blank(text):
        raise argparse.ArgumentTypeError("must not be empty or blank")
    return text


def prompt_kind(text: str) -> PromptKind:
    """--kind: a prompt kind as the logs name it (or task, repair)."""
    try:
        return KIND_NAMES[text]
    except KeyError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a prompt kind: {', '.join(PURPOSES.values())} "
            "(task and repair are accepted for role_task and contract_repair)"
        ) from None


def timestamp(text: str) -> str:
    """An ISO-8601 time; without an offset it is taken as local time."""
    from datetime import datetime  # only a command given a time parses one

    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not an ISO-8601 time (e.g. 2026-11-30T08:00:00+01:00)"
        ) from None
    try:
        if moment.tzinfo is None:
            moment = moment.astimezone()
        moment.astimezone()  # the local time of it must exist too: filters compare in it
    except (OverflowError, ValueError, OSError):
        raise argparse.ArgumentTypeError(
            f"{text!r} is too far in the past or future to compare (e.g. 2026-11-30T08:00:00+01:00)"
        ) from None
    return moment.isoformat()


def role_name(text: str) -> str:
    """--role: a name a role may have (which roles the team has is read when the command
    runs: ``team_role``)."""
    problem = role_name_problem(text)
    if problem is not None:
        raise argparse.ArgumentTypeError(f"{text!r} is not a role name: {problem}")
    return text


def role_list(text: str) -> list[str]:
    """--roles: a comma-separated list of role names (checked against the team when the
    command runs: ``team_roles``)."""
    roles = [part.strip() for part in text.split(",") if part.strip()]
    if not roles:
        raise argparse.ArgumentTypeError(
            f"{text!r} must be a comma-separated list of roles (e.g. planner,qa)"
        )
    for role in roles:
        role_name(role)
    return roles


# --- the flags several commands share -------------------------------------------------------------


JSON_HELP = "print one JSON object (see docs/cli.md)"


def add_json(parser: argparse.ArgumentParser, what: str = JSON_HELP) -> None:
    """Add --json, with ``what`` as its help."""
    parser.add_argument("--json", action="store_true", help=what)


# Where a command works when --workspace is not given (``resolve_workspace`` finds it).
FOUND_WORKSPACE = "the current folder or the nearest one above it holding team_runtime.yaml"


def add_workspace(parser: argparse.ArgumentParser) -> None:
    """Add --workspace (found from the current folder when not given)."""
    parser.add_argument(
        "--workspace",
        type=Path,
        default=None,
        metavar="DIR",
        help=f"the workspace folder (default: {FOUND_WORKSPACE})",
    )


def add_selector(parser: argparse.ArgumentParser) -> None:
    """Add the request a command reads (an id, or --record PATH) and its overrides."""
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument(
        "request_id",
        nargs="?",
        metavar="REQUEST_ID",
        help="a request in the workspace's .teams_runtime/requests/",
    )
    which.add_argument(
        "--record",
        type=Path,
        metavar="PATH",
        help="a request record file anywhere (defaults apply without a config)",
    )
    add_workspace(parser)
    add_overrides(parser)


def add_overrides(parser: argparse.ArgumentParser) -> None:
    """The flags that override prompt_context for one command (project, explain, prompt)."""
    parser.add_argument(
        "--recent-events",
        type=event_count,
        metavar="N",
        help=f"override prompt_context.recent_events (1 to {EVENT_COUNT_LIMIT})",
    )
    parser.add_argument(
        "--max-events",
        type=event_count,
        metavar="N",
        help=f"override prompt_context.max_events (1 to {EVENT_COUNT_LIMIT})",
    )
    parser.add_argument(
        "--disable",
        action="store_true",
        help="project as with prompt_context.enabled: false (full history)",
    )
    parser.add_argument(
        "--layout",
        choices=LAYOUTS,
        help="override prompt_context.layout: upstream (the spec's prompt) or shared_prefix "
        "(what every role shares first; docs/compaction.md)",
    )
    parser.add_argument(
        "--step",
        type=event_count,
        metavar="N",
        help="override prompt_context.step, the events a shared_prefix tail grows by "
        f"(1 to {EVENT_COUNT_LIMIT})",
    )
    parser.add_argument(
        "--max-prompt-tokens",
        type=prompt_tokens,
        metavar="N",
        help="fit the prompt to N tokens, overriding the role's or prompt_context's "
        f"max_prompt_tokens (1 to {MOST_PROMPT_TOKENS}; docs/compaction.md)",
    )


# --- what they mean once a command runs -----------------------------------------------------------


def settle(args: argparse.Namespace) -> None:
    """What parsing leaves to the run: the workspace found when --workspace is not given, and
    the request id in NFC, the one form files, envelopes, prompts and log filters use."""
    resolve_workspace(args)
    if getattr(args, "request_id", None) is not None:  # '' is refused, not "no id"
        args.request_id = check_request_id(args.request_id)


def _relative_paths(args: argparse.Namespace) -> list[str]:
    """The paths given to the command (flags and defaults) that are relative to the current
    folder: every ``Path`` value, and ``append --from FILE`` (``-`` is stdin)."""
    found: list[str] = []
    for name, value in vars(args).items():
        for item in value if isinstance(value, list) else [value]:
            if name == "source" and isinstance(item, str) and item != "-":
                item = Path(item)
            if isinstance(item, Path) and not item.is_absolute():
                found.append(str(item))
    return found


def _find_workspace(here: Path) -> Path | None:
    """The workspace around ``here`` (the current folder), as git finds a repository, or
    ``None``: ``here`` or the nearest parent holding ``team_runtime.yaml`` (so a command run
    inside ``.teams_runtime/`` finds its workspace). The answer is relative to ``here`` (``.``,
    ``..``, ``../..``), so messages name files as the user sees them."""
    for up, folder in enumerate([here, *here.parents]):
        candidate = folder / CONFIG_FILE_NAME
        if candidate.exists() or candidate.is_symlink():  # a bad one is loading's error
            return Path(*([".."] * up)) if up else Path(".")
    return None


def resolve_workspace(args: argparse.Namespace) -> None:
    """Set ``args.workspace`` for a command that takes ``--workspace`` and was not given one.

    Raises ``UserError`` when no folder from here up holds ``team_runtime.yaml``, except for
    ``--record`` (a record file anywhere, read with the defaults when there is no workspace),
    and when the current folder was removed and the command needs it: to find the workspace,
    or to resolve a relative path it was given (which would fail half-way).
    """
    try:
        here: Path | None = Path(os.getcwd())
    except FileNotFoundError:  # the shell's folder was removed under it
        here = None
    relative = _relative_paths(args) if here is None else []
    if relative:
        raise UserError(
            f"the current folder no longer exists, so the relative path {relative[0]!r} "
            "leads nowhere; cd to a folder that exists, or give absolute paths."
        )
    if getattr(args, "workspace", "absent") is not None:
        return  # given on the command line, or a command without a workspace (init, demo)
    if here is None:
        raise UserError(
            "the current folder no longer exists; cd to a workspace, or pass --workspace with "
            "an absolute path."
        )
    found = _find_workspace(here)
    if found is not None:
        args.workspace = found
    elif getattr(args, "record", None) is not None:
        args.workspace = Path(".")
    else:
        raise UserError(
            f"no {CONFIG_FILE_NAME} in {here} or any folder above it: this is not inside "
            "a workspace; pass --workspace DIR, or create one with `teams-runtime init DIR`."
        )


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
