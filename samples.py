"""Generated request histories for the demo, the benchmarks and the tests.

The shapes follow real records: ``role_report`` events carry a whole role result (~700 bytes
of JSON each here), hand-offs carry small payloads, and every role reports now and then.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from teams_runtime.roles import ROLES

__all__ = ["sample_event", "sample_record"]

_START = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)
_KINDS = ("role_report", "delegated", "role_report", "retried", "role_report", "resumed")


def sample_event(index: int, request_id: str = "req-demo") -> dict[str, Any]:
    """The ``index``-th event of a generated history (deterministic)."""
    role = ROLES[(index * 5 + index // 8) % len(ROLES)]
    kind = _KINDS[index % len(_KINDS)]
    event: dict[str, Any] = {
        "timestamp": (_START + timedelta(minutes=index)).isoformat(),
        "type": kind,
        "actor": role if kind == "role_report" else "orchestrator",
        "summary": f"{role} step {index}: {kind.replace('_', ' ')}",
    }
    if kind == "role_report":
        event["payload"] = {
            "request_id": request_id,
            "role": role,
            "status": "completed",
            "summary": f"Step {index}: {role} reviewed the current plan, checked the open "
            "questions and recorded its result for the next role.",
            "insights": [f"observation {k} of step {index} from the {role} role" for k in range(5)],
            "proposals": {"next_step": "continue", "risk": "low", "estimate_hours": index % 7},
            "artifacts": [f"docs/{role}/step_{index}_{k}.md" for k in range(3)],
            "next_role": ROLES[(index + 1) % len(ROLES)],
            "error": "",
        }
    elif kind == "delegated":
        event["payload"] = {
            "from_role": "orchestrator",
            "to_role": role,
            "reason": f"hand-off {index}: the {role} role owns the next decision on this request",
            "attempt": 1,
        }
    return event


def sample_record(events: int, request_id: str = "req-demo") -> dict[str, Any]:
    """A request record with ``events`` generated events and the usual top-level keys."""
    history = [sample_event(index, request_id) for index in range(events)]
    last_report: dict[str, Any] = next(
        (event["payload"] for event in reversed(history) if event["type"] == "role_report"), {}
    )
    return {
        "request_id": request_id,
        "status": "in_progress",
        "intent": "implement",
        "urgency": "normal",
        "scope": "Add export to CSV for the quarterly report (demo request)",
        "body": "Users want the quarterly report as CSV. Keep the PDF export as it is.",
        "artifacts": ["docs/report.md"],
        "params": {"workflow": {"phase": "implementation", "step": events}},
        "current_role": "qa",
        "next_role": "developer",
        "owner_role": "orchestrator",
        "created_at": _START.isoformat(),
        "updated_at": (_START + timedelta(minutes=events)).isoformat(),
        "result": last_report,
        "events": history,
    }
