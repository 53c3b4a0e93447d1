"""The plain, obviously-correct reading of spec section 4, for comparison in tests."""

from __future__ import annotations

from typing import Any


def _norm(value: Any) -> str:
    return value.strip().lower() if isinstance(value, str) else ""


def reference_role(event: Any) -> str | None:
    if not isinstance(event, dict):
        return None
    payload = event.get("payload")
    payload_role = _norm(payload.get("role")) if isinstance(payload, dict) else ""
    payload_status = _norm(payload.get("status")) if isinstance(payload, dict) else ""
    is_evidence = (
        _norm(event.get("type")) == "role_report"
        or _norm(event.get("event_type")) == "role_report"
        or (payload_role != "" and payload_status != "")
    )
    if not is_evidence:
        return None
    identity = payload_role or _norm(event.get("actor"))
    return identity or None


def reference_select(events: Any, enabled: bool, recent: int, maximum: int) -> list[int] | None:
    """Selected positions, or None when `events` is not a list (pass-through)."""
    # 1. not a list: pass through
    if not isinstance(events, list):
        return None
    # 2. disabled or small enough: everything
    total = len(events)
    if not enabled or total <= maximum:
        return list(range(total))
    # 3. the tail by position
    selected = list(range(total - recent, total))
    # 4. seed represented roles from the tail's evidence
    represented = set()
    for index in selected:
        role = reference_role(events[index])
        if role is not None:
            represented.add(role)
    # 5. older events newest-first, one per missing role, until full
    for index in range(total - recent - 1, -1, -1):
        if len(selected) >= maximum:
            break
        role = reference_role(events[index])
        if role is None or role in represented:
            continue
        selected.append(index)
        represented.add(role)
    # 6. chronological order
    return sorted(selected)
