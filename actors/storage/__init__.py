"""Where requests and envelopes are kept: the ``RecordStore`` and ``WorkQueue`` seams and their
file implementations (the embedded default). Blocking code: actors call it from worker threads.
"""

from __future__ import annotations

from teams_runtime.actors.storage.protocols import (
    Appended,
    Claim,
    IndexedParts,
    ParsedRecord,
    RecordRead,
    RecordStore,
    WorkQueue,
)
from teams_runtime.actors.storage.queue_files import FileWorkQueue
from teams_runtime.actors.storage.record_files import FileRecordStore
from teams_runtime.actors.storage.workspace import Workspace, load_team_config

__all__ = [
    "Appended",
    "Claim",
    "FileRecordStore",
    "FileWorkQueue",
    "IndexedParts",
    "ParsedRecord",
    "RecordRead",
    "RecordStore",
    "WorkQueue",
    "Workspace",
    "load_team_config",
]
