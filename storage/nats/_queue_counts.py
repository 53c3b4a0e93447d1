"""How many envelopes wait, are claimed or deferred per role on a team's queue stream
(docs/scaling.md, "The queue").

Claimed is each role consumer's ``num_ack_pending`` (delivered, not acked). Waiting is what the
stream holds for the role less that, not the consumer's ``num_pending``: the server counts a
new message into ``num_pending`` a moment after it acknowledged the publish (it tells its
consumers asynchronously), so right after a worker retired (its envelopes queued again as new
messages, the old deliveries acked) ``num_pending`` could show them neither waiting nor
claimed, to ``status`` and to ``run --once`` deciding the team is idle. The stream's messages
per subject, and the consumer's pending acks, change before the server answers a publish or an
ack.

Also what ``status`` and ``run --once`` see of the queue at one moment (``QueueSnapshot``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import msgspec
from nats.js import JetStreamContext
from nats.js.api import ConsumerInfo

from teams_runtime.storage.nats._deferred_queue import deferred_envelope, deferred_messages
from teams_runtime.storage.nats._leases import LeaseBucket
from teams_runtime.storage.nats._names import NatsNames, request_id_of_token
from teams_runtime.storage.protocols import QueueSnapshot

__all__ = ["RoleCounts", "per_role", "queue_snapshot", "role_counts"]


class RoleCounts(msgspec.Struct, frozen=True):
    """Envelopes per role: ``waiting`` for any worker, ``claimed`` by one."""

    waiting: dict[str, int]
    claimed: dict[str, int]


async def role_counts(js: JetStreamContext, names: NatsNames, roles: Sequence[str]) -> RoleCounts:
    """Waiting and claimed envelopes per role of ``roles`` (one round of requests, at once)."""
    consumers, stored = await asyncio.gather(
        _role_consumers(js, names, roles), _deliverable(js, names, roles)
    )
    claimed = {role: info.num_ack_pending or 0 for role, info in consumers.items()}
    waiting = {role: max(stored[role] - claimed[role], 0) for role in roles}
    return RoleCounts(waiting, claimed)


async def _role_consumers(
    js: JetStreamContext, names: NatsNames, roles: Sequence[str]
) -> dict[str, ConsumerInfo]:
    infos = await asyncio.gather(
        *(js.consumer_info(names.queue, names.role_consumer(role)) for role in roles)
    )
    return dict(zip(roles, infos, strict=True))


async def _deliverable(
    js: JetStreamContext, names: NatsNames, roles: Sequence[str]
) -> dict[str, int]:
    """The stream's waiting messages a role consumer delivers, per role: those on
    ``<prefix>.q.<role>.<request token>`` (its filter), waiting or claimed."""
    counts = dict.fromkeys(roles, 0)
    stream = await js.stream_info(names.queue, subjects_filter=names.every_waiting)
    for subject, count in (stream.state.subjects or {}).items():
        place = names.place_of(subject)  # no other shape: never delivered (a stray's)
        if place is not None and place[0] in counts:
            counts[place[0]] += count
    return counts


async def per_role(
    js: JetStreamContext, names: NatsNames, subjects: str, roles: Sequence[str]
) -> dict[str, int]:
    """The queue stream's messages on ``subjects`` (waiting or deferred) per role of
    ``roles`` (another's, a role the team no longer has, are not counted): a deferred one
    naming no request is never restored (a stray, as is any on a subject of another shape:
    ``stray_subjects``)."""
    counts = dict.fromkeys(roles, 0)
    stream = await js.stream_info(names.queue, subjects_filter=subjects)
    for subject, count in (stream.state.subjects or {}).items():
        place = names.place_of(subject)
        if place is None or place[0] not in counts:
            continue
        if subject.startswith(f"{names.prefix}.q.") or request_id_of_token(place[1]) is not None:
            counts[place[0]] += count
    return counts


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
