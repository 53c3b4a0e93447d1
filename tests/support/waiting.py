"""Waiting for a condition that sets no event (another process's exit, a file it writes, a
server's state, a log line of another task's): ``eventually`` polls it until it holds, in an
async and a blocking form that share one schedule, and fails saying what it waited for.

A test that can wait on an event (``anyio.Event``, a process's ``wait``, a pipe's next line)
does that instead; a fixed sleep never stands for a condition."""

from __future__ import annotations

import inspect
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import TypeVar

import anyio

__all__ = ["eventually", "eventually_sync"]

T = TypeVar("T")

# The first looks come quickly (most conditions hold within moments), then less often: a
# condition may start a process or ask a server, and the machine is shared.
FIRST_PAUSE = 0.005
LONGEST_PAUSE = 0.1


def _pauses(seconds: float) -> Iterator[float]:
    """The pause after each look at a condition until ``seconds`` have passed, then one last
    look (a look may itself take a while: the last one comes after the time is up)."""
    deadline = time.monotonic() + seconds
    pause = FIRST_PAUSE
    while time.monotonic() < deadline:
        yield pause
        pause = min(pause * 2, LONGEST_PAUSE)
    yield 0.0


def _timed_out(what: str, seconds: float) -> AssertionError:
    return AssertionError(f"timed out after {seconds:g} s waiting for {what}")


async def eventually(
    condition: Callable[[], T] | Callable[[], Awaitable[T]], what: str, seconds: float = 10
) -> T:
    """Wait until ``condition()`` (awaited if it gives an awaitable) is true, at most
    ``seconds``; return what it gave. Raises ``AssertionError`` naming ``what`` if it never
    was."""
    for pause in _pauses(seconds):
        value = condition()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value  # type: ignore[return-value]
        await anyio.sleep(pause)
    raise _timed_out(what, seconds)


def eventually_sync(condition: Callable[[], T], what: str, seconds: float = 10) -> T:
    """``eventually`` for blocking code (a synchronous test, a thread)."""
    for pause in _pauses(seconds):
        if value := condition():
            return value
        time.sleep(pause)
    raise _timed_out(what, seconds)
