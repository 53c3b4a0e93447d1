"""The blocking faces of the storage seams, for synchronous code (a CLI command, a test).

The file storage is blocking at heart: ``FileRecordStore``, ``FileWorkQueue``,
``FileAnswerInbox`` and ``FileRejectedShelf`` are these protocols, and ``files.threaded`` turns
them into the async ones for the actors. The NATS storage is async at heart: ``view_*`` turn
its objects into these protocols, each call run on the loop its connection lives on (``call``:
a blocking portal's, from a thread outside that loop) and waited for. Each method does what the
async protocol's of the same name does (``storage.protocols``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Hashable, Mapping
from functools import partial
from typing import Any, Protocol, TypeVar

import msgspec

from teams_runtime.codecs.envelopes import MessageEnvelope
from teams_runtime.codecs.waiting_answers import WaitingAnswer
from teams_runtime.storage.protocols import (
    AnswerInbox,
    AppendOutcome,
    Claim,
    QueueSnapshot,
    RecordRead,
    RecordStore,
    StorageQueue,
    Stray,
)
from teams_runtime.storage.rejected import RejectedEnvelope, RejectedShelf

__all__ = [
    "BlockingAnswerInbox",
    "BlockingQueue",
    "BlockingQueueAdmin",
    "BlockingRecordStore",
    "BlockingRejectedShelf",
    "BlockingWorkQueue",
    "Call",
    "view_inbox",
    "view_queue",
    "view_shelf",
    "view_store",
]

_T = TypeVar("_T")


class Call(Protocol):
    """Runs ``make()`` on the storage's event loop from blocking code, and waits for it."""

    def __call__(self, make: Callable[[], Awaitable[_T]]) -> _T: ...


class BlockingRecordStore(Protocol):
    """``RecordStore``, blocking."""

    @property
    def append_seconds(self) -> float: ...
    def version(self, request_id: str) -> Hashable | None: ...
    def read(self, request_id: str, *, tail: int | None) -> RecordRead: ...
    def read_nowait(self, request_id: str, *, tail: int | None) -> RecordRead | None: ...
    def load(self, request_id: str) -> bytes: ...
    def create(self, request_id: str, record: Mapping[str, Any]) -> bool: ...
    def append(
        self,
        request_id: str,
        events: list[msgspec.Raw],
        updates: Mapping[str, Any],
        *,
        key: str = "",
        unless: Mapping[str, Any] | None = None,
        expect: Mapping[str, Any] | None = None,
    ) -> AppendOutcome: ...
    def exists(self, request_id: str) -> bool: ...
    def list_ids(self) -> list[str]: ...
    def strays(self) -> list[Stray]: ...


class BlockingWorkQueue(Protocol):
    """``WorkQueue``, blocking."""

    @property
    def lease_seconds(self) -> float: ...
    @property
    def renew_trouble(self) -> str: ...
    def put(self, envelope: MessageEnvelope) -> str: ...
    def claim(self, role: str, limit: int) -> list[Claim]: ...
    def done(self, claim: Claim) -> None: ...
    def release(self, claim: Claim) -> float: ...
    def reject(self, claim: Claim, reason: str) -> None: ...
    def drop(self, request_id: str) -> int: ...
    def renew(self) -> bool: ...
    def retire(self) -> None: ...


class BlockingQueueAdmin(Protocol):
    """``QueueAdmin``, blocking."""

    def restore_deferred(self) -> int: ...
    def counts(self) -> dict[str, int]: ...
    def snapshot(self) -> QueueSnapshot: ...
    def waiting(self) -> dict[str, int]: ...
    def strays(self) -> list[Stray]: ...
    def set_aside_strays(self) -> int: ...


class BlockingQueue(BlockingWorkQueue, BlockingQueueAdmin, Protocol):
    """A backend's queue, blocking: both faces (one object, as every storage has)."""


class BlockingAnswerInbox(Protocol):
    """``AnswerInbox``, blocking."""

    def put(self, item: WaitingAnswer) -> bool: ...
    def items(self) -> list[WaitingAnswer]: ...
    def renew(self, item: WaitingAnswer) -> None: ...
    def remove(self, item: WaitingAnswer) -> bool: ...
    def counts(self) -> dict[str, int]: ...


class BlockingRejectedShelf(Protocol):
    """``RejectedShelf``, blocking."""

    def listing(self) -> list[RejectedEnvelope]: ...
    def requeue(self, request_id: str | None = None) -> int: ...


class _StoreView:
    def __init__(self, store: RecordStore, call: Call) -> None:
        self._store, self._call = store, call

    @property
    def append_seconds(self) -> float:
        return self._store.append_seconds

    def version(self, request_id: str) -> Hashable | None:
        return self._store.version(request_id)

    def read(self, request_id: str, *, tail: int | None) -> RecordRead:
        return self._call(partial(self._store.read, request_id, tail=tail))

    def read_nowait(self, request_id: str, *, tail: int | None) -> RecordRead | None:
        return self._store.read_nowait(request_id, tail=tail)

    def load(self, request_id: str) -> bytes:
        return self._call(partial(self._store.load, request_id))

    def create(self, request_id: str, record: Mapping[str, Any]) -> bool:
        return self._call(partial(self._store.create, request_id, record))

    def append(
        self,
        request_id: str,
        events: list[msgspec.Raw],
        updates: Mapping[str, Any],
        *,
        key: str = "",
        unless: Mapping[str, Any] | None = None,
        expect: Mapping[str, Any] | None = None,
    ) -> AppendOutcome:
        append = self._store.append
        return self._call(
            partial(append, request_id, events, updates, key=key, unless=unless, expect=expect)
        )

    def exists(self, request_id: str) -> bool:
        return self._call(partial(self._store.exists, request_id))

    def list_ids(self) -> list[str]:
        return self._call(self._store.list_ids)

    def strays(self) -> list[Stray]:
        return self._call(self._store.strays)


class StorageQueueView:
    def __init__(self, queue: StorageQueue, call: Call) -> None:
        self._queue, self._call = queue, call

    @property
    def worker_id(self) -> str:
        return str(getattr(self._queue, "worker_id", "-"))

    @property
    def lease_seconds(self) -> float:
        return self._queue.lease_seconds

    @property
    def renew_trouble(self) -> str:
        return self._queue.renew_trouble

    def put(self, envelope: MessageEnvelope) -> str:
        return self._call(partial(self._queue.put, envelope))

    def claim(self, role: str, limit: int) -> list[Claim]:
        return self._call(partial(self._queue.claim, role, limit))

    def done(self, claim: Claim) -> None:
        self._call(partial(self._queue.done, claim))

    def release(self, claim: Claim) -> float:
        return self._call(partial(self._queue.release, claim))

    def reject(self, claim: Claim, reason: str) -> None:
        self._call(partial(self._queue.reject, claim, reason))

    def drop(self, request_id: str) -> int:
        return self._call(partial(self._queue.drop, request_id))

    def renew(self) -> bool:
        return self._call(self._queue.renew)

    def retire(self) -> None:
        self._call(self._queue.retire)

    def restore_deferred(self) -> int:
        return self._call(self._queue.restore_deferred)

    def counts(self) -> dict[str, int]:
        return self._call(self._queue.counts)

    def snapshot(self) -> QueueSnapshot:
        return self._call(self._queue.snapshot)

    def waiting(self) -> dict[str, int]:
        return self._call(self._queue.waiting)

    def strays(self) -> list[Stray]:
        return self._call(self._queue.strays)

    def set_aside_strays(self) -> int:
        return self._call(self._queue.set_aside_strays)


class _InboxView:
    def __init__(self, inbox: AnswerInbox, call: Call) -> None:
        self._inbox, self._call = inbox, call

    def put(self, item: WaitingAnswer) -> bool:
        return self._call(partial(self._inbox.put, item))

    def items(self) -> list[WaitingAnswer]:
        return self._call(self._inbox.items)

    def renew(self, item: WaitingAnswer) -> None:
        self._call(partial(self._inbox.renew, item))

    def remove(self, item: WaitingAnswer) -> bool:
        return self._call(partial(self._inbox.remove, item))

    def counts(self) -> dict[str, int]:
        return self._call(self._inbox.counts)


class _ShelfView:
    def __init__(self, shelf: RejectedShelf, call: Call) -> None:
        self._shelf, self._call = shelf, call

    def listing(self) -> list[RejectedEnvelope]:
        return self._call(self._shelf.listing)

    def requeue(self, request_id: str | None = None) -> int:
        return self._call(partial(self._shelf.requeue, request_id))


def view_store(store: RecordStore, call: Call) -> BlockingRecordStore:
    """``store``, blocking: each call run through ``call`` (``version`` and ``read_nowait``,
    which never wait, called at once)."""
    return _StoreView(store, call)


def view_queue(queue: StorageQueue, call: Call) -> BlockingQueue:
    """``queue`` (both its faces), blocking: each call run through ``call``."""
    return StorageQueueView(queue, call)


def view_inbox(inbox: AnswerInbox, call: Call) -> BlockingAnswerInbox:
    """``inbox``, blocking: each call run through ``call``."""
    return _InboxView(inbox, call)


def view_shelf(shelf: RejectedShelf, call: Call) -> BlockingRejectedShelf:
    """``shelf``, blocking: each call run through ``call``."""
    return _ShelfView(shelf, call)
