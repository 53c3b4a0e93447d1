"""Logging: the compaction line of the spec, structured prompt records, and the CLI's sinks.

The library only emits (loguru, with ``role``, ``request_id`` and ``purpose`` bound); sinks are
added by the CLI through ``configure_logging``:

- stderr: human-readable, INFO and up;
- ``.teams_runtime/logs/<role>.log``: each role's own lines (the compaction line among them);
- ``.teams_runtime/logs/prompt_context.jsonl``: one ``PromptRecord`` per prompt sent, rotated
  at 10 MB, keeping 10 old files (``prompt_context.<time>.jsonl``).

Nothing logged here ever holds prompt, event, payload or envelope text.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from datetime import datetime
from typing import Any

from loguru import logger

from teams_runtime.codecs.prompt_records import PromptRecord, encode_prompt_record
from teams_runtime.codecs.records import EVENT_SEPARATOR, EVENTS_KEY
from teams_runtime.prompts import PromptBundle
from teams_runtime.roles import ROLES
from teams_runtime.workspace import Workspace

__all__ = [
    "PROMPT_LOG_NAME",
    "configure_logging",
    "log_prompt",
    "prompt_record",
    "stop_logging",
]

PROMPT_LOG_NAME = "prompt_context.jsonl"
_RECORD_KEY = "prompt_record"


def _is_record(entry: Any) -> bool:
    return _RECORD_KEY in entry["extra"]


def _role_filter(role: str) -> Callable[[Any], bool]:
    def accept(entry: Any) -> bool:
        return bool(entry["extra"].get("role") == role) and not _is_record(entry)

    return accept


def configure_logging(workspace: Workspace | None, *, console_level: str = "INFO") -> None:
    """Add the CLI's sinks (replacing any) and turn the library's logging on."""
    logger.remove()
    logger.enable("teams_runtime")
    logger.add(
        sys.stderr,
        level=console_level,
        format="<green>{time:HH:mm:ss}</green> <level>{level: <7}</level> {message}",
        filter=lambda entry: not _is_record(entry),
        colorize=None,
        diagnose=False,  # never print variable values (prompt text) in tracebacks
    )
    if workspace is None:
        return
    logs = workspace.logs_dir
    logs.mkdir(parents=True, exist_ok=True)
    for role in ROLES:
        logger.add(
            workspace.role_log(role),
            level="INFO",
            format="{time:YYYY-MM-DDTHH:mm:ss.SSSZZ} {level} {message}",
            filter=_role_filter(role),
            rotation="10 MB",
            retention=10,
            enqueue=True,
            diagnose=False,
        )
    logger.add(
        logs / PROMPT_LOG_NAME,
        level="INFO",
        format="{extra[prompt_record]}",
        filter=_is_record,
        rotation="10 MB",
        retention=10,
        enqueue=True,
        diagnose=False,
    )


def stop_logging() -> None:
    """Flush and close the sinks (background writers included)."""
    logger.complete()
    logger.remove()


def prompt_record(bundle: PromptBundle, prompt_chars: int) -> PromptRecord:
    """The content-free record of one prompt; full history size is computed from byte sizes."""
    projection = bundle.projection
    config = projection.config
    selected_bytes = 0
    events = projection.fields.get(EVENTS_KEY)
    if events is not None and projection.total_events:
        selected_bytes = len(events) - 2 - max(projection.included_events - 1, 0)  # [ , ]
    omitted_bytes = max(projection.history_bytes - selected_bytes, 0)
    notice_chars = len(bundle.notice) + 2 if bundle.notice else 0
    full = (
        prompt_chars
        - notice_chars
        + omitted_bytes
        + len(EVENT_SEPARATOR) * projection.omitted_events
    )
    return PromptRecord(
        timestamp=datetime.now().astimezone().isoformat(),
        role=bundle.role,
        purpose=bundle.purpose,
        request_id=bundle.request_id,
        enabled=config.enabled,
        recent_events=config.recent_events,
        max_events=config.max_events,
        total_events=projection.total_events,
        included_events=projection.included_events,
        omitted_events=projection.omitted_events,
        compacted=projection.compacted,
        eligible=projection.total_events > config.max_events,
        backfilled_roles=[item.role for item in projection.backfilled],
        prompt_chars=prompt_chars,
        full_history_chars=full,
    )


def log_prompt(bundle: PromptBundle, prompt_chars: int) -> PromptRecord:
    """Log one sent prompt: the spec's compaction line if compacted, and its record."""
    record = prompt_record(bundle, prompt_chars)
    bound = logger.bind(role=record.role, request_id=record.request_id, purpose=record.purpose)
    if record.compacted:
        bound.info(
            "[{}] prompt_context_compacted request_id={} purpose={} total_events={} "
            "included_events={} omitted_events={} recent_events={} max_events={}",
            record.role,
            record.request_id or "unknown",
            record.purpose,
            record.total_events,
            record.included_events,
            record.omitted_events,
            record.recent_events,
            record.max_events,
        )
    bound.bind(prompt_record=encode_prompt_record(record)).info(_RECORD_KEY)
    return record
