"""The projection policy ``recent_tail_plus_latest_role_evidence`` (spec sections 4 and 5).

Pure: no I/O, no anyio, no logging; a function of codecs values (the ``Projection`` it fills
and the evidence classification it selects by live in ``codecs``). Everything that selects
events calls ``select_events`` or is an index proven equal to it by the tests (the
ContextActor's per-request summary).

With ``prompt_context.layout: shared_prefix`` the tail moves in steps (``tail_start``): it
starts at the upstream tail's start rounded down to a multiple of ``step``, so between two
re-anchors a new event is appended to the selection instead of shifting it. At a re-anchor
the selection is exactly upstream's; until the next one it is that selection plus every event
written since (at most ``max_events + step - 1`` events). The backfill is chosen as at the
re-anchor (roles missing from the first ``recent_events`` events of the tail), so it stays
put too. ``project_fields(fields, config)`` is the pure ``project`` of any layout.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import msgspec

from teams_runtime.codecs.config import PromptContextConfig
from teams_runtime.codecs.evidence import role_of_event, role_of_raw
from teams_runtime.codecs.formats import pretty_json
from teams_runtime.codecs.projection_reply import Backfill, Projection
from teams_runtime.codecs.request_ids import notice_request_id
from teams_runtime.codecs.request_records import (
    EVENTS_KEY,
    decode_record,
    encode_json,
    format_event,
    pretty_event_size,
)

__all__ = [
    "Selection",
    "explain_decisions",
    "notice_text",
    "project_fields",
    "project_request",
    "select_events",
    "tail_start",
    "tail_window",
]

_NOTICE_FOOTER = (
    "The `events` array {where} contains complete selected events, not summaries.\n"
    "Omitted events still exist in the canonical request and must not be treated as events "
    "that never happened.\n"
    "Open `canonical_request` only when the current decision requires evidence missing from "
    "the selected events."
)


class Selection(msgspec.Struct, frozen=True):
    """The events a projection selects: their positions, ascending, and which of them are
    older events backfilled as the newest evidence of a role missing from the tail."""

    indices: tuple[int, ...]
    backfilled: tuple[Backfill, ...] = ()


def tail_start(total: int, config: PromptContextConfig) -> int:
    """Where a compacted selection's tail starts among ``total`` events: ``recent_events``
    from the end (``upstream``), or that rounded down to a multiple of ``step``
    (``shared_prefix``: the tail grows by up to ``step - 1`` events, then moves on)."""
    start = total - config.recent_events
    if config.layout == "shared_prefix":
        return start // config.step * config.step
    return start


def tail_window(config: PromptContextConfig) -> int:
    """The most recent events a selection can need (a summary keeps that many): ``max_events``,
    or the longest stepped tail (``recent_events + step - 1``) when it is longer."""
    if config.layout == "shared_prefix":
        return max(config.max_events, config.recent_events + config.step - 1)
    return config.max_events


def select_events(
    total: int, role_at: Callable[[int], str | None], config: PromptContextConfig
) -> Selection:
    """Select event positions: the recent tail plus the newest evidence of each missing role.

    ``role_at(i)`` classifies event ``i``; it is called only for the events the policy looks
    at (the tail, then older events newest-first until ``max_events`` are selected). A role
    is missing when the tail's first ``recent_events`` events do not name it (all the tail's
    events, but for a stepped tail: see the module's docstring).
    """
    if not config.enabled or total <= config.max_events:
        return Selection(tuple(range(total)))
    start = tail_start(total, config)
    fixed_end = start + config.recent_events  # == total, but for a stepped tail
    represented = {role for index in range(start, fixed_end) if (role := role_at(index))}
    slots = config.max_events - config.recent_events
    backfilled: list[Backfill] = []
    index = start - 1
    while index >= 0 and len(backfilled) < slots:
        role = role_at(index)
        if role is not None and role not in represented:
            represented.add(role)
            backfilled.append(Backfill(index, role))
        index -= 1
    backfilled.reverse()
    selected = tuple(item.index for item in backfilled) + tuple(range(start, total))
    return Selection(selected, tuple(backfilled))


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


def _pretty_size(event: object) -> int:
    if isinstance(event, msgspec.Raw):
        return pretty_event_size(event)
    return len(format_event(encode_json(event)))


def project_fields(
    fields: Mapping[str, Any], config: PromptContextConfig | None = None
) -> Projection:
    """Project a record's top-level fields; events may be decoded values or ``Raw`` bytes."""
    config = config or PromptContextConfig()
    events = fields.get(EVENTS_KEY)
    if isinstance(events, list):
        total = len(events)
        selection = select_events(total, lambda i: _role_of(events[i]), config)
        selected, backfilled = selection.indices, selection.backfilled
        history_bytes = sum(
            len(event) if isinstance(event, msgspec.Raw) else len(encode_json(event))
            for event in events
        )
        sizes = tuple(_pretty_size(events[i]) for i in selected)
    else:
        total, selected, backfilled, history_bytes, sizes = 0, (), (), 0, ()
    json_fields = {
        key: encode_json(
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
        fields=json_fields,
        history_bytes=history_bytes,
        event_sizes=sizes,
    )


def notice_text(projection: Projection) -> str:
    """The notice block that stands before ``Current request:``; ``""`` when nothing was omitted."""
    notice = projection.notice
    if not notice:
        return ""
    body = pretty_json(notice)
    # The shared_prefix layout shows the notice after the events (its counts change every hop).
    where = "above" if projection.config.layout == "shared_prefix" else "below"
    footer = _NOTICE_FOOTER.format(where=where)
    return f"Current request event-history projection:\n{body}\n{footer}"


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
    start = tail_start(total, projection.config)
    backfill_roles = {item.index: item.role for item in projection.backfilled}
    full = projection.included_events >= projection.config.max_events
    scan_floor = min(backfill_roles, default=start) if full else 0
    decisions = []
    for index, role in enumerate(roles):
        if index >= start:
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
