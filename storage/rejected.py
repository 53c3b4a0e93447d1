"""Envelopes set aside for a person (``WorkQueue.reject``), and putting them back.

A role rejects an envelope it cannot use (bytes that are no envelope, a record that cannot be
read) instead of failing over it again and again; each backend keeps it with its reason
(files: ``queue/rejected/``; NATS: the team's rejected stream). Once the cause is fixed (the
record restored, the file edited), ``RejectedShelf.requeue`` puts it back in its role's queue
as it was, where the next worker takes it (and rejects it again if it is still unusable).
``teams-runtime status`` lists them, ``teams-runtime retry --rejected`` puts them back.

Strays that ``purge-strays`` set aside (envelopes where no role reads: docs/operations.md,
"Strays") are kept there too. Each backend lists them as strays, alike, and never puts one
back: it would go again where no role reads it.
"""

from __future__ import annotations

from typing import Protocol

import msgspec

__all__ = ["RejectedEnvelope", "RejectedShelf"]


class RejectedEnvelope(msgspec.Struct, frozen=True, kw_only=True):
    """One envelope set aside: whose, the shelf's name for it, and why (content-free)."""

    role: str  # "" for a stray: no role of the team reads where it would go back to
    request_id: str  # "" when neither its name nor its bytes say (an unreadable one)
    name: str  # files: its file name under queue/rejected/; NATS: its stream sequence
    reason: str
    # Where it would go back to no role reads (a queue folder or subject of no role of the
    # team, a subject the runtime never writes): ``requeue`` leaves it where it is.
    stray: bool = False


class RejectedShelf(Protocol):
    """The rejected envelopes of a team, on its backend (async, like the queue; its blocking
    face is ``storage.blocking.BlockingRejectedShelf``)."""

    async def listing(self) -> list[RejectedEnvelope]:
        """Every rejected envelope, oldest first."""
        ...

    async def requeue(self, request_id: str | None = None) -> int:
        """Put the rejected envelopes of ``request_id`` (``None``: every one) back in their
        roles' queues, bytes unchanged, and forget their reasons; returns how many. Strays
        stay where they are."""
        ...
