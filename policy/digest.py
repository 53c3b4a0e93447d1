"""A per-request digest that answers any projection without the full history.

It holds the event count, the last ``max_events`` events, and the newest role evidence of every
role in the history: memory that does not grow with the history.

Built from a record's index (``IndexedParts`` from a ``RecordStore``) it is complete at once.
Built by parsing the record, every event is classified: one C pass decodes all the events'
heads, and each distinct head is classified once (``codecs.evidence.history_evidence``), which
costs less than classifying newest-first event by event even when that walk stops early.

Answers are equal to ``projection.select_events`` on every history (tested with hypothesis).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from typing import Any

import msgspec

from teams_runtime.codecs.config import PromptContextConfig
from teams_runtime.codecs.evidence import history_evidence, role_of_raw
from teams_runtime.codecs.projection_reply import Backfill, Projection
from teams_runtime.codecs.request_ids import notice_request_id
from teams_runtime.codecs.request_records import (
    EVENTS_KEY,
    encode_json,
    format_event,
    pretty_event_size,
)
from teams_runtime.codecs.stored_records import IndexedParts

__all__ = ["RequestDigest", "digest_from_fields", "digest_from_parts"]


class RequestDigest:
    """What the ContextActor keeps per request, for one ``PromptContextConfig``."""

    def __init__(
        self,
        *,
        config: PromptContextConfig,
        fields: Mapping[str, Any],
        count: int,
        recent: list[msgspec.Raw],
        evidence: dict[str, tuple[int, msgspec.Raw]],
        history_bytes: int,
        history: list[msgspec.Raw] | None = None,
    ) -> None:
        """Keep owned copies of ``recent``, ``evidence`` and (compaction off) ``history``.

        ``fields`` are the decoded top-level fields; ``events`` is not a list when the record's
        is not. ``evidence`` holds every role's newest evidence (the whole history classified).
        """
        self._config = config
        self._events_is_list = isinstance(fields.get(EVENTS_KEY, []), list)
        self._fields = {
            key: encode_json([] if key == EVENTS_KEY and self._events_is_list else value)
            for key, value in fields.items()
        }
        # From the encoded field: a value just written may still be its JSON bytes (``Raw``).
        request_id = self._fields.get("request_id")
        self._request_id = notice_request_id(
            msgspec.json.decode(request_id) if request_id is not None else None
        )
        self.count = count
        self._history_bytes = history_bytes
        keep = config.max_events
        self._recent: deque[msgspec.Raw] = deque(
            (raw.copy() for raw in recent[-keep:]), maxlen=keep
        )
        self._evidence = {role: (index, raw.copy()) for role, (index, raw) in evidence.items()}
        # The full history only when compaction is off: the prompt then carries all of it.
        self._all = [raw.copy() for raw in history] if history is not None else None
        self._cached: Projection | None = None  # immutable, so shared until the next change

    def _candidates(self) -> list[tuple[int, str]]:
        tail_start = self.count - self._config.recent_events
        return sorted(
            ((index, role) for role, (index, _) in self._evidence.items() if index < tail_start),
            reverse=True,
        )

    def append(self, events: list[msgspec.Raw], updates: Mapping[str, Any]) -> None:
        """Account for events this process appended and fields it set (no re-read)."""
        self._cached = None
        for key, value in updates.items():
            self._fields[key] = encode_json(value)
        if "request_id" in updates:  # the notice names the record by the id it holds now
            self._request_id = notice_request_id(msgspec.json.decode(self._fields["request_id"]))
        # A record without `events` gets the key when appended to, last, as the file does.
        self._fields.setdefault(EVENTS_KEY, b"[]")
        self._events_is_list = True
        for event in events:
            # Held as the file holds it, so answers are byte-equal to a fresh read.
            raw = msgspec.Raw(format_event(event))
            self._history_bytes += len(raw)
            role = role_of_raw(raw)
            self._recent.append(raw)
            if role is not None:
                self._evidence[role] = (self.count, raw)
            if self._all is not None:
                self._all.append(raw)
            self.count += 1

    def project(self) -> Projection:
        """Answer a projection (computed once per change, then shared)."""
        if self._cached is None:
            self._cached = self._project()
        return self._cached

    def _project(self) -> Projection:
        config = self._config
        if not self._events_is_list:
            return self._projection((), (), self._fields, [])
        total = self.count
        if not config.enabled or total <= config.max_events:
            history = self._all if self._all is not None else list(self._recent)
            return self._projection(tuple(range(total)), (), self._with_events(history), history)
        tail_start = total - config.recent_events
        slots = config.max_events - config.recent_events
        chosen = sorted(self._candidates()[:slots])
        backfilled = tuple(Backfill(index, role) for index, role in chosen)
        tail = list(self._recent)[-config.recent_events :]
        events = [self._evidence[role][1] for _, role in chosen] + tail
        selected = tuple(index for index, _ in chosen) + tuple(range(tail_start, total))
        return self._projection(selected, backfilled, self._with_events(events), events)

    def _with_events(self, events: list[msgspec.Raw]) -> dict[str, bytes]:
        return {
            key: (encode_json(events) if key == EVENTS_KEY else raw)
            for key, raw in self._fields.items()
        }

    def _projection(
        self,
        selected: tuple[int, ...],
        backfilled: tuple[Backfill, ...],
        fields: dict[str, bytes],
        events: list[msgspec.Raw],
    ) -> Projection:
        return Projection(
            request_id=self._request_id,
            config=self._config,
            total_events=self.count if self._events_is_list else 0,
            selected_indices=selected,
            backfilled=backfilled,
            fields=fields,
            history_bytes=self._history_bytes,
            event_sizes=tuple(map(pretty_event_size, events)),
        )


def digest_from_fields(fields: Mapping[str, Any], config: PromptContextConfig) -> RequestDigest:
    """Summarise a parsed record (events as ``Raw``): every event is classified, in one C pass
    over the events' heads where they decode as heads (else one at a time)."""
    events = fields.get(EVENTS_KEY)
    history: list[msgspec.Raw] = events if isinstance(events, list) else []
    evidence: dict[str, tuple[int, msgspec.Raw]] = {}
    if config.enabled:  # appends may grow it past max_events: older evidence is needed then
        newest = _newest(history)
        evidence = {role: (index, history[index]) for role, index in newest.items()}
    return RequestDigest(
        config=config,
        fields=fields,
        count=len(history),
        recent=history[-config.max_events :] if history else [],
        evidence=evidence,
        history_bytes=sum(map(len, history)),
        history=history if not config.enabled else None,
    )


def _newest(history: list[msgspec.Raw]) -> dict[str, int]:
    try:
        # The events as one array again (one copy: Raw parts are written as they are).
        return history_evidence(encode_json(history)).newest
    except (msgspec.DecodeError, RecursionError):  # an event the head view cannot read
        return {role: index for index, raw in enumerate(history) if (role := role_of_raw(raw))}


def digest_from_parts(parts: IndexedParts, config: PromptContextConfig) -> RequestDigest:
    """Summarise a record read through its index (complete: every role's newest evidence)."""
    return RequestDigest(
        config=config,
        fields=parts.fields,
        count=parts.count,
        recent=parts.tail,
        evidence=parts.evidence,
        history_bytes=parts.history_bytes,
    )
