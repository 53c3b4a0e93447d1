"""Which ``RecordStore``, ``WorkQueue`` and ``AnswerInbox`` a workspace uses, and the scope that
owns them.

The workspace's ``backend`` section decides: ``file`` (the default) keeps requests and envelopes
in the workspace folder; ``nats`` keeps them on a NATS JetStream server shared by every host of
the team, and the folder holds only what is local (logs, attempts).

``open_backend`` opens the two for an ``async with`` block on the caller's event loop (anyio on
asyncio) and closes them when it ends: on NATS, one connection of the block's own. The Team's
run, ``open_context`` and ``submit``/``cancel`` open theirs so. A synchronous caller (a CLI
command) uses ``blocking_backend``: the same for a ``with`` block, on an event loop of its own
(anyio's blocking portal). Nothing is shared between scopes, and nothing outlives them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager, contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from teams_runtime.codecs.config import TeamConfig
from teams_runtime.exceptions import ConfigError
from teams_runtime.storage.files.file_inbox import FileAnswerInbox
from teams_runtime.storage.files.file_queue import FileWorkQueue
from teams_runtime.storage.files.file_store import FileRecordStore
from teams_runtime.storage.files.rejected_files import FileRejectedShelf
from teams_runtime.storage.protocols import AnswerInbox, RecordStore, WorkQueue
from teams_runtime.storage.rejected import RejectedShelf
from teams_runtime.storage.workspace import Workspace, load_team_config

if TYPE_CHECKING:
    from anyio.from_thread import BlockingPortal

    from teams_runtime.storage.nats.connection import NatsConnection

__all__ = [
    "Backend",
    "BlockingBackend",
    "blocking_backend",
    "open_backend",
    "workspace_config",
]

_T = TypeVar("_T")


@dataclass(frozen=True)
class Backend:
    """A workspace's store, queue (as seen by one worker) and inbox (of people's answers), open
    together, and the envelopes its workers set aside (``rejected``)."""

    store: RecordStore
    queue: WorkQueue
    inbox: AnswerInbox
    rejected: RejectedShelf


@dataclass(frozen=True)
class BlockingBackend(Backend):
    """A ``Backend`` for synchronous code, with ``run`` for its async work (a ContextActor)."""

    portal: BlockingPortal | None = None

    def run(self, func: Callable[..., Awaitable[_T]], *args: object) -> _T:
        """Run ``func(*args)`` on the loop the store and queue live on, and wait for it."""
        if self.portal is None:  # the file backend: no loop to share
            import anyio

            return anyio.run(func, *args)
        return self.portal.call(func, *args)


def workspace_config(workspace: Workspace) -> TeamConfig:
    """The workspace's config; the defaults (file backend) when it has no config file, as for
    a folder of records made by hand. A config that exists but is broken is an error."""
    if not workspace.config_path.exists():
        return TeamConfig()
    return load_team_config(workspace.root)


@asynccontextmanager
async def open_backend(
    workspace: Workspace, config: TeamConfig | None = None, *, worker_id: str | None = None
) -> AsyncIterator[Backend]:
    """The store and queue the workspace's ``backend`` names, open for the block.

    Without ``config`` the workspace's is read. On NATS this connects (``BackendError`` when
    the server cannot be reached) and the connection closes when the block ends; a store or
    queue used after that raises ``BackendError``."""
    import anyio.to_thread  # here, not at the top: `status` on files starts without anyio

    if config is None:
        config = await anyio.to_thread.run_sync(workspace_config, workspace)
    if config.backend.kind != "nats":
        yield _file_backend(workspace, config, worker_id)
        return
    opened = _nats_connection(config)
    from teams_runtime.storage.nats.nats_inbox import NatsAnswerInbox
    from teams_runtime.storage.nats.nats_queue import NatsWorkQueue
    from teams_runtime.storage.nats.nats_store import NatsRecordStore
    from teams_runtime.storage.nats.rejected_queue import NatsRejectedShelf

    async with opened as connection:
        # Its constructor asks the server (a watch of the heads): blocking, like its calls.
        store = await anyio.to_thread.run_sync(NatsRecordStore, connection)
        # Its lease is the ack wait the team's queue has on the server (docs/scaling.md).
        queue = NatsWorkQueue(connection, worker_id=worker_id)
        yield Backend(store, queue, NatsAnswerInbox(connection), NatsRejectedShelf(connection))


@contextmanager
def blocking_backend(
    workspace: Workspace, config: TeamConfig | None = None, *, worker_id: str | None = None
) -> Iterator[BlockingBackend]:
    """``open_backend`` for synchronous code: open for the ``with`` block, its store and queue
    called from this thread. On NATS the connection lives on an event loop of the block's own
    (anyio's blocking portal), where ``BlockingBackend.run`` runs async work too."""
    config = config if config is not None else workspace_config(workspace)
    if config.backend.kind != "nats":
        files = _file_backend(workspace, config, worker_id)
        yield BlockingBackend(files.store, files.queue, files.inbox, files.rejected)
        return
    from anyio.from_thread import start_blocking_portal

    with (
        start_blocking_portal() as portal,
        portal.wrap_async_context_manager(
            open_backend(workspace, config, worker_id=worker_id)
        ) as backend,
    ):
        yield BlockingBackend(backend.store, backend.queue, backend.inbox, backend.rejected, portal)


def _file_backend(workspace: Workspace, config: TeamConfig, worker_id: str | None) -> Backend:
    lease = config.queue.lease_seconds
    return Backend(
        FileRecordStore(workspace),
        FileWorkQueue(workspace, roles=config.cast.names, worker_id=worker_id, lease_seconds=lease),
        FileAnswerInbox(workspace),
        FileRejectedShelf(workspace, config.cast.names),
    )


def _nats_connection(config: TeamConfig) -> AbstractAsyncContextManager[NatsConnection]:
    # nats-py is an optional extra: the file backend (the default) never imports it.
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
