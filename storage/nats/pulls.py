"""Taking deliveries from a role consumer at once: one no-wait pull (docs/scaling.md, "The
queue": a delivery is a claim)."""

from __future__ import annotations

import json

from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js import JetStreamContext

__all__ = ["pull_now"]


async def pull_now(client: Client, stream: str, consumer: str, limit: int) -> list[Msg]:
    """Up to ``limit`` deliveries of ``consumer`` on ``stream`` available now (no waiting for
    more)."""
    inbox = client.new_inbox()
    sub = await client.subscribe(inbox)
    messages: list[Msg] = []
    try:
        request = json.dumps({"batch": limit, "no_wait": True}).encode()
        subject = f"$JS.API.CONSUMER.MSG.NEXT.{stream}.{consumer}"
        await client.publish(subject, request, reply=inbox)
        while len(messages) < limit:
            msg = await sub.next_msg(timeout=5)
            if JetStreamContext.is_status_msg(msg):
                break  # 404: nothing (more) waiting
            messages.append(msg)
    finally:
        await sub.unsubscribe()
    return messages
