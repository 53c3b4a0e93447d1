"""What every handler of the console reaches through its request: the workspace's reads, the
guard (for the CSRF field of its forms), how often the live pages are redrawn, and the notes
an answer leaves for the page it redirects to."""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field

from starlette.requests import Request

from teams_runtime.cli.console._guard import Guard
from teams_runtime.cli.console._reads import Reads

__all__ = ["Console", "Flash", "console_of"]

# The notes kept at once: the oldest is dropped past this (a bound on memory).
MOST_FLASHES = 1000


@dataclass(frozen=True)
class Flash:
    """What a recorded answer says on the page it redirects to, and the envelope answered
    (the page's script then forgets the form's draft of it)."""

    text: str
    envelope_id: str


@dataclass(frozen=True)
class Console:
    """One console: a workspace shown, a guard, the live page's interval in seconds."""

    reads: Reads
    guard: Guard
    interval: float = 2.0
    # A dict as an ordered map: the oldest note first, dropped past MOST_FLASHES.
    _flashes: dict[str, Flash] = field(default_factory=dict)

    def flash(self, note: Flash) -> str:
        """Keep ``note`` for the page a redirect lands on: the key its URL carries (random:
        one browser's note is not another's to guess)."""
        key = secrets.token_urlsafe(12)
        self._flashes[key] = note
        while len(self._flashes) > MOST_FLASHES:
            del self._flashes[next(iter(self._flashes))]
        return key

    def flashed(self, key: str | None) -> Flash | None:
        """The note kept under ``key`` (it stays: a reload shows it again)."""
        return self._flashes.get(key) if key else None


def console_of(request: Request) -> Console:
    """The console ``request`` was made to."""
    console: Console = request.app.state.console
    return console
