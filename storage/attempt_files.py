"""Failed model calls and rejected replies, one JSON file each, for a person to read.

``.teams_runtime/attempts/<request_id>/<UTC time>-<role>-<purpose>-<call>.json``, and the
tool calls of a model call (``model.tools``) in ``...-<call>-tools.json`` beside them. They hold
what the model printed (and so may quote the prompt): they are files, never log lines. Blocking
code: actors call it from a worker thread.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

from teams_runtime.codecs.attempt_records import AttemptRecord, ToolCallsRecord, encode_attempt
from teams_runtime.codecs.roles import check_role_name
from teams_runtime.exceptions import RecordError
from teams_runtime.storage.local_files import write_atomic
from teams_runtime.storage.workspace import Workspace

__all__ = ["save_attempt", "save_tool_calls"]

_PURPOSE = re.compile(r"[a-z_]{1,40}")


def _file_name(attempt: AttemptRecord | ToolCallsRecord, suffix: str = "") -> str:
    if _PURPOSE.fullmatch(attempt.purpose) is None:
        raise RecordError(f"attempt purpose {attempt.purpose!r} cannot be part of a file name.")
    try:
        role = check_role_name(attempt.role)
        when = datetime.fromisoformat(attempt.time).astimezone(UTC)
    except ValueError as exc:
        raise RecordError(f"attempt not saved: {exc}") from exc
    return f"{when:%Y%m%dT%H%M%S.%fZ}-{role}-{attempt.purpose}-{attempt.call}{suffix}.json"


def save_attempt(workspace: Workspace, attempt: AttemptRecord) -> Path:
    """Write ``attempt`` under the request's attempts folder; returns its path.

    Raises ``UnsafeRequestIdError`` for an unsafe id, ``RecordError`` if a folder on the way is
    a symbolic link or the file cannot be written.
    """
    path = workspace.attempts_folder(attempt.request_id) / _file_name(attempt)
    write_atomic(path, encode_attempt(attempt), runtime=workspace.runtime_dir, durable=False)
    return path


def save_tool_calls(workspace: Workspace, record: ToolCallsRecord) -> Path:
    """Write the tool calls of one model call beside its attempts
    (``...-<call>-tools.json``); returns its path. Raises as ``save_attempt``."""
    path = workspace.attempts_folder(record.request_id) / _file_name(record, "-tools")
    write_atomic(path, encode_attempt(record), runtime=workspace.runtime_dir, durable=False)
    return path
