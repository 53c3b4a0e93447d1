"""A duration in ``team_runtime.yaml``: seconds as a number, or text with one unit
(``90s``, ``30m``, ``4h``, ``2d``), as a person writes how long an answer may take."""

from __future__ import annotations

import math
import re

from teams_runtime.codecs.config.setting_checks import CONFIG_FILE_NAME
from teams_runtime.exceptions import ConfigError

__all__ = ["LONGEST_WAIT_SECONDS", "duration_seconds"]

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
