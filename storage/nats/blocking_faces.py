"""The NATS storage's blocking faces on one connection, for code outside its event loop (a
test's, a benchmark's): its async store, queue, inbox and shelf as ``storage.blocking``'s
protocols, each call run on the connection's loop (``NatsConnection.call``) and waited for.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from teams_runtime.storage.blocking import (
    BlockingAnswerInbox,
    BlockingQueue,
    BlockingRecordStore,
    BlockingRejectedShelf,
    view_inbox,
    view_queue,
    view_shelf,
    view_store,
)
from teams_runtime.storage.nats.connection import NatsConnection
from teams_runtime.storage.nats.nats_inbox import NatsAnswerInbox
from teams_runtime.storage.nats.nats_queue import NatsWorkQueue
from teams_runtime.storage.nats.nats_store import NatsRecordStore
from teams_runtime.storage.nats.rejected_queue import NatsRejectedShelf

__all__ = ["blocking_inbox", "blocking_queue", "blocking_shelf", "blocking_store"]


def blocking_store(connection: NatsConnection) -> BlockingRecordStore:
    """A ``NatsRecordStore`` on ``connection`` (opened: its watch of heads started)."""
    store = connection.call(partial(NatsRecordStore.open, connection))
    return view_store(store, connection.call)


def blocking_queue(connection: NatsConnection, **options: Any) -> BlockingQueue:
    """A ``NatsWorkQueue`` on ``connection`` (``options`` go to it: ``worker_id``, ...)."""
    return view_queue(NatsWorkQueue(connection, **options), connection.call)


def blocking_inbox(connection: NatsConnection) -> BlockingAnswerInbox:
    """A ``NatsAnswerInbox`` on ``connection``."""
    return view_inbox(NatsAnswerInbox(connection), connection.call)


def blocking_shelf(connection: NatsConnection) -> BlockingRejectedShelf:
    """A ``NatsRejectedShelf`` on ``connection``."""
    return view_shelf(NatsRejectedShelf(connection), connection.call)
