"""Waiting answers as the commands show them (``inbox``, ``status``): ids, roles and times,
never envelope text."""

from __future__ import annotations

from typing import Any

from teams_runtime.codecs.formats import iso_of
from teams_runtime.codecs.waiting_answers import WaitingAnswer

__all__ = ["age", "due", "waiting_rows"]


def age(seconds: float) -> str:
    """A span as a person reads it: ``42s``, ``3m05s``, ``2h10m``, ``3d04h``."""
    seconds = max(int(seconds), 0)
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    if seconds < 86_400:
        return f"{seconds // 3600}h{seconds // 60 % 60:02d}m"
    return f"{seconds // 86_400}d{seconds // 3600 % 24:02d}h"


def waiting_rows(items: list[WaitingAnswer], now: float) -> list[dict[str, Any]]:
    """Each waiting answer as ``inbox --json`` and ``status --json`` show it (ids, roles and
    times only: no envelope text)."""
    return [
        {
            "request_id": item.request_id,
            "envelope_id": item.envelope_id,
            "role": item.role,
            "from_role": item.from_role,
            "since": iso_of(item.since),
            "waiting_seconds": round(max(now - item.since, 0.0), 1),
            "due_at": None if item.due is None else iso_of(item.due),
            "overdue": item.overdue(now),
            "renewals": item.renewals,
        }
        for item in items
    ]


def due(item: WaitingAnswer, now: float) -> str:
    """When ``item``'s answer_within runs out: ``in 1h59m``, ``overdue``, or ``-``."""
    if item.due is None:
        return "-"
    return "overdue" if item.due <= now else f"in {age(item.due - now)}"
