"""Where requests and envelopes are kept: the ``RecordStore``, ``WorkQueue`` and ``AnswerInbox``
seams and their file implementations (the embedded default). Blocking code: actors call it from
worker threads.
"""

from __future__ import annotations

from teams_runtime.storage.files.file_inbox import FileAnswerInbox
from teams_runtime.storage.files.file_queue import FileWorkQueue
from teams_runtime.storage.files.file_store import FileRecordStore
from teams_runtime.storage.protocols import (
    IDEMPOTENCY_WINDOW,
    AnswerInbox,
    AppendOutcome,
    Claim,
    DeferredEnvelope,
    IndexedParts,
    ParsedRecord,
    QueueSnapshot,
    RecordRead,
    RecordStore,
    Stray,
    WorkerLease,
    WorkQueue,
)
from teams_runtime.storage.workspace import Workspace, load_team_config

__all__ = [
    "IDEMPOTENCY_WINDOW",
    "AnswerInbox",
    "AppendOutcome",
    "Claim",
    "DeferredEnvelope",
    "FileAnswerInbox",
    "FileRecordStore",
    "FileWorkQueue",
    "IndexedParts",
    "ParsedRecord",
    "QueueSnapshot",
    "RecordRead",
    "RecordStore",
    "Stray",
    "WorkQueue",
    "WorkerLease",
    "Workspace",
    "load_team_config",
]
