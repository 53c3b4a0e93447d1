"""Event heads and role evidence (spec section 4): which role, if any, an event speaks for.

Only the five classifying fields of an event are ever decoded (``EventHead``); payloads and
everything else stay bytes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import msgspec

__all__ = [
    "EventHead",
    "HistoryEvidence",
    "PayloadHead",
    "append_key_of",
    "decode_event_head",
    "event_type_label",
    "evidence_role",
    "history_evidence",
    "role_of_event",
    "role_of_raw",
]

_Scalar = str | int | float | bool | None


# Frozen (so equal heads hash alike: a history's heads classify once per distinct head) and
# without GC tracking (decoded JSON holds no cycles; tracking 10,000 heads costs a collection).
class PayloadHead(msgspec.Struct, frozen=True, gc=False):
    """The two payload fields that make an event role evidence; the rest is skipped."""

    role: Any = None
    status: Any = None


class EventHead(msgspec.Struct, frozen=True, gc=False):
    """The few fields of an event the projection classifies by; the rest is never decoded."""

    type: Any = None
    event_type: Any = None
    actor: Any = None
    payload: PayloadHead | list[Any] | _Scalar = None


class EventClass(msgspec.Struct, frozen=True, gc=False):
    """An event's head without its ``actor``: all that says whether it is evidence, and of which
    role when its payload names one (as reports do). A whole history is decoded this way first:
    a string fewer per event to make, hash and free."""

    type: Any = None
    event_type: Any = None
    payload: PayloadHead | list[Any] | _Scalar = None


class _KeyHead(msgspec.Struct):
    append_key: Any = None  # the idempotency key of the append that wrote the event


_EVENT_HEAD_DECODER = msgspec.json.Decoder(EventHead)
# An events array as classes or heads, one C pass: an event that is not an object stays its
# small value.
_EVENT_CLASSES_DECODER = msgspec.json.Decoder(list[EventClass | list[Any] | _Scalar])
_EVENT_HEADS_DECODER = msgspec.json.Decoder(list[EventHead | list[Any] | _Scalar])
_KEY_HEAD_DECODER = msgspec.json.Decoder(_KeyHead)


def decode_event_head(raw: msgspec.Raw | bytes) -> EventHead | None:
    """Decode only the classifying fields of an event; ``None`` if it is not an object."""
    data = memoryview(raw)
    if not data or data[0] != ord("{"):
        return None
    return _EVENT_HEAD_DECODER.decode(data)


def _norm(value: object) -> str:
    return value.strip().lower() if isinstance(value, str) else ""


def _is_evidence(type_: object, event_type: object, role: str, payload_status: object) -> bool:
    is_report = _norm(type_) == "role_report" or _norm(event_type) == "role_report"
    return is_report or bool(role and _norm(payload_status))


def evidence_role(
    type_: object, event_type: object, actor: object, payload_role: object, payload_status: object
) -> str | None:
    """The role an event is evidence of, or ``None`` (spec section 4, role evidence)."""
    role = _norm(payload_role)
    if not _is_evidence(type_, event_type, role, payload_status):
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


def _python_decoded(raw: msgspec.Raw | bytes) -> object:
    """Decode with Python's parser, which takes what msgspec refuses but JSON allows (a number
    out of range, a lone surrogate escape); ``None`` if even that fails (nested too deeply)."""
    import json  # here: the rare fallback; start-up (`status`) never needs it

    try:
        return json.loads(bytes(raw))
    except (ValueError, RecursionError):
        return None


def role_of_raw(raw: msgspec.Raw | bytes) -> str | None:
    """Classify an undecoded event, decoding only its classifying fields."""
    try:
        head = decode_event_head(raw)
    except (msgspec.DecodeError, RecursionError):
        # A shape the head view does not cover (an odd number or string): rare, so the slow,
        # lenient parser classifies it.
        return role_of_event(_python_decoded(raw))
    return _role_of_head(head)


def _payload_fields(payload: object) -> tuple[object, object]:
    """The payload's ``role`` and ``status`` (``None`` both when it is not an object)."""
    return (payload.role, payload.status) if isinstance(payload, PayloadHead) else (None, None)


def _role_of_head(head: object) -> str | None:
    """Classify an event's head (``None`` for an event that is not an object)."""
    if not isinstance(head, EventHead):
        return None
    role, status = _payload_fields(head.payload)
    return evidence_role(head.type, head.event_type, head.actor, role, status)


class _ByActor:
    """Evidence whose payload names no role: its identity is its actor, which a class omits."""


_BY_ACTOR = _ByActor()


def _role_of_class(head: object) -> str | _ByActor | None:
    if not isinstance(head, EventClass):
        return None
    payload_role, status = _payload_fields(head.payload)
    role = _norm(payload_role)
    if not _is_evidence(head.type, head.event_type, role, status):
        return None
    return role or _BY_ACTOR


class HistoryEvidence(msgspec.Struct, frozen=True):
    """What one pass over a history found: how many events it has, and each role's newest
    evidence position."""

    count: int
    newest: dict[str, int]


def history_evidence(events: msgspec.Raw | bytes | memoryview) -> HistoryEvidence:
    """The number of events in a JSON events array and each role's newest evidence position.

    One C pass decodes every event's class (``EventClass``); only a history with evidence
    named by its actor alone is decoded again with the actors (``EventHead``). Raises
    ``msgspec.DecodeError`` (or ``RecursionError``) where an event holds what these views
    cannot read; callers then classify event by event (``role_of_raw``).
    """
    classes = _EVENT_CLASSES_DECODER.decode(events)
    newest = _newest(classes, _role_of_class, _CLASS_ROLES)
    if newest is None:
        newest = _newest(_EVENT_HEADS_DECODER.decode(events), _role_of_head, _HEAD_ROLES)
    assert newest is not None  # a head names its actor: it never needs another look
    return HistoryEvidence(len(classes), newest)


_Role = str | _ByActor | None
# What each distinct head classified as, kept per process (at most _MOST_KNOWN, then begun
# afresh): histories share their few heads (the same types, roles and statuses), so a cold
# read classifies almost none. Only a cache: a worker thread and the loop may both fill it.
_MOST_KNOWN = 1024
_CLASS_ROLES: dict[object, _Role] = {}
_HEAD_ROLES: dict[object, _Role] = {}


def _newest(
    heads: Sequence[object], classify: Callable[[object], _Role], known: dict[object, _Role]
) -> dict[str, int] | None:
    """Each role's newest evidence position among ``heads``; ``None`` when some evidence is
    named by an actor the heads do not hold.

    A history repeats a few distinct heads: each distinct head is classified once (equal heads
    classify alike: classification looks only at strings, and a string equals only the same
    string), or found in ``known``, then a walk from the newest event stops once every role
    seen has its newest.
    """
    try:
        distinct = set(heads)
    except TypeError:  # a head holding a list or object is not hashable: one at a time
        return _newest_one_by_one(heads, classify)
    evidence: dict[object, str] = {}
    for head in distinct:
        try:
            role = known[head]
        except KeyError:  # (not `in` and then a look-up: another thread may clear it between)
            role = known[head] = classify(head)
            if len(known) > _MOST_KNOWN:
                known.clear()
        if isinstance(role, _ByActor):
            return None
        if role is not None:
            evidence[head] = role
    roles = len(set(evidence.values()))
    newest: dict[str, int] = {}
    position = len(heads)
    while len(newest) < roles:
        position -= 1
        found = evidence.get(heads[position])
        if found is not None and found not in newest:
            newest[found] = position
    return newest


def _newest_one_by_one(
    heads: Sequence[object], classify: Callable[[object], str | _ByActor | None]
) -> dict[str, int] | None:
    newest: dict[str, int] = {}
    for position, head in enumerate(heads):
        role = classify(head)
        if isinstance(role, _ByActor):
            return None
        if role is not None:
            newest[role] = position
    return newest


def append_key_of(raw: msgspec.Raw | bytes) -> str | None:
    """The ``append_key`` an event carries, if it is an object with a string one."""
    data = memoryview(raw)
    if not data or data[0] != ord("{"):
        return None
    try:
        key = _KEY_HEAD_DECODER.decode(data).append_key
    except (msgspec.DecodeError, RecursionError):
        event = _python_decoded(raw)
        key = event.get("append_key") if isinstance(event, dict) else None
    return key if isinstance(key, str) else None


def event_type_label(raw: msgspec.Raw | bytes, width: int = 26) -> str:
    """The event's type for a table column: ``type``, else ``event_type``, else a placeholder."""
    try:
        head = decode_event_head(raw)
    except (msgspec.DecodeError, RecursionError):
        return "(unreadable)"
    if head is None:
        return "(not an object)"
    for value in (head.type, head.event_type):
        if isinstance(value, str) and value.strip():
            return value.strip()[:width]
    return "(no type)"
