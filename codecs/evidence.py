"""Event heads and role evidence (spec section 4): which role, if any, an event speaks for.

Only the five classifying fields of an event are ever decoded (``EventHead``); payloads and
everything else stay bytes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

__all__ = [
    "EventHead",
    "PayloadHead",
    "decode_event_head",
    "event_type_label",
    "evidence_role",
    "role_of_event",
    "role_of_raw",
]

_Scalar = str | int | float | bool | None


class PayloadHead(msgspec.Struct):
    """The two payload fields that make an event role evidence; the rest is skipped."""

    role: Any = None
    status: Any = None


class EventHead(msgspec.Struct):
    """The few fields of an event the projection classifies by; the rest is never decoded."""

    type: Any = None
    event_type: Any = None
    actor: Any = None
    payload: PayloadHead | list[Any] | _Scalar = None


_EVENT_HEAD_DECODER = msgspec.json.Decoder(EventHead)
_ANY_DECODER = msgspec.json.Decoder()


def decode_event_head(raw: msgspec.Raw | bytes) -> EventHead | None:
    """Decode only the classifying fields of an event; ``None`` if it is not an object."""
    data = memoryview(raw)
    if not data or data[0] != ord("{"):
        return None
    return _EVENT_HEAD_DECODER.decode(data)


def _norm(value: object) -> str:
    return value.strip().lower() if isinstance(value, str) else ""


def evidence_role(
    type_: object, event_type: object, actor: object, payload_role: object, payload_status: object
) -> str | None:
    """The role an event is evidence of, or ``None`` (spec section 4, role evidence)."""
    role = _norm(payload_role)
    is_report = _norm(type_) == "role_report" or _norm(event_type) == "role_report"
    if not (is_report or (role and _norm(payload_status))):
        return None
    return role or _norm(actor) or None


def role_of_event(event: object) -> str | None:
    """Classify a decoded event (any JSON value)."""
    if not isinstance(event, Mapping):
        return None
    payload = event.get("payload")
    role, status = (
        (payload.get("role"), payload.get("status"))
        if isinstance(payload, Mapping)
        else (None, None)
    )
    return evidence_role(
        event.get("type"), event.get("event_type"), event.get("actor"), role, status
    )


def role_of_raw(raw: msgspec.Raw | bytes) -> str | None:
    """Classify an undecoded event, decoding only its classifying fields."""
    try:
        head = decode_event_head(raw)
    except msgspec.DecodeError:
        # A shape the head view does not cover: classify the fully decoded event instead.
        return role_of_event(_ANY_DECODER.decode(raw))
    if head is None:
        return None
    payload = head.payload
    role, status = (
        (payload.role, payload.status) if isinstance(payload, PayloadHead) else (None, None)
    )
    return evidence_role(head.type, head.event_type, head.actor, role, status)


def event_type_label(raw: msgspec.Raw | bytes, width: int = 26) -> str:
    """The event's type for a table column: ``type``, else ``event_type``, else a placeholder."""
    try:
        head = decode_event_head(raw)
    except msgspec.DecodeError:
        return "(unreadable)"
    if head is None:
        return "(not an object)"
    for value in (head.type, head.event_type):
        if isinstance(value, str) and value.strip():
            return value.strip()[:width]
    return "(no type)"
