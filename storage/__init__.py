"""Where requests and envelopes are kept: the ``RecordStore``, ``WorkQueue`` (with its
``QueueAdmin`` face) and ``AnswerInbox`` seams, async (``protocols``), their blocking faces
(``blocking``: imported from there, so that a command on files loads no more than it uses),
and their file implementations (the embedded default; blocking at heart, awaited through
``files.threaded``).
"""

from __future__ import annotations

from teams_runtime.storage.files.file_inbox import FileAnswerInbox
from teams_runtime.storage.files.file_queue import FileWorkQueue
from teams_runtime.storage.files.file_store import FileRecordStore
from teams_runtime.storage.protocols import (
    IDEMPOTENCY_WINDOW,
    AnswerInbox,
    AppendOutcome,
    BackendQueue,
    Claim,
    DeferredEnvelope,
    IndexedParts,
    ParsedRecord,
    QueueAdmin,
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
    "BackendQueue",
    "Claim",
    "DeferredEnvelope",
    "FileAnswerInbox",
    "FileRecordStore",
    "FileWorkQueue",
    "IndexedParts",
    "ParsedRecord",
    "QueueAdmin",
    "QueueSnapshot",
    "RecordRead",
    "RecordStore",
    "Stray",
    "WorkQueue",
    "WorkerLease",
    "Workspace",
    "load_team_config",
]
