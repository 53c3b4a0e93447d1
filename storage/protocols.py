"""The seams between the actors and where requests and envelopes are kept.

``RecordStore`` keeps request records; ``WorkQueue`` keeps the envelopes waiting for roles, as
a worker uses it per envelope, and ``QueueAdmin`` is the same queue as chores, ``status`` and
operators see it (counts, snapshots, strays, deferred envelopes); ``AnswerInbox`` keeps the
envelopes of a person's role waiting for that person's answer.

They are async, called on the event loop: the NATS storage (an async client) answers on it,
with no thread between; the file storage runs its blocking calls in worker threads itself
(``files.threaded``). Only ``RecordStore.version`` and ``read_nowait`` are plain calls, since
they never wait. Synchronous code (a CLI command) uses their blocking faces
(``storage.blocking``). The test suites of ``tests/`` run against every implementation. A
store's version is any hashable value that changes whenever the record does; only the store
that made it compares it.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any, Protocol

import msgspec

from teams_runtime.codecs.envelopes import MessageEnvelope
from teams_runtime.codecs.stored_records import (
    AppendOutcome,
    IndexedParts,
    ParsedRecord,
    RecordRead,
)
from teams_runtime.codecs.waiting_answers import WaitingAnswer

__all__ = [
    "IDEMPOTENCY_WINDOW",
    "AnswerInbox",
    "AppendOutcome",
    "Claim",
    "DeferredEnvelope",
    "IndexedParts",
    "ParsedRecord",
    "QueueAdmin",
    "QueueSnapshot",
    "RecordRead",
    "RecordStore",
    "StorageQueue",
    "Stray",
    "WorkQueue",
    "WorkerLease",
]


IDEMPOTENCY_WINDOW = 256  # how many of the last events a keyed append is looked for among


class Stray(msgspec.Struct, frozen=True, kw_only=True):
    """Something in a store or queue that teams-runtime did not write (a file, a KV key, a
    queue subject), skipped by every reader; ``status`` names it with ``reason``."""

    where: str  # a path under .teams_runtime/, `nats:<bucket>/<key>`, `nats:<stream> <subject>`
    reason: str  # one line: what it is not, and what becomes of it
    envelopes: int = 0  # envelopes that wait there for no role (`purge-strays` sets them aside)


class RecordStore(Protocol):
    """Request records: created once, read for summaries, appended to, never rewritten."""

    @property
    def append_seconds(self) -> float:
        """How long one append may keep trying (other writers holding the record, a server
        away) before the store raises its own error saying so; ``0`` if it never retries. One
        who waits for an append's answer waits longer than this."""
        ...

    def version(self, request_id: str) -> Hashable | None:
        """The record's current version, ``None`` if there is none. It never waits: no read of
        the record, no round trip (files: one ``stat``; NATS: the newest revision seen), since
        a ContextActor's published projections are checked against it on every warm ask. A store
        that learns versions from elsewhere answers one that equals no other for a request it
        has not seen yet."""
        ...

    async def read(self, request_id: str, *, tail: int | None) -> RecordRead:
        """The record: ``IndexedParts`` (fields, count, the last ``tail`` events, each role's
        newest evidence) when the store can give them without parsing the whole history (for
        files: an index, kept or derived from the file's bytes), else a ``ParsedRecord``;
        ``tail=None``: every event is needed. Raises ``UnknownRequestError``, ``RecordError``."""
        ...

    def read_nowait(self, request_id: str, *, tail: int | None) -> RecordRead | None:
        """The record as ``read`` gives it if reading it never waits and costs less than a
        worker thread's round trip (a small local file), else ``None`` (then ``read`` it). A
        ContextActor calls it in its own tasks, on the event loop, for the first ask about a
        record or a changed one. Raises like ``read``."""
        ...

    async def load(self, request_id: str) -> bytes:
        """The record as the bytes of its canonical file."""
        ...

    async def create(self, request_id: str, record: Mapping[str, Any]) -> bool:
        """Store a new record unless one exists; returns whether it was created."""
        ...

    async def append(
        self,
        request_id: str,
        events: list[msgspec.Raw],
        updates: Mapping[str, Any],
        *,
        key: str = "",
        unless: Mapping[str, Any] | None = None,
        expect: Mapping[str, Any] | None = None,
    ) -> AppendOutcome:
        """Append ``events`` (JSON bytes) and set ``updates`` (top-level fields) in one write;
        never loses an event another writer appended first. Nothing is written (``refused``)
        if a top-level field named in ``unless`` holds the value given there at that moment,
        or one named in ``expect`` does not hold exactly the value given there (an absent
        field holds ``None``): decided on what the write replaces, so it is a compare-and-set.
        A refusal answers those fields as they were (``AppendOutcome.fields``).

        With a ``key`` (its events carry it as ``append_key``), an append whose key is on one
        of the last ``IDEMPOTENCY_WINDOW`` events is not written again (``applied`` False)."""
        ...

    async def exists(self, request_id: str) -> bool:
        """Whether a record exists for ``request_id``."""
        ...

    async def list_ids(self) -> list[str]:
        """The ids of every stored record, sorted (names and keys the store never writes are
        skipped: ``strays`` lists them)."""
        ...

    async def strays(self) -> list[Stray]:
        """What ``list_ids`` skips: files or keys where records are kept that are no record's
        (a name that is no request id, a file of another program), sorted."""
        ...


class Claim(msgspec.Struct, frozen=True):
    """An envelope taken from the queue by one worker: done, released or rejected later.

    ``envelope`` is ``None`` when the queued bytes are not a usable envelope; ``problem`` then
    says why (the worker rejects it).
    """

    ticket: str  # the queue's own name for the claimed envelope
    role: str
    envelope: MessageEnvelope | None
    problem: str = ""


class WorkerLease(msgspec.Struct, frozen=True, kw_only=True):
    """One worker as the queue sees it: whether its lease is current and what it holds."""

    worker: str
    alive: bool
    lease_age: float | None  # seconds since it last renewed; None: no lease at all
    holds: list[str]  # "<role>:<request id>" of each envelope it has claimed


class DeferredEnvelope(msgspec.Struct, frozen=True, kw_only=True):
    """One deferred envelope: whose, how often deferred, and when it is due again."""

    role: str
    request_id: str
    envelope_id: str
    deferrals: int  # how many times it was deferred (0: by a version that did not count)
    next_attempt: float  # when any worker takes it again (Unix time)


class QueueSnapshot(msgspec.Struct, frozen=True, kw_only=True):
    """Envelopes per role (waiting, claimed, deferred until their next attempt), each deferred
    envelope, and the workers."""

    waiting: dict[str, int]
    claimed: dict[str, int]
    deferred: dict[str, int]
    workers: list[WorkerLease]
    deferred_envelopes: list[DeferredEnvelope] = msgspec.field(default_factory=list)


class WorkQueue(Protocol):
    """Envelopes waiting for roles, shared by every worker of a team: durable until their
    outcome is persisted; each claimed by exactly one worker at a time."""

    @property
    def lease_seconds(self) -> float:
        """How long a claim stays this worker's without a renewal: ``renew`` well within it
        (the file queue: ``queue.lease_seconds``; NATS: the ack wait the server has)."""
        ...

    @property
    def renew_trouble(self) -> str:
        """What most likely keeps ``renew`` from working, as a warning says it (the file
        queue: a full disk; NATS: the server not answering)."""
        ...

    async def put(self, envelope: MessageEnvelope) -> str:
        """Queue ``envelope`` for ``envelope.target``; durable when it returns. Returns its
        ticket. An envelope without an ``envelope_id`` gets one."""
        ...

    async def claim(self, role: str, limit: int) -> list[Claim]:
        """Take up to ``limit`` waiting envelopes of ``role``, oldest first; each is this
        worker's alone until ``done``, ``release`` or ``reject``, or until its lease runs out."""
        ...

    async def done(self, claim: Claim) -> None:
        """Remove a handled envelope (its outcome is persisted)."""
        ...

    async def release(self, claim: Claim) -> float:
        """Defer the envelope: it waits until its next attempt (``storage._deferrals``: a few
        seconds the first time, growing each time), then ``restore_deferred`` queues it again.
        Returns when that is (Unix time)."""
        ...

    async def reject(self, claim: Claim, reason: str) -> None:
        """Set an unusable envelope aside with ``reason``, for a person to look at."""
        ...

    async def drop(self, request_id: str) -> int:
        """Remove the waiting and deferred envelopes of a request; returns how many."""
        ...

    async def renew(self) -> bool:
        """Renew this worker's lease on its claims (call well within ``lease_seconds``);
        ``False`` if it could not (the worker goes on and tries again)."""
        ...

    async def retire(self) -> None:
        """This worker stops: its claims wait again at once, its lease goes."""
        ...


class QueueAdmin(Protocol):
    """The work queue as chores, ``status`` and operators see it: what waits, is claimed or
    deferred, the workers' leases, the strays; deferred envelopes queued again when due.
    Every backend's queue is both this and a ``WorkQueue`` (the same object)."""

    async def restore_deferred(self) -> int:
        """Queue again the deferred envelopes whose next attempt is due (any worker's; those
        of older versions, which kept no time, at once); returns how many."""
        ...

    async def counts(self) -> dict[str, int]:
        """How many envelopes each role has not finished: waiting, claimed or deferred."""
        ...

    async def snapshot(self) -> QueueSnapshot:
        """Waiting, claimed and deferred envelopes per role, each deferred envelope, and the
        workers' leases (a dead worker's at most until its claims go back to the queue)."""
        ...

    async def waiting(self) -> dict[str, int]:
        """Envelopes per role no worker was handed (``snapshot().waiting``), read alone: cheap
        enough for a live view's refresh."""
        ...

    async def strays(self) -> list[Stray]:
        """What every worker passes over where envelopes and leases are kept: envelopes no role
        reads (``envelopes`` counts them), files or keys that are no envelope's or lease's."""
        ...

    async def set_aside_strays(self) -> int:
        """Move the envelopes no role reads (``strays``) to the rejected ones, each with its
        reason; returns how many. Nothing a role reads is touched."""
        ...


class StorageQueue(WorkQueue, QueueAdmin, Protocol):
    """A backend's queue: both faces in one object. Who holds it for a worker (the Team) has
    both; who uses it takes the face it needs (a role actor a ``WorkQueue``, chores and
    ``status`` a ``QueueAdmin``)."""


class AnswerInbox(Protocol):
    """The envelopes of people's roles (``model.backend: human``) waiting for an answer,
    shared by every worker and every ``teams-runtime answer`` of a team. An envelope is put
    here, then acked in the queue: no lease is held while a person thinks. Keyed by the
    envelope's id: one envelope waits once, whoever puts it how often."""

    async def put(self, item: WaitingAnswer) -> bool:
        """Keep ``item`` unless its envelope waits already (durable when it returns); whether
        it was put."""
        ...

    async def items(self) -> list[WaitingAnswer]:
        """Every waiting answer, oldest first (what cannot be read is left out, untouched)."""
        ...

    async def renew(self, item: WaitingAnswer) -> None:
        """Replace the stored item of ``item``'s envelope with ``item`` (a new ``due``)."""
        ...

    async def remove(self, item: WaitingAnswer) -> bool:
        """Take ``item``'s envelope out of the inbox; whether this call did (``False``: it
        was gone already)."""
        ...

    async def counts(self) -> dict[str, int]:
        """Waiting answers per role (roles with none left out), without reading them."""
        ...
