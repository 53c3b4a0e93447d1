"""Published projections: the immutable snapshots a ContextActor publishes for its handles.

A warm ask (a record unchanged since the actor last answered for it) is most of what roles
ask, and a round trip through the actor's mailbox would be most of its cost. So the actor
publishes each projection it gives as a ``Snapshot`` (the record's version and the projection, both
immutable), and a handle serves an ask from it while the store's ``version()`` still equals
the snapshot's, without waiting for the actor.

Who does what, so that nothing is shared that changes under a reader:

- Only the actor's own tasks (on the event loop) publish and retract, and only values they
  built: a snapshot is never changed after it is published, only replaced.
- A handle only reads: one dictionary look-up and one ``version()`` call (for files one
  ``stat``, on NATS what the store's watch saw), both without an await, so nothing the actor
  does can interleave with them; a snapshot whose version no longer matches is left for the
  actor to replace when the ask reaches it.
- A write retracts the request's snapshot before it answers, so an asker never gets an answer
  older than its own write, whatever the store's versions look like.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass

from teams_runtime.codecs.projection_reply import Projection

__all__ = ["PublishedProjections", "Snapshot"]


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The response to a projection ask about one request while its record is at ``version``."""

    version: Hashable
    projection: Projection


class PublishedProjections:
    """The snapshots one ContextActor publishes, at most ``limit`` (the oldest published goes
    first), read by its handles."""

    def __init__(self, version_of: Callable[[str], Hashable | None], limit: int) -> None:
        self._version_of = version_of  # the store's version(): no read, no round trip
        self._limit = limit
        self._snapshots: dict[str, Snapshot] = {}

    def __len__(self) -> int:
        return len(self._snapshots)

    def projection(self, request_id: str) -> Projection | None:
        """The published projection of ``request_id`` if the record is still at its version;
        ``None``: ask the actor. Changes nothing (a handle calls it from its own task)."""
        snapshot = self._snapshots.get(request_id)
        if snapshot is None or self._version_of(request_id) != snapshot.version:
            return None
        return snapshot.projection

    def publish(self, request_id: str, snapshot: Snapshot) -> None:
        """Make ``snapshot`` the request's published projection (the actor's tasks only)."""
        self._snapshots.pop(request_id, None)
        self._snapshots[request_id] = snapshot  # the newest last: the oldest goes first
        while len(self._snapshots) > self._limit:
            del self._snapshots[next(iter(self._snapshots))]

    def retract(self, request_id: str) -> None:
        """Withdraw the request's published projection (the actor's tasks only): it is about to
        change."""
        self._snapshots.pop(request_id, None)
