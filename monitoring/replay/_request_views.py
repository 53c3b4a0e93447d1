"""A request as a replay reads it: its record decoded once, every event's evidence role and
size kept, and the projection at any hop (its first ``total`` events) made from them, equal to
``policy.projection.project_fields`` of the record cut there (the tests prove it)."""

from __future__ import annotations

from bisect import bisect_left
from itertools import accumulate
from typing import Any

import msgspec

from teams_runtime.codecs.config import PromptContextConfig
from teams_runtime.codecs.envelopes import MessageEnvelope
from teams_runtime.codecs.evidence import role_of_raw
from teams_runtime.codecs.projection_reply import Projection
from teams_runtime.codecs.request_ids import notice_request_id
from teams_runtime.codecs.request_records import (
    EVENTS_KEY,
    RecordFields,
    decode_record,
    encode_json,
    pretty_event_size,
)
from teams_runtime.policy.projection import project_fields, select_events

__all__ = ["RequestView", "envelope_from"]


class RequestView:
    """One request record, decoded once for every hop a replay makes of it."""

    def __init__(self, request_id: str, data: bytes) -> None:
        fields = decode_record(data, f"request {request_id}")
        events = fields.get(EVENTS_KEY)
        self.fields: RecordFields = fields
        self._events: list[msgspec.Raw] | None = events if isinstance(events, list) else None
        # Every field but the events, as the projection carries it (encoded once).
        self._encoded = {k: encode_json(v) for k, v in fields.items() if k != EVENTS_KEY}
        raws = self._events or []
        self.roles: list[str | None] = [role_of_raw(event) for event in raws]
        self._stored = [0, *accumulate(len(event) for event in raws)]
        self._sizes: dict[int, int] = {}
        self._by_role: dict[str, list[int]] = {}  # each role's evidence, ascending
        for index, role in enumerate(self.roles):
            if role is not None:
                self._by_role.setdefault(role, []).append(index)

    @property
    def event_count(self) -> int:
        return len(self._events) if self._events is not None else 0

    def fields_at(self, total: int) -> RecordFields:
        """The record's fields with its first ``total`` events (the rest as they are now)."""
        if self._events is None:
            return dict(self.fields)
        return {**self.fields, EVENTS_KEY: self._events[:total]}

    def projection(self, total: int, config: PromptContextConfig) -> Projection:
        """``project_fields(self.fields_at(total), config)``, from the kept roles and sizes."""
        events = self._events
        if events is None:
            return project_fields(self.fields, config)
        selection = select_events(total, self.roles.__getitem__, config)
        selected = selection.indices
        fields = {
            key: encode_json([events[i] for i in selected])
            if key == EVENTS_KEY
            else self._encoded[key]
            for key in self.fields
        }
        return Projection(
            request_id=notice_request_id(self.fields.get("request_id")),
            config=config,
            total_events=total,
            selected_indices=selected,
            backfilled=selection.backfilled,
            fields=fields,
            history_bytes=self._stored[total],
            event_sizes=tuple(self._size(i) for i in selected),
        )

    def _size(self, index: int) -> int:
        size = self._sizes.get(index)
        if size is None and self._events is not None:
            size = self._sizes[index] = pretty_event_size(self._events[index])
        return size or 0

    def newest_evidence(self, total: int) -> dict[str, int]:
        """Each role with evidence among the first ``total`` events, and its newest one's
        index (role evidence as the projection defines it)."""
        return {
            role: indices[bisect_left(indices, total) - 1]
            for role, indices in self._by_role.items()
            if indices[0] < total
        }


def envelope_from(projection: Projection, request_id: str, role: str) -> MessageEnvelope:
    """The envelope a role would most likely get, rebuilt from the record's own fields."""

    def field(key: str, kind: type, default: Any) -> Any:
        value = projection.value(key)
        return value if isinstance(value, kind) else default

    return MessageEnvelope(
        request_id=request_id,
        sender=field("current_role", str, "orchestrator") or "orchestrator",
        target=role,
        intent=field("intent", str, ""),
        urgency=field("urgency", str, "normal"),
        scope=field("scope", str, ""),
        artifacts=[str(item) for item in field("artifacts", list, [])],
        params=field("params", dict, {}),
        body=field("body", str, ""),
    )
