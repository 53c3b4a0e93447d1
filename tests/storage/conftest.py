"""What the storage tests share: every queue implementation behind one fixture
(``queue_backend``; a new backend joins by adding its ``pytest.param`` to ``QUEUES``)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from teams_runtime.storage import FileWorkQueue, WorkQueue, Workspace
from teams_runtime.storage.nats.blocking_faces import blocking_queue
from teams_runtime.storage.nats.connection import NatsConnection


@dataclass(frozen=True)
class QueueBackend:
    """What the suite needs of a storage: queue objects on the same envelopes, and a way to
    queue bytes that are not an envelope (as a crash or another program might)."""

    new_queue: Callable[..., WorkQueue]  # keyword arguments go to the queue (``clock=``)
    put_bytes: Callable[[str, bytes], None]


def _file_queues(root: Path, request: pytest.FixtureRequest) -> QueueBackend:
    workspace = Workspace(root)

    def put_bytes(role: str, data: bytes) -> None:
        folder = workspace.role_queue(role)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{time.time_ns():020d}-corrupt.json").write_bytes(data)

    return QueueBackend(lambda **options: FileWorkQueue(workspace, **options), put_bytes)


def _nats_queues(root: Path, request: pytest.FixtureRequest) -> QueueBackend:
    settings = request.getfixturevalue("nats_server").settings()  # a team of its own
    connection: NatsConnection = request.getfixturevalue("nats_connect")(settings)

    def put_bytes(role: str, data: bytes) -> None:
        subject = f"{settings.prefix}.q.{role}.corrupt"
        connection.call(lambda: connection.js.publish(subject, data))

    return QueueBackend(lambda **options: blocking_queue(connection, **options), put_bytes)


# Each entry makes a storage on a test's own empty folder (or server prefix).
QUEUES = [pytest.param(_file_queues, id="file"), pytest.param(_nats_queues, id="nats")]


@pytest.fixture(params=QUEUES)
def queue_backend(request: pytest.FixtureRequest, tmp_path: Path) -> QueueBackend:
    factory: Callable[[Path, pytest.FixtureRequest], QueueBackend] = request.param
    return factory(tmp_path, request)


@pytest.fixture
def work_queue(queue_backend: QueueBackend) -> WorkQueue:
    return queue_backend.new_queue()
