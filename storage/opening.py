"""Which ``RecordStore``, ``WorkQueue`` and ``AnswerInbox`` a workspace uses, and the scope that
owns them.

The workspace's ``backend`` section decides: ``file`` (the default) keeps requests and envelopes
in the workspace folder; ``nats`` keeps them on a NATS JetStream server shared by every host of
the team, and the folder holds only what is local (logs, attempts).

``open_storage`` opens them for an ``async with`` block on the caller's event loop (anyio on
asyncio) and closes them when it ends: on NATS, one connection of the block's own. Their calls
are awaited on that loop (``storage.protocols``): NATS answers there, the file storage runs its
blocking calls in worker threads of its own (``files.threaded``). The Team's run,
``open_context`` and ``submit``/``cancel`` open theirs so. A synchronous caller (a CLI command)
uses ``blocking_storage``: their blocking faces (``storage.blocking``) for a ``with`` block:
the file storage's own classes, which import no anyio (``status`` starts without it), or, on
NATS, views whose calls run on an event loop of the block's own (anyio's blocking portal).
Nothing is shared between scopes, and nothing outlives them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager, contextmanager
from functools import partial
from typing import TYPE_CHECKING, Concatenate, ParamSpec, TypeVar

import msgspec

from teams_runtime.codecs.config import TeamConfig
from teams_runtime.exceptions import ConfigError
from teams_runtime.storage.files.file_inbox import FileAnswerInbox
from teams_runtime.storage.files.file_queue import FileWorkQueue
from teams_runtime.storage.files.file_store import FileRecordStore
from teams_runtime.storage.files.rejected_files import FileRejectedShelf
from teams_runtime.storage.protocols import AnswerInbox, RecordStore, StorageQueue
from teams_runtime.storage.rejected import RejectedShelf
from teams_runtime.storage.workspace import Workspace, load_team_config

if TYPE_CHECKING:
    from anyio.from_thread import BlockingPortal

    from teams_runtime.storage.blocking import (
        BlockingAnswerInbox,
        BlockingQueue,
        BlockingRecordStore,
        BlockingRejectedShelf,
    )
    from teams_runtime.storage.nats.connection import NatsConnection

__all__ = [
    "BlockingStorage",
    "Storage",
    "blocking_storage",
    "open_storage",
    "workspace_config",
]

_T = TypeVar("_T")
_P = ParamSpec("_P")


class Storage(msgspec.Struct, frozen=True):  # not a dataclass: see workspace.RecordPaths
    """A workspace's store, queue (as seen by one worker: its ``WorkQueue`` and ``QueueAdmin``
    faces) and inbox (of people's answers), open together, and the envelopes its workers set
    aside (``rejected``)."""

    store: RecordStore
    queue: StorageQueue
    inbox: AnswerInbox
    rejected: RejectedShelf


class BlockingStorage(msgspec.Struct, frozen=True):
    """A ``Storage``'s blocking faces, for synchronous code, with ``run`` for its async work
    (a ContextActor)."""

    store: BlockingRecordStore
    queue: BlockingQueue
    inbox: BlockingAnswerInbox
    rejected: BlockingRejectedShelf
    portal: BlockingPortal | None = None
    awaited: RecordStore | None = None  # the store as the actors await it (NATS: the same)

    def run(self, func: Callable[..., Awaitable[_T]], *args: object) -> _T:
        """Run ``func(*args)`` on the loop the store and queue live on, and wait for it."""
        if self.portal is None:  # the file storage: no loop to share
            import anyio

            return anyio.run(func, *args)
        return self.portal.call(func, *args)

    def run_with_store(
        self,
        func: Callable[Concatenate[RecordStore, _P], Awaitable[_T]],
        *args: _P.args,
        **kwargs: _P.kwargs,
    ) -> _T:
        """``run`` of ``func(store, *args, **kwargs)``, ``store`` this storage's
        ``RecordStore`` as the actors await it (a ContextActor's)."""
        store = self.awaited
        if store is None:  # the file storage: its own store, awaited in worker threads
            from teams_runtime.storage.files.threaded import ThreadedRecordStore

            store = ThreadedRecordStore(self.store)
        return self.run(partial(func, store, *args, **kwargs))


def workspace_config(workspace: Workspace) -> TeamConfig:
    """The workspace's config; the defaults (file storage) when it has no config file, as for
    a folder of records made by hand. A config that exists but is broken is an error."""
    if not workspace.config_path.exists():
        return TeamConfig()
    return load_team_config(workspace.root)


@asynccontextmanager
async def open_storage(
    workspace: Workspace, config: TeamConfig | None = None, *, worker_id: str | None = None
) -> AsyncIterator[Storage]:
    """The store and queue the workspace's ``backend`` names, open for the block.

    Without ``config`` the workspace's is read. On NATS this connects (``StorageError`` when
    the server cannot be reached) and the connection closes when the block ends; a store or
    queue used after that raises ``StorageError``."""
    import anyio.to_thread  # here, not at the top: `status` on files starts without anyio

    if config is None:
        config = await anyio.to_thread.run_sync(workspace_config, workspace)
    if config.backend.kind != "nats":
        from teams_runtime.storage.files.threaded import (
            ThreadedInbox,
            ThreadedQueue,
            ThreadedRecordStore,
            ThreadedShelf,
        )

        files = _file_backend(workspace, config, worker_id)
        threads = config.team.requests_in_flight
        yield Storage(
            ThreadedRecordStore(files.store, threads=threads),
            ThreadedQueue(files.queue),
            ThreadedInbox(files.inbox),
            ThreadedShelf(files.rejected),
        )
        return
    async with _nats_storage(config, worker_id) as (storage, _):
        yield storage


@asynccontextmanager
async def _nats_storage(
    config: TeamConfig, worker_id: str | None
) -> AsyncIterator[tuple[Storage, NatsConnection]]:
    opened = _nats_connection(config)
    from teams_runtime.storage.nats.nats_inbox import NatsAnswerInbox
    from teams_runtime.storage.nats.nats_queue import NatsWorkQueue
    from teams_runtime.storage.nats.nats_store import NatsRecordStore
    from teams_runtime.storage.nats.rejected_queue import NatsRejectedShelf

    async with opened as connection:
        store = await NatsRecordStore.open(connection)  # a watch of the heads starts
        # Its lease is the ack wait the team's queue has on the server (docs/scaling.md).
        queue = NatsWorkQueue(connection, worker_id=worker_id)
        inbox, shelf = NatsAnswerInbox(connection), NatsRejectedShelf(connection)
        yield Storage(store, queue, inbox, shelf), connection


@contextmanager
def blocking_storage(
    workspace: Workspace, config: TeamConfig | None = None, *, worker_id: str | None = None
) -> Iterator[BlockingStorage]:
    """``open_storage`` for synchronous code: open for the ``with`` block, its store and queue
    called from this thread. On NATS the connection lives on an event loop of the block's own
    (anyio's blocking portal), where ``BlockingStorage.run`` runs async work too."""
    config = config if config is not None else workspace_config(workspace)
    if config.backend.kind != "nats":
        yield _file_backend(workspace, config, worker_id)  # blocking at heart: no loop
        return
    from anyio.from_thread import start_blocking_portal

    from teams_runtime.storage.blocking import view_inbox, view_queue, view_shelf, view_store

    with (
        start_blocking_portal() as portal,
        portal.wrap_async_context_manager(_nats_storage(config, worker_id)) as (storage, opened),
    ):
        call = opened.call  # on the portal's loop; StorageError once the block has ended
        yield BlockingStorage(
            view_store(storage.store, call),
            view_queue(storage.queue, call),
            view_inbox(storage.inbox, call),
            view_shelf(storage.rejected, call),
            portal,
            storage.store,
        )


def _file_backend(
    workspace: Workspace, config: TeamConfig, worker_id: str | None
) -> BlockingStorage:
    lease = config.queue.lease_seconds
    return BlockingStorage(
        FileRecordStore(workspace),
        FileWorkQueue(workspace, roles=config.cast.names, worker_id=worker_id, lease_seconds=lease),
        FileAnswerInbox(workspace),
        FileRejectedShelf(workspace, config.cast.names),
    )


def _nats_connection(config: TeamConfig) -> AbstractAsyncContextManager[NatsConnection]:
    # nats-py is an optional extra: the file storage (the default) never imports it.
    try:
        from teams_runtime.storage.nats.connection import open_connection
    except ImportError as exc:
        # Imported only here: it reads the install's metadata (importlib.metadata), which
        # `status` on files would pay at every start.
        from teams_runtime.storage.install_hint import extra_install_command

        raise ConfigError(
            f"team_runtime.yaml backend.kind is nats, but the NATS client is not installed "
            f"({exc.name or exc}); install it with: {extra_install_command('nats')}."
        ) from None
    return open_connection(
        config.backend.nats,
        queue_ack_seconds=config.queue.lease_seconds,
        roles=config.cast.names,  # a role consumer each
    )
