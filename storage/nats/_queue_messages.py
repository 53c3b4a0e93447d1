"""Envelopes as NATS messages on a role's queue: one envelope as one message, its body cut to
fit when the whole would not (a server refuses a message larger than its ``max_payload``), and
taking deliveries from a role consumer at once, one no-wait pull (docs/scaling.md, "The queue":
a delivery is a claim).
"""

from __future__ import annotations

import json

import msgspec
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js import JetStreamContext

from teams_runtime._logs import logger
from teams_runtime.codecs.envelopes import MessageEnvelope
from teams_runtime.codecs.formats import pretty_json_bytes

__all__ = ["fitting", "pull_now"]


_CUT_NOTE = (
    "\n[... {cut} bytes of this body were cut to fit one NATS message; "
    "the whole text is in the request's record]"
)


def fitting(envelope: MessageEnvelope, room: int) -> bytes:
    """The envelope's bytes, its ``body`` shortened if they would not fit one message.

    A follow-up's body is the role's summary, which the record keeps whole in its report event
    (what the next role's prompt shows): cutting the copy in the envelope loses nothing, where
    an envelope the server refuses would stall the request. Logged with sizes only.
    """
    data = pretty_json_bytes(envelope) + b"\n"
    if len(data) <= room:
        return data
    body = envelope.body.encode("utf-8")
    over = len(data) - room + len(_CUT_NOTE) + 20 + len(body) // 4  # escapes may grow it
    keep = body[: max(len(body) - over, 0)].decode("utf-8", "ignore")
    cut = len(body) - len(keep.encode("utf-8"))
    shortened = msgspec.structs.replace(envelope, body=keep + _CUT_NOTE.format(cut=cut))
    logger.warning(
        "envelope {} for {}: body cut by {} bytes to fit one NATS message ({} bytes)",
        envelope.envelope_id,
        envelope.target,
        cut,
        room,
    )
    return pretty_json_bytes(shortened) + b"\n"


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
