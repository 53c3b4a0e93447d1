"""Saying, in ``run --once``, which roles it waits for that nobody serves.

``run --once`` ends when no envelope waits or is claimed for any role, by any worker, so a
worker started with ``--roles planner`` while envelopes wait for qa waits for a worker that
serves qa. An envelope a live worker serves is claimed within a tenth of a second; one that
stays waiting for ``UNSERVED_NOTICE_SECONDS`` for a role this worker does not serve is most
likely served by nobody. One content-free line says so (which roles, how many envelopes), once
for each set of such roles, instead of a silent wait.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence

from teams_runtime.codecs.formats import count_of

__all__ = ["UNSERVED_NOTICE_SECONDS", "UnservedRoles"]

UNSERVED_NOTICE_SECONDS = 5.0


class UnservedRoles:
    """Watches what waits for the roles a worker does not serve (``served``)."""

    def __init__(
        self,
        served: Sequence[str],
        *,
        after: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._served = frozenset(served)
        self._after = UNSERVED_NOTICE_SECONDS if after is None else after
        self._clock = clock
        self._roles: tuple[str, ...] = ()  # the unserved roles with envelopes waiting now
        self._since = 0.0  # since when those have waited
        self._said: tuple[str, ...] = ()  # the roles the last notice named

    def look(self, waiting: Mapping[str, int]) -> str | None:
        """Called each time ``--once`` finds envelopes waiting (``waiting``: per role, not
        claimed). The line to log when roles this worker does not serve have had envelopes
        waiting ``after`` seconds, once per set of such roles; else ``None``."""
        # By name: the same set of roles reads the same, whatever order the counts came in.
        roles = tuple(sorted(r for r, n in waiting.items() if n > 0 and r not in self._served))
        now = self._clock()
        if roles != self._roles:
            self._roles, self._since = roles, now
        if not roles or now - self._since < self._after or roles == self._said:
            return None
        self._said = roles
        counts = ", ".join(f"{role} {waiting[role]}" for role in roles)
        total = sum(waiting[role] for role in roles)
        return (
            f"run --once is waiting for {count_of(total, 'envelope')} of roles this worker "
            f"does not serve ({counts}) that no worker has taken for {self._after:g} s; start "
            f"a worker for them (teams-runtime run --roles {','.join(roles)}), or stop this one "
            "(Ctrl-C: what it holds goes back to the queue)"
        )
