"""Where a workspace keeps things; the only place that turns request ids into paths."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from teams_runtime.codecs.config import CONFIG_FILE_NAME
from teams_runtime.exceptions import UnsafeRequestIdError
from teams_runtime.roles import check_role

__all__ = [
    "MAX_REQUEST_ID_LENGTH",
    "RecordPaths",
    "Workspace",
    "canonical_request_ref",
    "check_request_id",
]

MAX_REQUEST_ID_LENGTH = 200
_SAFE_ID = re.compile(r"[A-Za-z0-9._:-]+")


def check_request_id(value: object) -> str:
    """Return ``value`` if it is a safe request id, else raise ``UnsafeRequestIdError``.

    Safe: 1-200 ASCII letters, digits, ``-``, ``_``, ``.``, ``:``; never ``..`` (spec section 2).
    """
    if not isinstance(value, str) or not value:
        raise UnsafeRequestIdError("request id must be a non-empty string.")
    if len(value) > MAX_REQUEST_ID_LENGTH:
        raise UnsafeRequestIdError(
            f"request id is {len(value)} characters long; at most {MAX_REQUEST_ID_LENGTH} allowed."
        )
    # fullmatch, not match + `$`: `$` also matches before a trailing newline.
    if _SAFE_ID.fullmatch(value) is None or ".." in value or value == ".":
        raise UnsafeRequestIdError(
            f"request id {value!r} is not a safe file name; use only letters, digits, "
            "'-', '_', '.' and ':' (no '/', no '..')."
        )
    return value


def canonical_request_ref(request_id: str) -> str:
    """The workspace-relative path a notice gives for the full record (spec section 5)."""
    return f"./.teams_runtime/requests/{request_id}.json" if request_id else ""


@dataclass(frozen=True)
class RecordPaths:
    """The files of one request: the record, its lock file, and its index (a cache)."""

    request_id: str
    record: Path
    lock: Path
    index: Path


class Workspace:
    """Paths inside one workspace folder."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    @property
    def config_path(self) -> Path:
        return self.root / CONFIG_FILE_NAME

    @property
    def runtime_dir(self) -> Path:
        return self.root / ".teams_runtime"

    @property
    def requests_dir(self) -> Path:
        return self.runtime_dir / "requests"

    @property
    def logs_dir(self) -> Path:
        return self.runtime_dir / "logs"

    @property
    def index_dir(self) -> Path:
        return self.runtime_dir / "index"

    @property
    def queue_dir(self) -> Path:
        return self.runtime_dir / "queue"

    def role_queue(self, role: str) -> Path:
        """The folder of envelopes waiting for ``role`` (only for the team's own roles)."""
        return self.queue_dir / check_role(role)

    def role_log(self, role: str) -> Path:
        """The text log of ``role`` (only for the team's own roles)."""
        return self.logs_dir / f"{check_role(role)}.log"

    def request_path(self, request_id: str) -> Path:
        """The record file of ``request_id``, after checking the id is safe."""
        return self.requests_dir / f"{check_request_id(request_id)}.json"

    def record_paths(self, request_id: str) -> RecordPaths:
        """The record file of ``request_id`` and its lock and index sidecars."""
        record = self.request_path(request_id)
        return RecordPaths(
            request_id=request_id,
            record=record,
            lock=record.with_name(record.name + ".lock"),
            index=self.index_dir / f"{request_id}.idx",
        )

    def __repr__(self) -> str:
        return f"Workspace({str(self.root)!r})"
