"""What ``status`` and ``run --once`` see of a team's queue on NATS at one moment: envelopes
per role (waiting, claimed, deferred), each deferred envelope, and every worker's lease."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from nats.js import JetStreamContext

from teams_runtime.storage.nats.deferred_queue import deferred_envelope, deferred_messages
from teams_runtime.storage.nats.leases import LeaseBucket
from teams_runtime.storage.nats.names import NatsNames
from teams_runtime.storage.nats.queue_counts import per_role, role_counts
from teams_runtime.storage.protocols import QueueSnapshot

__all__ = ["queue_snapshot"]


async def queue_snapshot(
    js: JetStreamContext,
    names: NatsNames,
    leases: LeaseBucket,
    lease_seconds: float,
    roles: Sequence[str],
) -> QueueSnapshot:
    """Per role of ``roles`` (the team's): waiting (not delivered), claimed (delivered, not
    acked), deferred; each deferred envelope (strays left out: ``stray_subjects`` names them)
    and the leases."""
    counts, deferred, messages, workers = await asyncio.gather(
        role_counts(js, names, roles),
        per_role(js, names, names.every_deferred, roles),
        deferred_messages(js, names),
        leases.every_lease(lease_seconds),
    )
    shown = [deferred_envelope(names, message, roles) for message in messages]
    envelopes = [envelope for envelope in shown if envelope is not None]
    return QueueSnapshot(
        waiting=counts.waiting,
        claimed=counts.claimed,
        deferred=deferred,
        workers=workers,
        deferred_envelopes=sorted(envelopes, key=lambda envelope: envelope.next_attempt),
    )
