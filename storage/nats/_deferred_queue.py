"""Deferred envelopes on NATS: each waits on ``<prefix>.deferred.<role>.<id>`` in the queue
stream until the time in its ``Tr-Next-Attempt`` header (``storage._deferrals`` says how long a
deferral waits), when any worker's ``restore_deferred`` queues it again. They are read by
sequence, never consumed, so one that is not due yet stays untouched."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import nats.js.errors
from nats.js import JetStreamContext
from nats.js.api import RawStreamMsg

from teams_runtime.storage._deferrals import deferral_view
from teams_runtime.storage.nats._names import NatsNames, request_id_of_token, token_of
from teams_runtime.storage.nats.connection import NatsConnection
from teams_runtime.storage.protocols import DeferredEnvelope

__all__ = [
    "NEXT_ATTEMPT_HEADER",
    "deferred_envelope",
    "deferred_messages",
    "next_attempt",
    "restore_due",
]

NEXT_ATTEMPT_HEADER = "Tr-Next-Attempt"  # a deferred envelope's next attempt (Unix time)
_DELETE_FAILED = 10057  # JetStream: the message to delete is gone (acked meanwhile)
# The latest next attempt taken for a time: 9999-12-31T23:59:59Z. The runtime writes times a few
# minutes ahead; one past this (another program's header) would never come due and cannot
# even be shown as a date, so it is read as due at once and the envelope is tried again.
_LATEST_ATTEMPT = 253402300799.0


def next_attempt(headers: dict[str, str] | None) -> float:
    """A deferred envelope's next attempt (0: due at once, deferred by an older version or a
    header that is no time: not a number, not finite, before 1970 or after year 9999)."""
    try:
        when = float((headers or {}).get(NEXT_ATTEMPT_HEADER, 0))
    except ValueError:
        return 0.0
    return when if math.isfinite(when) and 0.0 <= when <= _LATEST_ATTEMPT else 0.0


async def deferred_messages(js: JetStreamContext, names: NatsNames) -> list[RawStreamMsg]:
    """Every deferred envelope in the queue stream, oldest first (read, not consumed)."""
    messages: list[RawStreamMsg] = []
    seq = 1
    while True:
        try:
            message = await js.get_msg(
                names.queue, seq=seq, subject=names.every_deferred, next=True
            )
        except nats.js.errors.NotFoundError:
            return messages
        if message.seq is None:
            return messages
        messages.append(message)
        seq = message.seq + 1


def _role_and_request(
    names: NatsNames, message: RawStreamMsg, roles: Sequence[str]
) -> tuple[str, str] | None:
    """The role and request id of a deferred envelope; ``None`` for a subject the runtime
    never defers to (another program's: a stray, which ``status`` names and no worker
    restores), or one of a role not in ``roles`` (the team's)."""
    place = names.place_of(message.subject or "")
    if place is None or place[0] not in roles:
        return None
    request_id = request_id_of_token(place[1])
    return None if request_id is None else (place[0], request_id)


def deferred_envelope(
    names: NatsNames, message: RawStreamMsg, roles: Sequence[str]
) -> DeferredEnvelope | None:
    """What ``status`` shows of one deferred envelope (ids, counts, its next attempt);
    ``None`` for a stray."""
    found = _role_and_request(names, message, roles)
    if found is None:
        return None
    envelope_id, deferrals = deferral_view(message.data or b"")
    return DeferredEnvelope(
        role=found[0],
        request_id=found[1],
        envelope_id=envelope_id,
        deferrals=deferrals,
        next_attempt=next_attempt(message.headers),
    )


async def restore_due(
    connection: NatsConnection,
    js: JetStreamContext,
    now: float,
    once: Callable[[int], dict[str, str]],
) -> int:
    """Queue the deferred envelopes due at ``now`` again: each published as a waiting envelope
    (with the headers ``once`` gives for its sequence, so two workers restoring it together
    make one copy), then deleted from its deferred subject; returns how many."""
    names = connection.names
    restored = 0
    for message in await deferred_messages(js, names):
        if message.seq is None or next_attempt(message.headers) > now:
            continue
        found = _role_and_request(names, message, connection.roles)
        if found is None:
            continue  # a stray: it stays where it is, and `status` names it
        waiting = names.waiting_subject(found[0], token_of(found[1]))
        await js.publish(waiting, message.data or b"", headers=once(message.seq))
        try:
            await connection.api(f"STREAM.MSG.DELETE.{names.queue}", {"seq": message.seq})
        except nats.js.errors.APIError as exc:
            if exc.err_code != _DELETE_FAILED:  # else another worker restored it
                raise
        restored += 1
    return restored
