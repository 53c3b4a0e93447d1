"""Where requests and envelopes are kept: the ``RecordStore``, ``WorkQueue`` (with its
``QueueAdmin`` face) and ``AnswerInbox`` seams, async (``protocols``), their blocking faces
(``blocking``: imported from there, so that a command on files loads no more than it uses),
and their file implementations (the embedded default; blocking at heart, awaited through
``files.threaded``).
"""

from __future__ import annotations

from typing import Any

from teams_runtime._deprecated import renamed
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
    QueueAdmin,
    QueueSnapshot,
    RecordRead,
    RecordStore,
    StorageQueue,
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
    "QueueAdmin",
    "QueueSnapshot",
    "RecordRead",
    "RecordStore",
    "StorageQueue",
    "Stray",
    "WorkQueue",
    "WorkerLease",
    "Workspace",
    "load_team_config",
]


# Renamed in issue 30 ("backend" is a model backend; where requests are kept is storage): the
# old name still imports, with a DeprecationWarning, for one release.
_RENAMED = {"BackendQueue": "StorageQueue"}


def __getattr__(name: str) -> Any:
    """An old name of this module's (``_RENAMED``), with a ``DeprecationWarning``."""
    return renamed(__name__, name, _RENAMED)
