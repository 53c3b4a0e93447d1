"""What ``run --once`` waits for before it ends (``Team.run(once=True)``).

It ends when no envelope waits or is claimed for any role by any worker (another worker's
envelope may hand work to it) and none it deferred itself comes due within its
``deferred_wait``, in all; it waits for those and tries them again, then says what it left
(``RunSummary.left_deferred``). While it waits for envelopes of roles it does not serve that
nobody takes, it says so once (``unserved_roles``).
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from teams_runtime._logs import logger
from teams_runtime.actors.team._reports import RunSummary
from teams_runtime.actors.team._unserved_roles import UnservedRoles
from teams_runtime.storage import QueueAdmin

__all__ = ["OnceWait"]


class OnceWait:
    """The waiting of one ``run --once``: the envelopes it deferred, and how long it waits."""

    def __init__(self, served: Sequence[str], deferred_wait: float) -> None:
        self._deferred_wait = deferred_wait
        self._mine_deferred: set[str] = set()  # ids of envelopes this run deferred, not done
        self._wait_until: float | None = None  # the end of its wait for them
        self._unserved = UnservedRoles(served)

    def finished(self, envelope_id: str, *, deferred: bool) -> None:
        """An envelope this worker handled ended as ``deferred``, or otherwise."""
        if deferred:
            self._mine_deferred.add(envelope_id)
        else:
            self._mine_deferred.discard(envelope_id)

    async def next_wait(self, queue: QueueAdmin, summary: RunSummary) -> float | None:
        """``0`` while other workers' envelopes wait or are claimed (one may come its way),
        else the seconds until the first envelope it deferred itself is due, if that is
        within its ``deferred_wait`` (in all); ``None``: done (what it leaves is then in
        ``summary``). Awaits the queue's snapshot."""
        snapshot = await queue.snapshot()
        if any(snapshot.waiting.values()) or any(snapshot.claimed.values()):
            notice = self._unserved.look(snapshot.waiting)
            if notice is not None:
                logger.warning(notice)
            return 0.0
        deferred = sorted(snapshot.deferred_envelopes, key=lambda e: e.next_attempt)
        mine = [e for e in deferred if e.envelope_id in self._mine_deferred]
        if not mine:
            summary.not_due = deferred  # an earlier run's: named, so "0 envelopes" is not all
            return None
        now = time.time()
        if self._wait_until is None:
            self._wait_until = now + self._deferred_wait
        due = mine[0].next_attempt
        if due > self._wait_until:
            summary.left_deferred, summary.next_attempt = len(mine), due
            summary.left_envelopes = mine
            summary.not_due = [e for e in deferred if e.envelope_id not in self._mine_deferred]
            return None
        return max(due - now, 0.0) + 0.01  # then restored (a file's mtime may round up)
