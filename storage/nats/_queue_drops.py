"""Removing a request's envelopes from a team's queue stream (``cancel``): those its role
consumers have not delivered yet, and its deferred ones. One a worker holds stays with it, as
a claimed file does on the file storage (docs/scaling.md, "The queue")."""

from __future__ import annotations

import nats.js.errors

from teams_runtime.storage.nats._server_errors import CONSUMER_NOT_FOUND
from teams_runtime.storage.nats.connection import NatsConnection

__all__ = ["drop_waiting_and_deferred"]

_NO_MESSAGE_FOUND = 10037  # JetStream: a message get found nothing (at or after that sequence)
_DELETE_FAILED = 10057  # JetStream: the message to delete is gone (acked meanwhile)


async def drop_waiting_and_deferred(connection: NatsConnection, token: str) -> int:
    """Remove the envelopes of the request ``token`` (a ``token_of`` token) that no worker was
    handed, and its deferred ones; returns how many."""
    js, names = connection.js, connection.names
    stream = await js.stream_info(names.queue, subjects_filter=names.waiting_subject("*", token))
    places = [names.place_of(subject) for subject in stream.state.subjects or {}]
    # Only the team's roles have a consumer (one the team no longer has keeps its envelopes).
    roles = sorted({place[0] for place in places if place is not None} & set(connection.roles))
    dropped = 0
    for role in roles:
        dropped += await _drop_waiting(connection, role, token)
    answer = await connection.api(
        f"STREAM.PURGE.{names.queue}", {"filter": names.deferred_subject("*", token)}
    )
    return dropped + int(answer.get("purged", 0))


async def _drop_waiting(connection: NatsConnection, role: str, token: str) -> int:
    """Delete the role's envelopes on ``token`` that its consumer has not delivered yet."""
    names = connection.names
    queue = names.queue
    try:
        info = await connection.js.consumer_info(queue, names.role_consumer(role))
    except nats.js.errors.NotFoundError as exc:
        if exc.err_code != CONSUMER_NOT_FOUND:
            raise
        return 0  # no role reads them: strays, left to `purge-strays`
    seq = (info.delivered.stream_seq if info.delivered else 0) + 1
    subject = names.waiting_subject(role, token)
    dropped = 0
    while True:
        try:
            answer = await connection.api(
                f"STREAM.MSG.GET.{queue}", {"seq": seq, "next_by_subj": subject}
            )
        except nats.js.errors.APIError as exc:
            if exc.err_code == _NO_MESSAGE_FOUND:
                return dropped
            raise
        seq = int(answer["message"]["seq"])
        try:
            await connection.api(f"STREAM.MSG.DELETE.{queue}", {"seq": seq})
            dropped += 1
        except nats.js.errors.APIError as exc:
            if exc.err_code != _DELETE_FAILED:  # else: claimed and finished meanwhile
                raise
        seq += 1
