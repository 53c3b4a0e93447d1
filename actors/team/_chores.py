"""What a serving worker does now and then besides handling envelopes: queue again the deferred
envelopes whose next attempt has come (every ``RESTORE_SECONDS``, any worker's), and look at
the waiting answers of the people's roles it serves (every ``INBOX_SECONDS``:
``person_waits.tidy_inbox``, so an ``answer_within`` that ran out is handled by a running
worker). A store or queue that cannot be read now is tried again next time: a chore never
stops the team.
"""

from __future__ import annotations

from collections.abc import Callable, Collection

import anyio

from teams_runtime._logs import logger
from teams_runtime.actors.context import ContextHandle
from teams_runtime.actors.roles import tidy_inbox
from teams_runtime.actors.team._reports import RunSummary
from teams_runtime.codecs.config import Cast, ModelConfig
from teams_runtime.codecs.formats import count_of
from teams_runtime.exceptions import TeamsRuntimeError
from teams_runtime.storage import AnswerInbox, StorageQueue

__all__ = ["INBOX_SECONDS", "RESTORE_SECONDS", "TeamChores"]

RESTORE_SECONDS = 1.0  # how often a worker looks for deferred envelopes that are due
INBOX_SECONDS = 2.0  # how often it looks at its people's waiting answers


class TeamChores:
    """The chores of one run of a Team."""

    def __init__(
        self,
        queue: StorageQueue,
        inbox: AnswerInbox,
        context: ContextHandle,
        model_for: Callable[[str], ModelConfig],
        people: Collection[str],
        cast: Cast,
        summary: RunSummary,
    ) -> None:
        self._queue = queue
        self._inbox = inbox
        self._context = context
        self._model_for = model_for
        self._people = people  # the people's roles this worker serves
        self._cast = cast  # the team they are of
        self._summary = summary  # the run's, counting the answers whose time ran out
        self._last_restore = -RESTORE_SECONDS
        self._last_inbox = -INBOX_SECONDS

    async def run(self, *, force: bool = False) -> None:
        """Do the chores that are due (the restore now when ``force``: `once` waited for an
        envelope it deferred)."""
        await self._restore_due(force=force)
        if self._people and anyio.current_time() - self._last_inbox >= INBOX_SECONDS:
            self._last_inbox = anyio.current_time()
            try:
                looked = await tidy_inbox(
                    self._context,
                    self._queue,
                    self._inbox,
                    self._model_for,
                    self._people,
                    cast=self._cast,
                )
            except (TeamsRuntimeError, OSError) as exc:
                logger.warning("the waiting answers were not looked at ({}); trying again", exc)
                return
            self._summary.answers_timed_out += len(looked.timed_out)
            self._summary.answers_renewed += len(looked.renewed)

    async def _restore_due(self, *, force: bool) -> None:
        now = anyio.current_time()
        if not force and now - self._last_restore < RESTORE_SECONDS:
            return
        self._last_restore = now
        try:
            restored = await self._queue.restore_deferred()
        except (TeamsRuntimeError, OSError) as exc:
            logger.warning("deferred envelopes not looked at ({}); trying again", exc)
            return
        if restored:
            logger.info(
                "{} queued again: next attempt due", count_of(restored, "deferred envelope")
            )
