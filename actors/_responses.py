"""The slot an ask's response comes back in (``actors._mailbox``).

A memory object stream per ask (a state, two streams, a send, a close, a receive) cost an ask
about 8 us of a round trip of 22; the response is one value given once, so a slot does: the
serving task gives or closes it, the asker takes it, waiting on an event only if it is not
there when it looks (the event is made only then). Both sides run on the event loop.
"""

from __future__ import annotations

import math
from typing import Any, Final, final

import anyio

__all__ = ["NOTHING", "Response"]


@final
class _Nothing:
    __slots__ = ()

    def __repr__(self) -> str:
        return "NOTHING"


NOTHING: Final = _Nothing()  # what ``Response.value`` holds until (unless) a response is given


class Response:
    """One ask's response: given (or closed without one) once by the serving task; read by the
    asker, who says when it stops waiting (``abandon``)."""

    __slots__ = ("_event", "closed", "deadline", "value", "wanted")

    def __init__(self, deadline: float = math.inf) -> None:
        self.value: Any = NOTHING
        self.closed = False  # given, or never to be
        self.wanted = True  # the asker still waits for it (not cancelled)
        # When the asker gives up (``anyio.current_time()``): its ask is not handled after
        # that, even if the asker has not run since to say so (its first round has no scope).
        self.deadline = deadline
        self._event: anyio.Event | None = None

    def is_wanted(self) -> bool:
        """Whether the asker still waits: not gone, not past its deadline."""
        return self.wanted and anyio.current_time() < self.deadline

    def give(self, value: Any) -> None:
        """The response (the serving task's; a second one, or one after ``close``, is dropped)."""
        if not self.closed:
            self.value = value
            self.close()

    def close(self) -> None:
        """No response (more) will come: the asker hears ``ActorStopped`` if none was given
        (``AskTimeout`` if it was dropped past its deadline)."""
        self.closed = True
        if self._event is not None:
            self._event.set()

    def abandon(self) -> None:
        """The asker no longer waits (the serving task then drops the ask unhandled)."""
        self.wanted = False

    async def wait(self) -> None:
        """Until the response is given or closed (a checkpoint only if it has to wait)."""
        if not self.closed:
            self._event = anyio.Event()
            await self._event.wait()
