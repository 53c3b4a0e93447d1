"""What every command shares when it runs: the user-error type and JSON output."""

from __future__ import annotations

import sys
from typing import Any

from teams_runtime.codecs.formats import pretty_json
from teams_runtime.exceptions import TeamsRuntimeError

__all__ = ["UserError", "write_json"]


class UserError(TeamsRuntimeError):
    """A mistake in how the command was called (exit status 2)."""


def write_json(value: Any) -> None:
    """Print ``value`` as indented JSON and a newline."""
    sys.stdout.write(pretty_json(value) + "\n")
