"""The live view of a running team (``run`` and ``demo`` on a terminal), drawn with rich.

A table on stderr with a row per role: the requests it is handling and for how long (for a
person's role, how many answers wait in the inbox), and its handled / failed / queued counts.
It is redrawn from ``Team.status`` twice a second by its own task; the roles never wait for
it. Log lines are collected and printed above the table at each redraw, so the two never
garble each other. Ids and counts only: no prompt, payload or envelope text.
"""

from __future__ import annotations

import os
import sys
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
from rich.console import Console
from rich.live import Live
from rich.table import Table
from rich.text import Text

from teams_runtime.actors.team import RoleStatus, Team
from teams_runtime.codecs.formats import count_of

__all__ = ["REFRESH_SECONDS", "LiveView", "render_status", "wants_live_view"]

REFRESH_SECONDS = 0.5  # ages are shown in whole seconds
_SHOWN_PER_ROLE = 3  # requests listed per role; the rest are counted


def wants_live_view(plain: bool) -> bool:
    """Whether to draw the live view: stderr is a terminal that can redraw (not
    ``TERM=dumb``) and ``--plain`` was not given."""
    return not plain and sys.stderr.isatty() and os.environ.get("TERM") != "dumb"


def _age(seconds: float) -> str:
    seconds = max(int(seconds), 0)
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds // 60 % 60:02d}m"


def _working(status: RoleStatus, now: float) -> str:
    if status.person:
        return f"a person: {count_of(status.answers, 'answer')} waiting"
    if not status.working:
        return "idle"
    shown = [f"{work.request_id} ({_age(now - work.since)})" for work in status.working]
    more = len(shown) - _SHOWN_PER_ROLE
    return ", ".join(shown[:_SHOWN_PER_ROLE]) + (f" +{more} more" if more > 0 else "")


def render_status(statuses: list[RoleStatus], now: float, title: str) -> Table:
    """The table for one moment: a row per role, then the totals."""
    table = Table(title=title, title_justify="left", expand=False)
    table.add_column("role", no_wrap=True)
    table.add_column("working on (for)", overflow="fold")
    table.add_column("handled", justify="right")
    table.add_column("failed", justify="right")
    table.add_column("queued", justify="right")
    for status in statuses:
        table.add_row(
            status.role,
            _working(status, now),
            str(status.handled),
            Text(str(status.failed), style="red" if status.failed else ""),
            str(status.queued),
        )
    busy = sum(len(status.working) for status in statuses)
    answers = sum(status.answers for status in statuses)
    table.caption = (
        f"{count_of(busy, 'request')} in progress, "
        f"{sum(s.handled for s in statuses)} handled, {sum(s.failed for s in statuses)} failed, "
        f"{sum(s.queued for s in statuses)} queued"
        + (f", {count_of(answers, 'answer')} waiting" if answers else "")
    )
    table.caption_justify = "left"
    return table


class LiveView:
    """A live view on stderr, with the log sink that goes with it.

    Log lines (``log_line``, given to ``configure_logging(console=...)``) are only collected
    while the view is drawn and printed above it at the next redraw, all at once: printing
    each where it is logged would redraw the table per line, on the roles' time.
    """

    def __init__(self) -> None:
        self.console = Console(stderr=True)
        self._lines: deque[str] = deque()
        self._drawing = False

    def log_line(self, message: str) -> None:
        """Print a log line above the view (at its next redraw while it is drawn)."""
        if self._drawing:
            self._lines.append(message.rstrip("\n"))  # deque.append: safe from any thread
        else:
            self._print([message.rstrip("\n")])

    def _print(self, lines: list[str]) -> None:
        self.console.print(Text("\n".join(lines)), soft_wrap=True, highlight=False)

    def _flush(self) -> None:
        lines = []
        while self._lines:
            lines.append(self._lines.popleft())
        if lines:
            self._print(lines)

    @asynccontextmanager
    async def showing(self, team: Team, title: str) -> AsyncIterator[None]:
        """Draw ``team``'s view while the block runs; the last state stays on screen."""

        async def draw() -> None:
            statuses = await team.status() if team.roles else []
            self._flush()
            if statuses:
                live.update(render_status(statuses, anyio.current_time(), title), refresh=True)

        async def keep_drawing() -> None:
            while True:
                await draw()
                await anyio.sleep(REFRESH_SECONDS)

        with Live(
            console=self.console,
            auto_refresh=False,
            redirect_stdout=False,
            redirect_stderr=False,
        ) as live:
            self._drawing = True
            try:
                async with anyio.create_task_group() as group:
                    group.start_soon(keep_drawing)
                    try:
                        yield
                    finally:
                        group.cancel_scope.cancel()
            finally:
                # The final state, after the last outcome, also when Ctrl-C stopped the run
                # (the envelopes in hand went back to the queue: no role is shown at work).
                with anyio.move_on_after(2, shield=True):
                    await draw()
                self._drawing = False
                self._flush()
