"""What several sections of ``team_runtime.yaml`` check the same way, in the same words.

The file's name (every message starts with it), the bounds of its numbers, and the checks of
an event count and of a port.

Durations too: seconds as a number, or text with one unit (``90s``, ``30m``, ``4h``, ``2d``), as
a person writes how long an answer may take.
"""

from __future__ import annotations

import math
import re

from teams_runtime.exceptions import ConfigError

__all__ = [
    "CONFIG_FILE_NAME",
    "EVENT_COUNT_LIMIT",
    "HIGHEST_PORT",
    "LONGEST_CALL_SECONDS",
    "LONGEST_WAIT_SECONDS",
    "MOST_ATTEMPTS",
    "MOST_CONCURRENCY",
    "MOST_HOPS",
    "MOST_OUTPUT_BYTES",
    "check_at_most",
    "duration_seconds",
    "event_count_problem",
    "is_port",
    "whole_number_hint",
]


CONFIG_FILE_NAME = "team_runtime.yaml"

# The most events a count (prompt_context.recent_events and max_events, the CLI's
# --recent-events and --max-events) may name: far more than any prompt can carry, and small
# enough that every buffer sized by it can be made (a huge count once left envelopes queued).
EVENT_COUNT_LIMIT = 1_000_000


def whole_number_hint(value: object, most: int) -> str:
    """`` (write 1000)`` for a decimal number that is a whole one in range (YAML 1.2 reads
    ``1e3`` as 1000.0, a number but not an integer), else nothing."""
    if isinstance(value, float) and value.is_integer() and 1 <= value <= most:
        return f" (write {int(value)})"
    return ""


def event_count_problem(value: object) -> str | None:
    """Why ``value`` cannot be an event count (``must be ...``), or ``None`` when it can.

    The one check behind the config's counts and the CLI's flags, so both say the same.
    """
    # bool is an int subclass: `true` must not pass as 1.
    if type(value) is not int or value < 1:
        return "must be a positive integer"  # the spec's exact words, even for `8.0`
    if value > EVENT_COUNT_LIMIT:
        return f"must be at most {EVENT_COUNT_LIMIT}"
    return None


# Upper bounds of the other numbers: generous, but a typo (a few digits too many, `.inf`)
# is an error naming the setting instead of a wait of centuries or an overflow at run time.
LONGEST_CALL_SECONDS = 86_400  # model.timeout_seconds, model.openai.timeout_seconds: a day
MOST_ATTEMPTS = 100  # model.attempts
MOST_OUTPUT_BYTES = 1 << 30  # model.max_output_bytes: 1 GiB
MOST_HOPS = 10_000  # team.max_hops
MOST_IN_FLIGHT = 1_024  # team.requests_in_flight: each may hold a worker thread
MOST_CONCURRENCY = 256  # roles.<name>.concurrency: each may be a model process


def check_at_most(setting: str, value: float, limit: int) -> None:
    """Refuse ``value`` above ``limit``, naming ``setting`` as the file writes it."""
    if not value <= limit:  # `not <=`: NaN fails too
        raise ConfigError(f"{CONFIG_FILE_NAME} {setting} must be at most {limit}.")


HIGHEST_PORT = 65_535


def is_port(number: int) -> bool:
    """Whether a server can listen on port ``number`` (the one check of every URL's port)."""
    return 1 <= number <= HIGHEST_PORT


LONGEST_WAIT_SECONDS = 366 * 86_400  # a year: a typo of a few digits is an error, not a wait
_UNITS = {"s": 1, "m": 60, "h": 3_600, "d": 86_400}
_WRITTEN = re.compile(r"(\d+(?:\.\d+)?)\s*([smhd])")


def duration_seconds(value: object, setting: str) -> float:
    """``value`` in seconds; a ``ConfigError`` naming ``setting`` (its dotted path) when it is
    no duration, not above 0, or longer than a year."""
    seconds: float | None = None
    if isinstance(value, int | float) and not isinstance(value, bool):
        seconds = float(value)
    elif isinstance(value, str):
        written = _WRITTEN.fullmatch(value.strip())
        if written is not None:
            seconds = float(written.group(1)) * _UNITS[written.group(2)]
    if seconds is None or not math.isfinite(seconds):
        raise ConfigError(
            f"{CONFIG_FILE_NAME} {setting} must be a duration: seconds as a number, or a "
            "number and one unit (90s, 30m, 4h, 2d)."
        )
    if seconds <= 0:
        raise ConfigError(f"{CONFIG_FILE_NAME} {setting} must be greater than 0.")
    if seconds > LONGEST_WAIT_SECONDS:
        raise ConfigError(f"{CONFIG_FILE_NAME} {setting} must be at most 366d (a year).")
    return seconds
