"""``status --watch``: the team's state redrawn every ``--interval`` seconds, for an operator on
another terminal. On a terminal it is redrawn in place (rich); otherwise each report is printed
in turn under a line with its time, so a log or a pipe reads it too. Ctrl-C ends it (exit 0).
Each redraw reads what ``status`` reads: the requests' heads, the queue, the leases.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from datetime import datetime

__all__ = ["watch_status"]


# What is drawn each time: the lines of a fresh status report (``cli.status`` passes it in).
Report = Callable[[], list[str]]


def _screen(report: Report, interval: float) -> str:
    at = datetime.now().astimezone().isoformat(timespec="seconds")
    lines = report()
    return "\n".join([f"teams-runtime status at {at} (every {interval:g} s; Ctrl-C ends)", *lines])


def watch_status(report: Report, interval: float, count: int | None) -> int:
    """Redraw ``report`` every ``interval`` seconds, ``count`` times (or until
    Ctrl-C)."""
    try:
        if sys.stdout.isatty():
            _watch_live(report, interval, count)
        else:
            _watch_plain(report, interval, count)
    except KeyboardInterrupt:
        pass
    return 0


def _drawn(count: int | None) -> range | _Forever:
    return range(count) if count is not None else _Forever()


class _Forever:
    def __iter__(self) -> _Forever:
        return self

    def __next__(self) -> int:
        return 0


def _watch_plain(report: Report, interval: float, count: int | None) -> None:
    for shown, _ in enumerate(_drawn(count)):
        if shown:
            time.sleep(interval)  # a human pace: what is watched changes on its own
            print()
        print(_screen(report, interval), flush=True)


def _watch_live(report: Report, interval: float, count: int | None) -> None:
    from rich.console import Console
    from rich.live import Live
    from rich.text import Text

    console = Console()
    with Live(console=console, auto_refresh=False, screen=False) as live:
        for shown, _ in enumerate(_drawn(count)):
            if shown:
                time.sleep(interval)
            live.update(Text(_screen(report, interval)), refresh=True)
