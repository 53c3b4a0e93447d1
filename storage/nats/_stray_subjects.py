"""Envelopes on queue subjects the runtime never writes (docs/scaling.md, "Strays").

Anyone with access to the server can publish under a team's queue subjects: to a role no
consumer reads (``teams.q.nobody.x``), with more or fewer tokens than the runtime writes
(``teams.q.qa.a.b``), with a last token that is no request id's (``teams.q.qa.=ZZ``). Nothing
delivers the first two, so they would wait in the work-queue stream forever, unseen: ``status``
names each such subject with its count (``stray_subjects``) and ``purge-strays`` moves them to
the rejected stream with the reason (``set_aside``). A claim whose subject and envelope do not
agree is rejected by the worker that got it (``check_subject``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection

import nats.js.errors
from nats.js import JetStreamContext
from nats.js.api import RawStreamMsg

from teams_runtime.codecs.envelopes import MessageEnvelope
from teams_runtime.exceptions import EnvelopeError
from teams_runtime.storage.nats._names import (
    REASON_HEADER,
    NatsNames,
    request_id_of_token,
    token_of,
)
from teams_runtime.storage.nats._server_errors import CONSUMER_NOT_FOUND
from teams_runtime.storage.nats.connection import NatsConnection
from teams_runtime.storage.protocols import Stray

__all__ = ["check_subject", "reading_roles", "set_aside", "stray_subjects", "why_stray"]

_DELETE_FAILED = 10057  # JetStream: the message to delete is gone (taken meanwhile)
_CONSUMERS_PAGE = 256  # the server lists at most this many consumers per request


def check_subject(envelope: MessageEnvelope, token: str, shown: str) -> None:
    """Raise ``EnvelopeError`` unless the request token of the subject an envelope was claimed
    on is its request id's: the runtime writes no other (``cancel`` and ``status`` go by it)."""
    if token_of(envelope.request_id) == token:
        return
    if request_id_of_token(token) is None:  # `=ZZ`: no token the runtime writes for any id
        why = "the last token of its subject is no request id"
    else:
        why = "its subject names another request than its request id"
    raise EnvelopeError(f"{shown}: {why} (not an envelope teams-runtime queued).")


async def reading_roles(js: JetStreamContext, names: NatsNames) -> set[str]:
    """The roles some consumer on the queue stream delivers (``<prefix>_q_<role>`` reading
    ``<prefix>.q.<role>.*``), whichever host made it and whatever roles its config names."""
    stem = names.role_consumer("")
    roles: set[str] = set()
    offset = 0
    while True:
        page = await js.consumers_info(names.queue, offset=offset or None)
        for info in page:
            name = info.name or ""
            role = name.removeprefix(stem)
            if (
                name.startswith(stem)
                and role
                and info.config.filter_subject == names.waiting_subject(role)
            ):
                roles.add(role)
        if len(page) < _CONSUMERS_PAGE:
            return roles
        offset += len(page)


def why_stray(names: NatsNames, subject: str, roles: Collection[str]) -> str | None:
    """Why no worker takes the envelopes on the queue stream's ``subject`` as they are
    (``None``: a role reads it, and it names a request the way the runtime does)."""
    place = names.place_of(subject)
    if place is None:
        return f"no role reads it (not {names.prefix}.q.<role>.<request>, as teams-runtime writes)"
    role, token = place
    if role not in roles:
        return f"no role reads it (no consumer {names.role_consumer(role)})"
    if request_id_of_token(token) is None:
        then = "its role's worker rejects it" if _waiting(subject) else "no worker restores it"
        return f"its last token is no request id teams-runtime writes: {then}"
    return None


def _waiting(subject: str) -> bool:
    return subject.split(".")[1] == "q"  # else deferred: the queue stream holds no other kind


async def _strays(connection: NatsConnection) -> list[tuple[str, str, int]]:
    """Each stray subject of the queue stream, why, and how many envelopes wait on it."""
    js, names = connection.js, connection.names
    roles, subjects = await asyncio.gather(
        reading_roles(js, names), connection.stream_subjects(names.queue, ">")
    )
    found = []
    for subject, count in sorted(subjects.items()):
        reason = why_stray(names, subject, roles)
        if reason is not None:
            found.append((subject, reason, count))
    return found


async def stray_subjects(connection: NatsConnection) -> list[Stray]:
    """Each subject of the queue stream no role reads as it is, with its count and why."""
    queue = connection.names.queue
    return [
        Stray(where=f"nats:{queue} {subject}", reason=reason, envelopes=count)
        for subject, reason, count in await _strays(connection)
    ]


async def set_aside(connection: NatsConnection) -> int:
    """Move every envelope on a stray subject to the rejected stream (``<prefix>.rejected.``
    and the subject's tokens after its kind, the reason in ``Tr-Reason``), then delete it from
    the queue; returns how many. One a role's consumer has delivered is left to the worker
    that holds it (it rejects it itself)."""
    js, names = connection.js, connection.names
    moved = 0
    for subject, reason, _ in await _strays(connection):
        seq = await _first_undelivered(connection, subject)
        while (message := await _next(js, names, subject, seq)) is not None:
            assert message.seq is not None
            once = f"rejected:{names.queue}/{message.seq}"  # as a worker's reject of it
            headers = {REASON_HEADER: reason, "Nats-Msg-Id": once}
            await js.publish(names.set_aside_subject(subject), message.data or b"", headers=headers)
            try:
                await connection.api(f"STREAM.MSG.DELETE.{names.queue}", {"seq": message.seq})
                moved += 1
            except nats.js.errors.APIError as exc:
                if exc.err_code != _DELETE_FAILED:
                    raise
            seq = message.seq + 1
    return moved


async def _first_undelivered(connection: NatsConnection, subject: str) -> int:
    """The first sequence of ``subject`` no role consumer has delivered (1 if none reads it)."""
    names = connection.names
    place = names.place_of(subject)
    if place is None or not _waiting(subject):
        return 1
    try:
        info = await connection.js.consumer_info(names.queue, names.role_consumer(place[0]))
    except nats.js.errors.NotFoundError as exc:
        if exc.err_code != CONSUMER_NOT_FOUND:
            raise
        return 1
    return (info.delivered.stream_seq if info.delivered else 0) + 1


async def _next(
    js: JetStreamContext, names: NatsNames, subject: str, seq: int
) -> RawStreamMsg | None:
    try:
        message = await js.get_msg(names.queue, seq=seq, subject=subject, next=True)
    except nats.js.errors.NotFoundError:
        return None
    return message if message.seq is not None else None
