"""The projection policy ``recent_tail_plus_latest_role_evidence`` (spec sections 4 and 5).

Pure: no I/O, no anyio, no logging. Everything that selects events calls ``select_events`` or
is an index proven equal to it by the tests (the ContextActor's per-request summary).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

import msgspec

from teams_runtime.codecs.config import PromptContextConfig
from teams_runtime.codecs.messages import CompactionNotice
from teams_runtime.codecs.records import (
    EVENTS_KEY,
    PayloadHead,
    decode_any,
    decode_event_head,
    decode_record,
    encode_field,
    iter_pretty_record,
)
from teams_runtime.exceptions import UnsafeRequestIdError
from teams_runtime.workspace import canonical_request_ref, check_request_id

__all__ = [
    "SELECTION",
    "Backfill",
    "Projection",
    "evidence_role",
    "explain_decisions",
    "notice_text",
    "project_fields",
    "project_request",
    "role_of_event",
    "role_of_raw",
    "select_events",
]

SELECTION = "recent_tail_plus_latest_role_evidence"

_NOTICE_FOOTER = (
    "The `events` array below contains complete selected events, not summaries.\n"
    "Omitted events still exist in the canonical request and must not be treated as events "
    "that never happened.\n"
    "Open `canonical_request` only when the current decision requires evidence missing from "
    "the selected events."
)


class Backfill(msgspec.Struct, frozen=True):
    """An older event selected as the newest evidence of a role missing from the tail."""

    index: int
    role: str


class Projection(msgspec.Struct, frozen=True, kw_only=True):
    """A projected copy of a request record plus the counts that describe it.

    ``fields`` holds every top-level key of the record, in order, as JSON bytes; when the
    record's ``events`` is a list, ``fields["events"]`` is the list of the selected events,
    copied byte for byte.
    """

    request_id: str
    config: PromptContextConfig
    total_events: int
    selected_indices: tuple[int, ...]
    backfilled: tuple[Backfill, ...]
    fields: dict[str, msgspec.Raw]
    history_bytes: int  # the byte size of every event as stored (what full history would add)

    @property
    def included_events(self) -> int:
        return len(self.selected_indices)

    @property
    def omitted_events(self) -> int:
        return self.total_events - self.included_events

    @property
    def compacted(self) -> bool:
        return self.omitted_events > 0

    @property
    def notice(self) -> dict[str, Any]:
        """The content-free notice (spec section 5) in its key order; empty if not compacted."""
        if not self.compacted:
            return {}
        return msgspec.structs.asdict(
            CompactionNotice(
                total_events=self.total_events,
                included_events=self.included_events,
                omitted_events=self.omitted_events,
                recent_events=self.config.recent_events,
                max_events=self.config.max_events,
                selection=SELECTION,
                canonical_request=canonical_request_ref(self.request_id),
            )
        )

    @property
    def record(self) -> dict[str, Any]:
        """The projected record decoded to Python objects (a fresh copy on every access)."""
        return {key: decode_any(raw) for key, raw in self.fields.items()}

    def iter_record_json(self) -> Iterator[bytes]:
        """Yield the projected record as 2-space-indented JSON, a chunk per field and event."""
        return iter_pretty_record(self.fields)


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


def role_of_raw(raw: msgspec.Raw) -> str | None:
    """Classify an undecoded event, decoding only its classifying fields."""
    try:
        head = decode_event_head(raw)
    except msgspec.DecodeError:
        # A shape the head view does not cover: classify the fully decoded event instead.
        return role_of_event(decode_any(raw))
    if head is None:
        return None
    payload = head.payload
    role, status = (
        (payload.role, payload.status) if isinstance(payload, PayloadHead) else (None, None)
    )
    return evidence_role(head.type, head.event_type, head.actor, role, status)


def select_events(
    total: int, role_at: Callable[[int], str | None], config: PromptContextConfig
) -> tuple[tuple[int, ...], tuple[Backfill, ...]]:
    """Select event positions: the recent tail plus the newest evidence of each missing role.

    ``role_at(i)`` classifies event ``i``; it is called only for the events the policy looks
    at (the tail, then older events newest-first until ``max_events`` are selected).
    Returns the ascending selected positions and the backfilled events.
    """
    if not config.enabled or total <= config.max_events:
        return tuple(range(total)), ()
    tail_start = total - config.recent_events
    represented = {role for index in range(tail_start, total) if (role := role_at(index))}
    slots = config.max_events - config.recent_events
    backfilled: list[Backfill] = []
    index = tail_start - 1
    while index >= 0 and len(backfilled) < slots:
        role = role_at(index)
        if role is not None and role not in represented:
            represented.add(role)
            backfilled.append(Backfill(index, role))
        index -= 1
    backfilled.reverse()
    selected = tuple(item.index for item in backfilled) + tuple(range(tail_start, total))
    return selected, tuple(backfilled)


def notice_request_id(value: object) -> str:
    """The request id a notice may name: a safe id, else ``""`` (no path outside the store)."""
    try:
        return check_request_id(value)
    except UnsafeRequestIdError:
        return ""


def project_request(
    record: Mapping[str, Any] | bytes, config: PromptContextConfig | None = None
) -> Projection:
    """Project a request record (a mapping, or the JSON bytes of a record file).

    Never mutates ``record``. Raises ``RecordError`` for bytes that are not a JSON object.
    """
    if isinstance(record, bytes | bytearray | memoryview):
        return project_fields(decode_record(bytes(record), "request record"), config)
    if isinstance(record, Mapping):
        return project_fields(record, config)
    raise TypeError(f"record must be a mapping or bytes, not {type(record).__name__}")


def _role_of(event: object) -> str | None:
    return role_of_raw(event) if isinstance(event, msgspec.Raw) else role_of_event(event)


def project_fields(
    fields: Mapping[str, Any], config: PromptContextConfig | None = None
) -> Projection:
    """Project a record's top-level fields; events may be decoded values or ``Raw`` bytes."""
    config = config or PromptContextConfig()
    events = fields.get(EVENTS_KEY)
    if isinstance(events, list):
        total = len(events)
        selected, backfilled = select_events(total, lambda i: _role_of(events[i]), config)
        history_bytes = sum(
            len(event) if isinstance(event, msgspec.Raw) else len(encode_field(event))
            for event in events
        )
    else:
        total, selected, backfilled, history_bytes = 0, (), (), 0
    raw_fields = {
        key: encode_field(
            [events[i] for i in selected]
            if key == EVENTS_KEY and isinstance(events, list)
            else value
        )
        for key, value in fields.items()
    }
    return Projection(
        request_id=notice_request_id(fields.get("request_id")),
        config=config,
        total_events=total,
        selected_indices=selected,
        backfilled=backfilled,
        fields=raw_fields,
        history_bytes=history_bytes,
    )


def notice_text(projection: Projection) -> str:
    """The notice block that stands before ``Current request:``; ``""`` when nothing was omitted."""
    notice = projection.notice
    if not notice:
        return ""
    body = msgspec.json.format(msgspec.json.encode(notice), indent=2).decode()
    return f"Current request event-history projection:\n{body}\n{_NOTICE_FOOTER}"


def explain_decisions(projection: Projection, roles: list[str | None]) -> list[str]:
    """Say, for each event position, why the projection kept or left it out.

    ``roles`` holds the evidence role of every event (``None`` for non-evidence). Decisions:
    ``included`` (nothing was compacted), ``tail``, ``backfill for <role>``, ``omitted: role
    already represented``, ``omitted: not role evidence``, ``omitted: capacity full`` (older
    than where the scan stopped because ``max_events`` were selected).
    """
    total = projection.total_events
    if not projection.compacted:
        return ["included"] * total
    tail_start = total - projection.config.recent_events
    backfill_roles = {item.index: item.role for item in projection.backfilled}
    full = projection.included_events >= projection.config.max_events
    scan_floor = min(backfill_roles, default=tail_start) if full else 0
    decisions = []
    for index, role in enumerate(roles):
        if index >= tail_start:
            decisions.append("tail")
        elif index in backfill_roles:
            decisions.append(f"backfill for {backfill_roles[index]}")
        elif index < scan_floor:
            decisions.append("omitted: capacity full")
        elif role is None:
            decisions.append("omitted: not role evidence")
        else:
            decisions.append("omitted: role already represented")
    return decisions
