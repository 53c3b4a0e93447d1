"""Envelopes as NATS messages on a role's queue: one envelope as one message, its body cut to
fit when the whole would not (a server refuses a message larger than its ``max_payload``), and
taking deliveries from a role consumer at once, one no-wait pull (docs/scaling.md, "The queue":
a delivery is a claim), and removing a request's envelopes (``cancel``): those its role
consumers have not delivered yet, and its deferred ones. One a worker holds stays with it, as a
claimed file does on the file storage.
"""

from __future__ import annotations

import base64
import json

import msgspec
import nats.js.errors
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js import JetStreamContext

from teams_runtime._logs import logger
from teams_runtime.codecs.envelopes import MessageEnvelope
from teams_runtime.codecs.formats import pretty_json_bytes
from teams_runtime.storage.nats._queued_ids import QueuedIds
from teams_runtime.storage.nats._server_errors import CONSUMER_NOT_FOUND, NO_MESSAGE_FOUND
from teams_runtime.storage.nats.connection import NatsConnection

__all__ = ["drop_waiting_and_deferred", "fitting", "pull_now"]


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


_DELETE_FAILED = 10057  # JetStream: the message to delete is gone (acked meanwhile)


async def drop_waiting_and_deferred(connection: NatsConnection, token: str) -> int:
    """Remove the envelopes of the request ``token`` (a ``token_of`` token) that no worker was
    handed, and its deferred ones, with their queued-id keys; returns how many."""
    js, names = connection.js, connection.names
    stream = await js.stream_info(names.queue, subjects_filter=names.waiting_subject("*", token))
    places = [names.place_of(subject) for subject in stream.state.subjects or {}]
    # Only the team's roles have a consumer (one the team no longer has keeps its envelopes).
    roles = sorted({place[0] for place in places if place is not None} & set(connection.roles))
    dropped: list[bytes] = []
    for role in roles:
        dropped += await _drop_waiting(connection, role, token)
    # Deferred ones are delivered to no worker (the deferred consumer only moves them back).
    dropped += await _delete_from(connection, 1, names.deferred_subject("*", token))
    ids = QueuedIds(connection)
    for data in dropped:
        await ids.forget_in(data)
    return len(dropped)


async def _drop_waiting(connection: NatsConnection, role: str, token: str) -> list[bytes]:
    """Delete the role's envelopes on ``token`` that its consumer has not delivered yet."""
    names = connection.names
    try:
        info = await connection.js.consumer_info(names.queue, names.role_consumer(role))
    except nats.js.errors.NotFoundError as exc:
        if exc.err_code != CONSUMER_NOT_FOUND:
            raise
        return []  # no role reads them: strays, left to `purge-strays`
    seq = (info.delivered.stream_seq if info.delivered else 0) + 1
    return await _delete_from(connection, seq, names.waiting_subject(role, token))


async def _delete_from(connection: NatsConnection, seq: int, subject: str) -> list[bytes]:
    """Delete the queue's messages on ``subject`` from ``seq`` on; the ones deleted."""
    queue = connection.names.queue
    dropped: list[bytes] = []
    while True:
        try:
            answer = await connection.api(
                f"STREAM.MSG.GET.{queue}", {"seq": seq, "next_by_subj": subject}
            )
        except nats.js.errors.APIError as exc:
            if exc.err_code == NO_MESSAGE_FOUND:
                return dropped
            raise
        seq = int(answer["message"]["seq"])
        try:
            await connection.api(f"STREAM.MSG.DELETE.{queue}", {"seq": seq})
            dropped.append(base64.b64decode(answer["message"].get("data", "")))
        except nats.js.errors.APIError as exc:
            if exc.err_code != _DELETE_FAILED:  # else: claimed and finished meanwhile
                raise
        seq += 1
