"""Which ``RecordStore`` and ``WorkQueue`` a workspace uses: its ``backend`` section decides.

``file`` (the default) keeps requests and envelopes in the workspace folder; ``nats`` keeps
them on a NATS JetStream server shared by every host of the team, and the folder holds only
what is local (logs, attempts). Every command and the Team open their store and queue here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from teams_runtime.codecs.config import TeamConfig
from teams_runtime.exceptions import ConfigError
from teams_runtime.storage.files.file_queue import FileWorkQueue
from teams_runtime.storage.files.file_store import FileRecordStore
from teams_runtime.storage.install_hint import extra_install_command
from teams_runtime.storage.protocols import RecordStore, WorkQueue
from teams_runtime.storage.workspace import Workspace, load_team_config

if TYPE_CHECKING:
    from teams_runtime.storage.nats.connection import NatsConnection

__all__ = ["open_queue", "open_store", "workspace_config"]


def workspace_config(workspace: Workspace) -> TeamConfig:
    """The workspace's config; the defaults (file backend) when it has no config file, as for
    a folder of records made by hand. A config that exists but is broken is an error."""
    if not workspace.config_path.exists():
        return TeamConfig()
    return load_team_config(workspace.root)


def open_store(workspace: Workspace, config: TeamConfig | None = None) -> RecordStore:
    """The request store the workspace's ``backend`` names (``BackendError`` if it is NATS
    and the server cannot be reached)."""
    config = config if config is not None else workspace_config(workspace)
    if config.backend.kind == "nats":
        from teams_runtime.storage.nats.nats_store import NatsRecordStore

        return _connection(config).attached(NatsRecordStore)  # one watch of the heads
    return FileRecordStore(workspace)


def open_queue(
    workspace: Workspace, config: TeamConfig | None = None, *, worker_id: str | None = None
) -> WorkQueue:
    """The work queue the workspace's ``backend`` names, for one worker."""
    config = config if config is not None else workspace_config(workspace)
    if config.backend.kind == "nats":
        from teams_runtime.storage.nats.nats_queue import NatsWorkQueue

        # Its lease is the ack wait the team's queue has on the server (docs/scaling.md).
        return NatsWorkQueue(_connection(config), worker_id=worker_id)
    return FileWorkQueue(workspace, worker_id=worker_id, lease_seconds=config.queue.lease_seconds)


def _connection(config: TeamConfig) -> NatsConnection:
    # nats-py is an optional extra: the file backend (the default) never imports it.
    try:
        from teams_runtime.storage.nats.connection import shared_connection
    except ImportError as exc:
        raise ConfigError(
            f"team_runtime.yaml backend.kind is nats, but the NATS client is not installed "
            f"({exc.name or exc}); install it with: {extra_install_command('nats')}."
        ) from None
    return shared_connection(config.backend.nats, queue_ack_seconds=config.queue.lease_seconds)
