"""A prompt record as the tests write them: a compacted qa call on a 40-event request, with
what a test says differently laid over it."""

from __future__ import annotations

from typing import Any

from teams_runtime.codecs.prompt_records import PromptRecord

RECORD_FIELDS: dict[str, Any] = {
    "timestamp": "2026-11-30T08:00:00+00:00",
    "role": "qa",
    "purpose": "role_task",
    "request_id": "req-1",
    "enabled": True,
    "recent_events": 8,
    "max_events": 16,
    "total_events": 40,
    "included_events": 12,
    "omitted_events": 28,
    "compacted": True,
    "eligible": True,
    "backfilled_roles": ["planner"],
    "prompt_chars": 1000,
    "full_history_chars": 4000,
}


def prompt_record(**overrides: Any) -> PromptRecord:
    """``RECORD_FIELDS`` with ``overrides`` laid over them."""
    return PromptRecord(**(RECORD_FIELDS | overrides))
