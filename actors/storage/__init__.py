"""Where requests and envelopes are kept: the ``RecordStore`` and ``WorkQueue`` seams and their
file implementations (the embedded default). Blocking code: actors call it from worker threads.
"""

from __future__ import annotations

from teams_runtime.actors.storage.protocols import (
    IDEMPOTENCY_WINDOW,
    Appended,
    Claim,
    IndexedParts,
    ParsedRecord,
    QueueSnapshot,
    RecordRead,
    RecordStore,
    WorkerLease,
    WorkQueue,
)
from teams_runtime.actors.storage.queue_files import FileWorkQueue
from teams_runtime.actors.storage.record_files import FileRecordStore
from teams_runtime.actors.storage.workspace import Workspace, load_team_config

__all__ = [
    "IDEMPOTENCY_WINDOW",
    "Appended",
    "Claim",
    "FileRecordStore",
    "FileWorkQueue",
    "IndexedParts",
    "ParsedRecord",
    "QueueSnapshot",
    "RecordRead",
    "RecordStore",
    "WorkQueue",
    "WorkerLease",
    "Workspace",
    "load_team_config",
]
