"""What every handler of the console reaches through its request: the workspace's reads, the
guard (for the CSRF field of its forms) and how often the live team page is redrawn."""

from __future__ import annotations

from dataclasses import dataclass

from starlette.requests import Request

from teams_runtime.cli.console._guard import Guard
from teams_runtime.cli.console._reads import Reads

__all__ = ["Console", "console_of"]


@dataclass(frozen=True)
class Console:
    """One console: a workspace shown, a guard, the live page's interval in seconds."""

    reads: Reads
    guard: Guard
    interval: float = 2.0


def console_of(request: Request) -> Console:
    """The console ``request`` was made to."""
    console: Console = request.app.state.console
    return console
