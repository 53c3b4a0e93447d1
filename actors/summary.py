"""A per-request summary that answers any projection without the full history.

It holds the event count, the last ``max_events`` events, and the newest role evidence of every
role seen in the classified part of the history: memory that does not grow with the history.
Classification is lazy: building a summary classifies events newest-first only as far as the
projection needs (the policy's walk back stops there too). If a later projection needs older
evidence than was classified, ``project`` says so and the actor rebuilds the summary with the
whole history classified, once per file version.

Answers are equal to ``projection.select_events`` on every history (tested with hypothesis).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from typing import Any

import msgspec

from teams_runtime.codecs.config import PromptContextConfig
from teams_runtime.codecs.records import EVENTS_KEY, encode_field, fields_to_raw
from teams_runtime.projection import Backfill, Projection, notice_request_id, role_of_raw

__all__ = ["NeedsFullHistory", "RequestSummary"]


class NeedsFullHistory(Exception):
    """The projection needs evidence older than the classified part of the history."""


class RequestSummary:
    """What the ContextActor keeps per request, for one ``PromptContextConfig``."""

    def __init__(
        self, fields: Mapping[str, Any], config: PromptContextConfig, *, classify_all: bool = False
    ) -> None:
        """Summarise decoded record fields (events as ``Raw``); keeps copies, not the buffer."""
        self._config = config
        events = fields.get(EVENTS_KEY)
        self._events_is_list = isinstance(events, list)
        self._fields = fields_to_raw(
            {key: ([] if key == EVENTS_KEY and self._events_is_list else value)
             for key, value in fields.items()}
        )  # fmt: skip
        self._request_id = notice_request_id(fields.get("request_id"))
        history: list[msgspec.Raw] = events if isinstance(events, list) else []
        self.count = len(history)
        # The full history only when compaction is off: the prompt then carries all of it.
        self._all: list[msgspec.Raw] | None = (
            [raw.copy() for raw in history] if not config.enabled else None
        )
        keep = config.max_events
        self._recent: deque[tuple[msgspec.Raw, str | None]] = deque(
            ((raw.copy(), role_of_raw(raw)) for raw in history[-keep:]), maxlen=keep
        )
        self._evidence: dict[str, tuple[int, msgspec.Raw]] = {}
        recent_start = self.count - len(self._recent)
        for offset, (raw, role) in enumerate(self._recent):
            if role is not None:
                self._evidence[role] = (recent_start + offset, raw)
        self._floor = recent_start  # events below this position are not classified yet
        self._classify_back(history, None if classify_all else self._wanted())

    @property
    def fully_classified(self) -> bool:
        return self._floor == 0

    def _wanted(self) -> int:
        """How many backfill candidates the current tail needs."""
        return self._config.max_events - self._config.recent_events

    def _candidates(self) -> list[tuple[int, str]]:
        tail_start = self.count - self._config.recent_events
        return sorted(
            ((index, role) for role, (index, _) in self._evidence.items() if index < tail_start),
            reverse=True,
        )

    def _classify_back(self, history: list[msgspec.Raw], wanted: int | None) -> None:
        # Walk older events newest-first, recording the newest evidence of each new role,
        # until `wanted` candidates outside the tail exist (None: the whole history).
        found = len(self._candidates())
        index = self._floor - 1
        while index >= 0 and (wanted is None or found < wanted):
            raw = history[index]
            role = role_of_raw(raw)
            if role is not None and role not in self._evidence:
                self._evidence[role] = (index, raw.copy())
                found += 1
            index -= 1
        self._floor = index + 1

    def append(self, events: list[msgspec.Raw], updates: Mapping[str, Any]) -> None:
        """Account for events this process appended and fields it set (no re-read)."""
        for key, value in updates.items():
            self._fields[key] = encode_field(value)
        if not self._events_is_list:
            self._events_is_list = True
            self._fields.setdefault(EVENTS_KEY, encode_field([]))
        for event in events:
            raw = event.copy()
            role = role_of_raw(raw)
            self._recent.append((raw, role))
            if role is not None:
                self._evidence[role] = (self.count, raw)
            if self._all is not None:
                self._all.append(raw)
            self.count += 1

    def project(self) -> Projection:
        """Answer a projection; raises ``NeedsFullHistory`` if older evidence is needed."""
        config = self._config
        if not self._events_is_list:
            return self._projection((), (), self._fields)
        total = self.count
        if not config.enabled or total <= config.max_events:
            selected = tuple(range(total))
            history = self._all if self._all is not None else [raw for raw, _ in self._recent]
            return self._projection(selected, (), self._with_events(history))
        tail_start = total - config.recent_events
        slots = config.max_events - config.recent_events
        candidates = self._candidates()
        if len(candidates) < slots and not self.fully_classified:
            raise NeedsFullHistory
        chosen = sorted(candidates[:slots])
        backfilled = tuple(Backfill(index, role) for index, role in chosen)
        tail = [raw for raw, _ in list(self._recent)[-config.recent_events :]]
        events = [self._evidence[role][1] for _, role in chosen] + tail
        selected = tuple(index for index, _ in chosen) + tuple(range(tail_start, total))
        return self._projection(selected, backfilled, self._with_events(events))

    def _with_events(self, events: list[msgspec.Raw]) -> dict[str, msgspec.Raw]:
        return {
            key: (encode_field(events) if key == EVENTS_KEY else raw)
            for key, raw in self._fields.items()
        }

    def _projection(
        self,
        selected: tuple[int, ...],
        backfilled: tuple[Backfill, ...],
        fields: dict[str, msgspec.Raw],
    ) -> Projection:
        return Projection(
            request_id=self._request_id,
            config=self._config,
            total_events=self.count if self._events_is_list else 0,
            selected_indices=selected,
            backfilled=backfilled,
            fields=fields,
        )
