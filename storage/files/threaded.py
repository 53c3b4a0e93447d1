"""The file storage as the async seams (``storage.protocols``): each of its blocking calls run
in a worker thread, here, so the actors await it on the event loop like any storage's.

A record store's calls take threads of its own (at most ``threads`` at once: the requests a
ContextActor serves at once), so requests stuck in the store (another process holding a lock,
a hung network disk) hold those, never the threads the queue and the rest of the process need.
``version`` and ``read_nowait`` never wait: they are called at once, on the loop.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from functools import partial
from typing import Any, TypeVar

import anyio
import anyio.to_thread
import msgspec

from teams_runtime.codecs.config import DEFAULT_REQUESTS_IN_FLIGHT
from teams_runtime.codecs.envelopes import MessageEnvelope
from teams_runtime.codecs.waiting_answers import WaitingAnswer
from teams_runtime.storage.blocking import (
    BlockingAnswerInbox,
    BlockingQueue,
    BlockingRecordStore,
    BlockingRejectedShelf,
)
from teams_runtime.storage.protocols import AppendOutcome, Claim, QueueSnapshot, RecordRead, Stray
from teams_runtime.storage.rejected import RejectedEnvelope

__all__ = ["ThreadedInbox", "ThreadedQueue", "ThreadedRecordStore", "ThreadedShelf"]

_T = TypeVar("_T")


async def _in_thread(call: Callable[[], _T]) -> _T:
    return await anyio.to_thread.run_sync(call)


class ThreadedRecordStore:
    """A blocking record store (``FileRecordStore``) as a ``RecordStore``."""

    def __init__(
        self, store: BlockingRecordStore, *, threads: int = DEFAULT_REQUESTS_IN_FLIGHT
    ) -> None:
        self.blocking = store
        self._threads = threads
        self._limiter: anyio.CapacityLimiter | None = None  # made on the loop, at first use

    def __repr__(self) -> str:
        return f"ThreadedRecordStore({self.blocking!r})"

    async def _run(self, call: Callable[[], _T]) -> _T:
        if self._limiter is None:
            self._limiter = anyio.CapacityLimiter(self._threads)
        return await anyio.to_thread.run_sync(call, limiter=self._limiter)

    @property
    def append_seconds(self) -> float:
        return self.blocking.append_seconds

    def version(self, request_id: str) -> Hashable | None:
        return self.blocking.version(request_id)

    def read_nowait(self, request_id: str, *, tail: int | None) -> RecordRead | None:
        return self.blocking.read_nowait(request_id, tail=tail)

    async def read(self, request_id: str, *, tail: int | None) -> RecordRead:
        return await self._run(partial(self.blocking.read, request_id, tail=tail))

    async def load(self, request_id: str) -> bytes:
        return await self._run(partial(self.blocking.load, request_id))

    async def create(self, request_id: str, record: Mapping[str, Any]) -> bool:
        return await self._run(partial(self.blocking.create, request_id, record))

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
        append = self.blocking.append
        return await self._run(
            partial(append, request_id, events, updates, key=key, unless=unless, expect=expect)
        )

    async def exists(self, request_id: str) -> bool:
        return await self._run(partial(self.blocking.exists, request_id))

    async def list_ids(self) -> list[str]:
        return await self._run(self.blocking.list_ids)

    async def strays(self) -> list[Stray]:
        return await self._run(self.blocking.strays)


class ThreadedQueue:
    """A blocking queue (``FileWorkQueue``) as a ``WorkQueue`` and a ``QueueAdmin``."""

    def __init__(self, queue: BlockingQueue) -> None:
        self.blocking = queue

    @property
    def worker_id(self) -> str:
        return str(getattr(self.blocking, "worker_id", "-"))

    @property
    def lease_seconds(self) -> float:
        return self.blocking.lease_seconds

    @property
    def renew_trouble(self) -> str:
        return self.blocking.renew_trouble

    async def put(self, envelope: MessageEnvelope) -> str:
        return await _in_thread(partial(self.blocking.put, envelope))

    async def claim(self, role: str, limit: int) -> list[Claim]:
        return await _in_thread(partial(self.blocking.claim, role, limit))

    async def done(self, claim: Claim) -> None:
        await _in_thread(partial(self.blocking.done, claim))

    async def release(self, claim: Claim) -> float:
        return await _in_thread(partial(self.blocking.release, claim))

    async def reject(self, claim: Claim, reason: str) -> None:
        await _in_thread(partial(self.blocking.reject, claim, reason))

    async def drop(self, request_id: str) -> int:
        return await _in_thread(partial(self.blocking.drop, request_id))

    async def renew(self) -> bool:
        return await _in_thread(self.blocking.renew)

    async def retire(self) -> None:
        await _in_thread(self.blocking.retire)

    async def restore_deferred(self) -> int:
        return await _in_thread(self.blocking.restore_deferred)

    async def counts(self) -> dict[str, int]:
        return await _in_thread(self.blocking.counts)

    async def snapshot(self) -> QueueSnapshot:
        return await _in_thread(self.blocking.snapshot)

    async def waiting(self) -> dict[str, int]:
        return await _in_thread(self.blocking.waiting)

    async def strays(self) -> list[Stray]:
        return await _in_thread(self.blocking.strays)

    async def set_aside_strays(self) -> int:
        return await _in_thread(self.blocking.set_aside_strays)


class ThreadedInbox:
    """A blocking inbox (``FileAnswerInbox``) as an ``AnswerInbox``."""

    def __init__(self, inbox: BlockingAnswerInbox) -> None:
        self.blocking = inbox

    async def put(self, item: WaitingAnswer) -> bool:
        return await _in_thread(partial(self.blocking.put, item))

    async def items(self) -> list[WaitingAnswer]:
        return await _in_thread(self.blocking.items)

    async def renew(self, item: WaitingAnswer) -> None:
        await _in_thread(partial(self.blocking.renew, item))

    async def remove(self, item: WaitingAnswer) -> bool:
        return await _in_thread(partial(self.blocking.remove, item))

    async def counts(self) -> dict[str, int]:
        return await _in_thread(self.blocking.counts)


class ThreadedShelf:
    """A blocking shelf of rejected envelopes (``FileRejectedShelf``) as a ``RejectedShelf``."""

    def __init__(self, shelf: BlockingRejectedShelf) -> None:
        self.blocking = shelf

    async def listing(self) -> list[RejectedEnvelope]:
        return await _in_thread(self.blocking.listing)

    async def requeue(self, request_id: str | None = None) -> int:
        return await _in_thread(partial(self.blocking.requeue, request_id))
