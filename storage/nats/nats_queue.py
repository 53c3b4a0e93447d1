"""Envelopes waiting for roles on NATS JetStream: ``NatsWorkQueue``, the ``WorkQueue`` of the
``nats`` storage (docs/scaling.md).

One work-queue stream per team (``<prefix>_queue``) holds every waiting envelope on
``<prefix>.q.<role>.<id>``; each role has one durable pull consumer that every worker of every
host shares, so a delivery is a claim and exactly one worker holds it. The claim is acked only
when the outcome is persisted (``done``); a worker that dies stops acking and the server
delivers the envelope again after the consumer's ack wait (the team's lease, read from the
server); a live worker's ``renew`` tells the server it is still working (an in-progress ack per
claim).
Released envelopes wait on ``<prefix>.deferred.<role>.<id>`` until the time in their
``Tr-Next-Attempt`` header (``deferred_queue``), when any worker's ``restore_deferred`` queues
them again; rejected ones go to ``<prefix>_rejected`` with the reason in a header. Worker
leases are a KV bucket: each worker's entry lists what it holds, written when it claims,
finishes and renews.

What the file queue calls waiting is what no worker was handed: a retiring worker queues its
envelopes again as new messages (not a nak, which the server would still count as delivered),
so ``status`` shows them waiting; ``drop`` (cancel) removes only never-delivered envelopes.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import time
from collections.abc import Callable
from typing import Any

import anyio.lowlevel
import msgspec
from nats.aio.msg import Msg
from nats.js import JetStreamContext

from teams_runtime.codecs.envelopes import MessageEnvelope
from teams_runtime.codecs.request_ids import check_request_id, with_checked_request_id
from teams_runtime.codecs.roles import check_role
from teams_runtime.exceptions import EnvelopeError, StorageError
from teams_runtime.storage._deferrals import RetrySchedule, deferral_view, with_deferrals
from teams_runtime.storage.nats._deferred_queue import NEXT_ATTEMPT_HEADER, restore_due
from teams_runtime.storage.nats._leases import LeaseBucket
from teams_runtime.storage.nats._names import request_id_of_token, token_of
from teams_runtime.storage.nats._queue_counts import per_role, queue_snapshot, role_counts
from teams_runtime.storage.nats._queue_messages import drop_waiting_and_deferred, fitting, pull_now
from teams_runtime.storage.nats._queued_ids import QueuedIds
from teams_runtime.storage.nats._stray_subjects import check_subject, set_aside, stray_subjects
from teams_runtime.storage.nats._values import message_room
from teams_runtime.storage.nats.connection import NatsConnection
from teams_runtime.storage.nats.rejected_queue import REASON_HEADER
from teams_runtime.storage.protocols import Claim, QueueSnapshot, Stray
from teams_runtime.storage.queued_envelopes import decode_envelope, new_worker_id

__all__ = ["RECHECK_SECONDS", "NatsWorkQueue"]

RECHECK_SECONDS = 1.0  # an idle worker asks the server this often even without a doorbell


def _once(step: str, ticket: str) -> dict[str, str]:
    """A message id that makes the server keep one copy of a step retried within its
    de-duplication window (2 minutes)."""
    return {"Nats-Msg-Id": f"{step}:{ticket}"}


class _Held(msgspec.Struct, frozen=True):
    """A delivery this worker holds: where to ack it and what to move elsewhere."""

    reply: str
    role: str
    request_token: str
    data: bytes


class NatsWorkQueue:
    """The team's envelope queue on a NATS server, as seen by one worker."""

    def __init__(
        self,
        connection: NatsConnection,
        *,
        worker_id: str | None = None,
        retry: RetrySchedule | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.connection = connection
        self.names = connection.names
        self.worker_id = worker_id or new_worker_id()
        self._retry = retry or RetrySchedule()
        self._clock = clock  # when deferred envelopes are due
        self._held: dict[str, _Held] = {}
        self._leases = LeaseBucket(connection, self.worker_id, self._holds)
        self._ids = QueuedIds(connection)
        # A doorbell per role: rung by every envelope queued for it (a plain subscription sees
        # each publish), so an idle worker's claim asks the server only when there may be
        # work, or every RECHECK_SECONDS for deliveries nobody rang for (redeliveries).
        # Made at the first claim: a queue that only puts (`submit`) subscribes to nothing.
        self.roles = connection.roles  # the team's: the connection made their consumers
        self._maybe_work = dict.fromkeys(self.roles, True)
        self._last_pull = dict.fromkeys(self.roles, 0.0)
        self._doorbell: Any = None

    async def _listen_for_puts(self) -> None:
        async def rung(msg: Msg) -> None:
            place = self.names.place_of(msg.subject)
            if place is not None and place[0] in self._maybe_work:
                self._maybe_work[place[0]] = True

        self._doorbell = await self.connection.client.subscribe(
            self.names.waiting_subject(), cb=rung
        )

    @property
    def lease_seconds(self) -> float:
        """How long a claim stays this worker's without a renewal: the ack wait the role
        consumers have on the server (whoever made them chose it), not this host's
        ``queue.lease_seconds``, so every worker of the team renews in time."""
        return self.connection.queue_ack_seconds

    @property
    def renew_trouble(self) -> str:
        return f"the NATS server at {self.connection.settings.shown_url} did not answer"

    @property
    def _js(self) -> JetStreamContext:
        return self.connection.js

    # --- putting and taking --------------------------------------------------------------

    async def put(self, envelope: MessageEnvelope) -> str:
        """Queue an envelope (durable once the server acknowledged it), once per id while the
        first may exist (``QueuedIds``); one without an ``envelope_id`` gets one."""
        envelope = with_checked_request_id(envelope)  # subjects and records use the NFC form
        check_role(envelope.target, self.roles)
        if not envelope.envelope_id:
            stem = f"{time.time_ns():020d}-{secrets.token_hex(3)}"
            envelope = msgspec.structs.replace(envelope, envelope_id=f"env-{stem}")
        token = token_of(envelope.request_id)
        subject = self.names.waiting_subject(envelope.target, token)
        data = fitting(envelope, message_room(self.connection.client.max_payload))
        headers = {"Nats-Msg-Id": envelope.envelope_id}

        async def put() -> str:
            first = await self._ids.first(envelope.envelope_id, envelope.target, token)
            if first is not None:
                return first  # one envelope per id: this one is queued already
            ack = await self._js.publish(subject, data, headers=headers)
            return f"{self.names.queue}/{ack.seq}"

        return await self.connection.run(put, what="a queue put")

    async def claim(self, role: str, limit: int) -> list[Claim]:
        if limit < 1:
            return []
        check_role(role, self.roles)
        if self._doorbell is None:
            await self.connection.run(self._listen_for_puts, what="a queue subscription")
        if not self._maybe_work[role]:
            # A ring that came in with the last answer (a put's ack follows the put's own
            # delivery to the doorbell) is heard first: its callback runs on this loop.
            await anyio.lowlevel.checkpoint()
        now = time.monotonic()
        if not self._maybe_work[role] and now - self._last_pull[role] < RECHECK_SECONDS:
            return []
        self._maybe_work[role] = False  # before the pull: a put meanwhile rings again
        self._last_pull[role] = now
        consumer = self.names.role_consumer(role)
        messages = await self.connection.run(
            lambda: pull_now(self.connection.client, self.names.queue, consumer, limit),
            what="a queue claim",
        )
        if len(messages) == limit:
            self._maybe_work[role] = True  # a full batch: more may wait
        claims = []
        for msg in messages:
            seq = msg.metadata.sequence.stream
            ticket = f"{self.names.queue}/{seq}"
            request_token = msg.subject.rsplit(".", 1)[-1]  # the consumer's filter: 4 tokens
            self._held[ticket] = _Held(msg.reply, role, request_token, msg.data)
            try:
                envelope = decode_envelope(msg.data, role, ticket, f"env-{self.names.queue}-{seq}")
                check_subject(envelope, request_token, ticket)
                claims.append(Claim(ticket, role, envelope))
            except EnvelopeError as exc:
                claims.append(Claim(ticket, role, None, str(exc)))
        if claims:
            await self._tell_holds()  # `status` shows them held now, not at the next renewal
        return claims

    def _take(self, claim: Claim) -> _Held | None:
        return self._held.pop(claim.ticket, None)

    async def _ack(self, reply: str) -> None:
        # A request, not a publish: when it returns, the server has removed the envelope.
        await self.connection.client.request(reply, b"+ACK", timeout=5)

    async def _finish(
        self,
        claim: Claim,
        what: str,
        to: Callable[[str, str], str] | None = None,
        headers: dict[str, str] | None = None,
        reshape: Callable[[bytes], bytes] | None = None,
    ) -> None:
        """Ack the claim's delivery and write the lease without it; first, with ``to`` (a
        subject builder of ``NatsNames``), publish its envelope there (as ``reshape`` makes
        its bytes, if given). A claim this worker does not hold (finished before) is left
        alone."""
        held = self._take(claim)
        if held is None:
            return

        async def finish() -> None:
            if to is not None:
                subject = to(held.role, held.request_token)
                data = held.data if reshape is None else reshape(held.data)
                await self._js.publish(subject, data, headers=headers)
            await asyncio.gather(self._ack(held.reply), self._leases.write(must=False))

        await self.connection.run(finish, what=what)

    async def done(self, claim: Claim) -> None:
        envelope = claim.envelope if claim.ticket in self._held else None
        await self._finish(claim, "a queue ack")
        if envelope is not None:  # acked: its id may be queued again
            ids, role = self._ids, envelope.target
            await self.connection.run(lambda: ids.forget(envelope.envelope_id, role), what="an ack")

    async def release(self, claim: Claim) -> float:
        """Defer the envelope: published on its deferred subject, its bytes counting the
        deferral, its next attempt in a header."""
        now = self._clock()
        held = self._held.get(claim.ticket)
        if held is None:
            return now  # finished before: nothing to defer
        _, deferrals = deferral_view(held.data)
        next_attempt = now + self._retry.delay(deferrals + 1)
        # A retry after a lost answer puts it there once.
        headers = {**_once("deferred", claim.ticket), NEXT_ATTEMPT_HEADER: repr(next_attempt)}
        await self._finish(
            claim,
            "a queue release",
            self.names.deferred_subject,
            headers,
            reshape=lambda data: with_deferrals(data, deferrals + 1),
        )
        return next_attempt

    async def reject(self, claim: Claim, reason: str) -> None:
        # A header is one line: the reason is content-free, but keep it one line and short.
        headers = {
            REASON_HEADER: " ".join(reason.split())[:2000] or "-",
            **_once("rejected", claim.ticket),
        }
        await self._finish(claim, "a queue reject", self.names.rejected_subject, headers)

    async def _queue_again(
        self, role: str, token: str, data: bytes, *, step: str, ticket: str, reply: str
    ) -> None:
        """Queue the envelope ``data`` a delivery (``reply``) carried for ``role`` again, as a
        new message (once, should a retry after a lost answer repeat ``step`` on ``ticket``),
        then ack that delivery."""
        subject = self.names.waiting_subject(role, token)
        await self._js.publish(subject, data, headers=_once(step, ticket))
        await self._ack(reply)

    async def drop(self, request_id: str) -> int:
        """Remove the waiting and deferred envelopes of ``request_id``; returns how many.

        Waiting means never handed to a worker (after the role consumer's last delivery): an
        envelope a worker holds stays with it, as a claimed file does, and its role finds the
        request cancelled when it records the outcome."""
        token = token_of(check_request_id(request_id))
        dropped: int = await self.connection.run(
            lambda: drop_waiting_and_deferred(self.connection, token), what="a queue drop"
        )
        return dropped

    # --- the worker's lease --------------------------------------------------------------

    async def renew(self) -> bool:
        """Tell the server this worker still works on its claims (in-progress acks, which
        restart their ack wait) and renew its lease entry; ``False`` if the server is away."""
        held = list(self._held.values())

        async def renew() -> None:
            for item in held:
                await self.connection.client.publish(item.reply, b"+WPI")
            await self._leases.write(must=True)

        try:
            await self.connection.run(renew, what="a lease renewal", patience=5.0)
        except StorageError:
            return False
        return True

    def _holds(self) -> list[str]:
        """What this worker holds now, as its lease entry lists it (``role:request id``)."""
        held = [(h.role, request_id_of_token(h.request_token)) for h in self._held.values()]
        return [f"{role}:{request_id or '?'}" for role, request_id in held]

    async def _tell_holds(self) -> None:
        """Write this worker's lease entry now (after a claim); a failure waits for renewal."""
        with contextlib.suppress(StorageError):
            await self.connection.run(
                lambda: self._leases.write(must=False), what="a lease update", patience=5.0
            )

    async def restore_deferred(self) -> int:
        """Queue the deferred envelopes whose next attempt is due again (those without the
        header, deferred by an older version, at once); returns how many."""
        now, queue = self._clock(), self.names.queue

        async def restore() -> int:
            return await restore_due(
                self.connection, self._js, now, lambda seq: _once("restored", f"{queue}/{seq}")
            )

        restored: int = await self.connection.run(restore, what="a restore of deferred envelopes")
        return restored

    async def retire(self) -> None:
        """Hand this worker's claims back at once and remove its lease: each is queued again
        as a new message (which rings the other workers' doorbells) and the delivery acked.

        Not a nak: the server would keep counting a nakked delivery as claimed (ack pending)
        until someone took it, so ``status`` would show it held by nobody and ``cancel``
        could not tell it from a held one."""
        held = list(self._held.items())
        self._held.clear()

        async def retire() -> None:
            for ticket, item in held:
                await self._queue_again(
                    item.role,
                    item.request_token,
                    item.data,
                    step="returned",
                    ticket=ticket,
                    reply=item.reply,
                )
            if self._doorbell is not None:
                await self._doorbell.unsubscribe()
                self._doorbell = None
            await self._leases.remove()

        await self.connection.run(retire, what="a worker retirement", patience=10.0)

    # --- what is where -------------------------------------------------------------------

    async def counts(self) -> dict[str, int]:
        """One round trip: a work-queue stream holds an envelope until it is acked, so its
        messages per subject are exactly the envelopes waiting, claimed or deferred."""

        async def look() -> dict[str, int]:
            return await per_role(self._js, self.names, ">", self.roles)  # waiting, deferred

        counts: dict[str, int] = await self.connection.run(look, what="a queue count")
        return counts

    async def snapshot(self) -> QueueSnapshot:
        """Per role: waiting (not delivered), claimed (delivered, not acked), deferred; and
        every worker's lease entry."""

        async def look() -> QueueSnapshot:
            return await queue_snapshot(
                self._js, self.names, self._leases, self.lease_seconds, self.roles
            )

        snapshot: QueueSnapshot = await self.connection.run(look, what="a queue snapshot")
        return snapshot

    async def waiting(self) -> dict[str, int]:
        """What no worker was handed, per role, as ``snapshot`` counts it (one round of
        requests at once)."""

        async def look() -> dict[str, int]:
            return (await role_counts(self._js, self.names, self.roles)).waiting

        waiting: dict[str, int] = await self.connection.run(look, what="a queue count")
        return waiting

    async def strays(self) -> list[Stray]:
        """The queue stream's subjects no role reads as they are (each with its count), and
        the workers bucket's entries that are no lease teams-runtime writes."""

        async def look() -> list[Stray]:
            subjects, leases = await asyncio.gather(
                stray_subjects(self.connection), self._leases.strays()
            )
            return subjects + leases

        strays: list[Stray] = await self.connection.run(look, what="a look for strays")
        return strays

    async def set_aside_strays(self) -> int:
        moved: int = await self.connection.run(
            lambda: set_aside(self.connection), what="a move of strays"
        )
        return moved
