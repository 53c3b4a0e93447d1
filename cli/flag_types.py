"""The values of the CLI's flags: each a check that says what is wrong with a bad one.

Each is an argparse ``type=``: it returns the value, or raises ``ArgumentTypeError`` with a
message argparse prints after the flag's name (exit 2).
"""

from __future__ import annotations

import argparse
import unicodedata
from datetime import datetime

from teams_runtime.codecs.config import EVENT_COUNT_LIMIT, event_count_problem
from teams_runtime.codecs.prompt_names import KIND_NAMES, PURPOSES, PromptKind
from teams_runtime.codecs.roles import role_name_problem

__all__ = [
    "event_count",
    "hours",
    "not_empty",
    "positive_count",
    "prompt_kind",
    "role_list",
    "role_name",
    "seconds",
    "timestamp",
]


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
    runs: ``role_flags``)."""
    problem = role_name_problem(text)
    if problem is not None:
        raise argparse.ArgumentTypeError(f"{text!r} is not a role name: {problem}")
    return text


def role_list(text: str) -> list[str]:
    """--roles: a comma-separated list of role names (checked against the team when the
    command runs: ``role_flags``)."""
    roles = [part.strip() for part in text.split(",") if part.strip()]
    if not roles:
        raise argparse.ArgumentTypeError(
            f"{text!r} must be a comma-separated list of roles (e.g. planner,qa)"
        )
    for role in roles:
        role_name(role)
    return roles
