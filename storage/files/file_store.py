"""Request records as files: ``FileRecordStore``, the ``RecordStore`` of the file storage
(the embedded default): one JSON file per request under ``.teams_runtime/requests/``.

Reading is ``reads``, writing ``writes``, the index that makes both cheap
``index``; this module puts them behind the protocol.
"""

from __future__ import annotations

import os
from collections.abc import Hashable, Mapping
from typing import Any

import msgspec

from teams_runtime.codecs.request_records import decode_record
from teams_runtime.exceptions import RecordError
from teams_runtime.storage.files._index import INDEX_TAIL
from teams_runtime.storage.files._reads import (
    parts_from_unindexed,
    read_bytes,
    read_indexed_parts,
    read_small,
    unknown_request,
)
from teams_runtime.storage.files._stray_files import is_record_name, record_strays
from teams_runtime.storage.files._writes import append_to_record, create_record
from teams_runtime.storage.local_files import FileVersion, file_version
from teams_runtime.storage.protocols import AppendOutcome, ParsedRecord, RecordRead, Stray
from teams_runtime.storage.workspace import RecordPaths, Workspace

__all__ = [
    "FileRecordStore",
    "append_to_record",
    "create_record",
    "read_indexed_parts",
    "unknown_request",
]


# Below this size reading the whole file and parsing it costs less than the index's few reads
# (about 150 us), so a small record is read whole and its index neither read nor kept.
SMALL_RECORD = 128 * 1024


def _small(version: FileVersion | None) -> bool:
    return version is not None and version.size <= SMALL_RECORD


def _tail_of(tail: int | None) -> int | None:
    """The tail an index can give (``None``: every event is needed, or more than it keeps)."""
    return tail if tail is not None and tail <= INDEX_TAIL else None


class FileRecordStore:
    """The ``RecordStore`` of one workspace folder."""

    def __init__(self, workspace: Workspace, *, max_cached_paths: int = 1024) -> None:
        self.workspace = workspace
        self._paths: dict[str, RecordPaths] = {}  # building paths costs more than a warm ask
        self._max_cached_paths = max_cached_paths

    @property
    def append_seconds(self) -> float:
        return 0.0  # an append waits on the record's lock, then writes: it never retries

    def paths(self, request_id: str) -> RecordPaths:
        """The files of ``request_id`` (checked to be a safe id)."""
        paths = self._paths.get(request_id)
        if paths is None:
            if len(self._paths) >= self._max_cached_paths:
                self._paths.clear()
            paths = self._paths[request_id] = self.workspace.record_paths(request_id)
        return paths

    def version(self, request_id: str) -> Hashable | None:
        """One ``stat``: about a microsecond, answered from the inode cache."""
        return file_version(self.paths(request_id).record)

    def read_nowait(self, request_id: str, *, tail: int | None) -> RecordRead | None:
        """A small record (at most 128 KiB: one ``open``, its ``fstat`` both the size check
        and the version, one read and a parse in memory, about 130 us at 100 events); ``None``
        for a larger one or none at all (``read`` says which)."""
        paths = self.paths(request_id)
        read = read_small(paths, SMALL_RECORD)
        return None if read is None else self._parts(paths, *read, tail)

    def read(self, request_id: str, *, tail: int | None) -> RecordRead:
        paths = self.paths(request_id)
        if _tail_of(tail) is not None and not _small(file_version(paths.record)):
            parts = read_indexed_parts(paths)
            if parts is not None:
                return parts
        return self._read_whole(paths, tail)

    def _read_whole(self, paths: RecordPaths, tail: int | None) -> RecordRead:
        return self._parts(paths, *read_bytes(paths), tail)

    def _parts(
        self, paths: RecordPaths, data: bytes, version: FileVersion, tail: int | None
    ) -> RecordRead:
        indexed_tail = _tail_of(tail)
        if indexed_tail is not None:
            # Keep the derived index for a large record: its next cold read is then cheap.
            keep = not _small(version)
            parts = parts_from_unindexed(paths, data, version, tail=indexed_tail, keep=keep)
            if parts is not None:
                return parts
        return ParsedRecord(version, decode_record(data, str(paths.record)), str(paths.record))

    def load(self, request_id: str) -> bytes:
        """The record file's bytes, checked to be a record."""
        paths = self.paths(request_id)
        data, _ = read_bytes(paths)
        decode_record(data, str(paths.record))
        return data

    def create(self, request_id: str, record: Mapping[str, Any]) -> bool:
        return create_record(self.paths(request_id), record) is not None

    def append(
        self,
        request_id: str,
        events: list[msgspec.Raw],
        updates: Mapping[str, Any],
        *,
        key: str = "",
        unless: Mapping[str, Any] | None = None,
        expect: Mapping[str, Any] | None = None,
    ) -> AppendOutcome:
        return append_to_record(
            self.paths(request_id), events, updates, key=key, unless=unless, expect=expect
        )

    def exists(self, request_id: str) -> bool:
        return self.paths(request_id).record.is_file()

    def list_ids(self) -> list[str]:
        try:
            names = os.listdir(self.workspace.requests_dir)
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise RecordError(
                f"{self.workspace.requests_dir}: cannot be listed ({exc.strerror})."
            ) from exc
        # Temp files end in `.tmp` and lock files in `.lock`: every `*.json` named by a safe id
        # is a record (an id may start with `.`, spec section 2); another is a stray.
        return sorted(name[: -len(".json")] for name in names if is_record_name(name))

    def strays(self) -> list[Stray]:
        return record_strays(self.workspace)
