"""How many envelopes wait, are claimed or deferred per role on a team's queue stream: read
from the role consumers' state and the stream's messages per subject (docs/scaling.md)."""

from __future__ import annotations

import asyncio

from nats.js import JetStreamContext
from nats.js.api import ConsumerInfo

from teams_runtime.codecs.roles import ROLES
from teams_runtime.storage.nats.names import NatsNames

__all__ = ["per_role", "role_consumers"]


async def role_consumers(js: JetStreamContext, names: NatsNames) -> dict[str, ConsumerInfo]:
    """Each role consumer's state: ``num_pending`` never delivered (waiting),
    ``num_ack_pending`` delivered and not acked (claimed)."""
    infos = await asyncio.gather(
        *(js.consumer_info(names.queue, names.role_consumer(role)) for role in ROLES)
    )
    return dict(zip(ROLES, infos, strict=True))


async def per_role(js: JetStreamContext, names: NatsNames, subjects: str) -> dict[str, int]:
    """The queue stream's messages on ``subjects`` (waiting or deferred) per role."""
    counts = dict.fromkeys(ROLES, 0)
    stream = await js.stream_info(names.queue, subjects_filter=subjects)
    for subject, count in (stream.state.subjects or {}).items():
        role = names.role_of(subject)
        if role in counts:
            counts[role] += count
    return counts
