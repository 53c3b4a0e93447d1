"""A per-request digest that answers any projection without the full history.

It holds the event count, the last ``max_events`` events, and the newest role evidence of every
role in the history: memory that does not grow with the history. For a stepped tail
(``prompt_context.layout: shared_prefix``) it holds the last ``projection.tail_window`` events
and, per role, its newest evidence older than them (``prior``): a stepped backfill is a
role's newest evidence before the tail's start, which may be older than its newest. Built from
an index whose tail is too short to know it, it says so (``complete`` is false) and the
ContextActor reads the whole record instead.

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
from teams_runtime.policy.projection import tail_start, tail_window

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
        prior: _Prior | None = None,
    ) -> None:
        """Keep owned copies of ``recent``, ``evidence`` and (compaction off) ``history``.

        ``fields`` are the decoded top-level fields; ``events`` is not a list when the record's
        is not. ``evidence`` holds every role's newest evidence (the whole history classified);
        ``prior`` (a stepped tail only) each role's newest evidence older than the last
        ``tail_window`` events, and the roles for which that is not known.
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
        keep = tail_window(config)
        self._recent: deque[msgspec.Raw] = deque(
            (raw.copy() for raw in recent[-keep:]), maxlen=keep
        )
        self._evidence = {role: (index, raw.copy()) for role, (index, raw) in evidence.items()}
        self._stepped = config.enabled and config.layout == "shared_prefix"
        self._prior = prior.copied() if prior is not None else _Prior({}, set())
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
            if self._stepped and len(self._recent) == self._recent.maxlen:
                self._prior.leaving(self.count - len(self._recent), self._recent[0])
            self._recent.append(raw)
            if role is not None:
                self._evidence[role] = (self.count, raw)
            if self._all is not None:
                self._all.append(raw)
            self.count += 1

    @property
    def complete(self) -> bool:
        """Whether this summary can answer (only a stepped tail may need evidence older than
        an index's tail: the ContextActor then summarises the whole record)."""
        if not self._stepped or self._cached is not None:
            return True
        try:
            self._cached = self._project()
        except _Incomplete:
            return False
        return True

    def project(self) -> Projection:
        """Answer a projection (computed once per change, then shared). Raises
        ``ValueError`` when it is not ``complete``."""
        if self._cached is None:
            self._cached = self._project()
        return self._cached

    def _stepped_backfill(self) -> list[tuple[int, str, msgspec.Raw]] | None:
        """A stepped tail's backfill candidates, newest first: each role missing from the
        tail's first ``recent_events`` events, with its newest evidence before the tail
        (``None``: one of them is not known here). Empty when nothing is stepped."""
        config, total = self._config, self.count
        if not self._stepped or not self._events_is_list or total <= config.max_events:
            return []
        start = tail_start(total, config)
        first = total - len(self._recent)  # the position of the oldest event kept
        if start < first:  # (kept fewer than tail_window: a summary of a short index tail)
            return None
        roles = [role_of_raw(raw) for raw in self._recent]
        fixed = set(roles[start - first : start - first + config.recent_events]) - {None}
        candidates: list[tuple[int, str, msgspec.Raw]] = []
        for role, (index, raw) in self._evidence.items():
            if role in fixed:
                continue
            if index >= start:  # written since the tail started: the one before it is wanted
                found = next(
                    (i for i in range(start - 1, first - 1, -1) if roles[i - first] == role), None
                )
                if found is not None:
                    index, raw = found, self._recent[found - first]
                elif role in self._prior.newest:
                    index, raw = self._prior.newest[role]
                elif role in self._prior.unknown:
                    return None
                else:
                    continue  # none before the tail: nothing to backfill
            candidates.append((index, role, raw))
        candidates.sort(reverse=True)
        return candidates

    def _project(self) -> Projection:
        config = self._config
        if not self._events_is_list:
            return self._projection((), (), self._fields, [])
        total = self.count
        if not config.enabled or total <= config.max_events:
            history = self._all if self._all is not None else list(self._recent)
            return self._projection(tuple(range(total)), (), self._with_events(history), history)
        if self._stepped:
            return self._project_stepped()
        tail_start = total - config.recent_events
        slots = config.max_events - config.recent_events
        chosen = sorted(self._candidates()[:slots])
        backfilled = tuple(Backfill(index, role) for index, role in chosen)
        tail = list(self._recent)[-config.recent_events :]
        events = [self._evidence[role][1] for _, role in chosen] + tail
        selected = tuple(index for index, _ in chosen) + tuple(range(tail_start, total))
        return self._projection(selected, backfilled, self._with_events(events), events)

    def _project_stepped(self) -> Projection:
        config, total = self._config, self.count
        candidates = self._stepped_backfill()
        if candidates is None:
            raise _Incomplete("this summary needs the whole record (complete is false)")
        chosen = sorted(candidates[: config.max_events - config.recent_events])
        start = tail_start(total, config)
        first = total - len(self._recent)
        tail = list(self._recent)[start - first :]
        events = [raw for _, _, raw in chosen] + tail
        selected = tuple(index for index, _, _ in chosen) + tuple(range(start, total))
        backfilled = tuple(Backfill(index, role) for index, role, _ in chosen)
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
    prior = None
    if config.enabled:  # appends may grow it past max_events: older evidence is needed then
        newest = _newest(history)
        evidence = {role: (index, history[index]) for role, index in newest.items()}
        if config.layout == "shared_prefix":
            older = max(len(history) - tail_window(config), 0)
            before = _newest(history[:older]) if older else {}
            prior = _Prior({role: (i, history[i]) for role, i in before.items()}, set())
    return RequestDigest(
        config=config,
        fields=fields,
        count=len(history),
        recent=history[-tail_window(config) :] if history else [],
        evidence=evidence,
        history_bytes=sum(map(len, history)),
        history=history if not config.enabled else None,
        prior=prior,
    )


def _newest(history: list[msgspec.Raw]) -> dict[str, int]:
    try:
        # The events as one array again (one copy: Raw parts are written as they are).
        return history_evidence(encode_json(history)).newest
    except (msgspec.DecodeError, RecursionError):  # an event the head view cannot read
        return {role: index for index, raw in enumerate(history) if (role := role_of_raw(raw))}


def digest_from_parts(parts: IndexedParts, config: PromptContextConfig) -> RequestDigest:
    """Summarise a record read through its index (every role's newest evidence; for a stepped
    tail, each role's older evidence as far as the index's tail reaches: ``complete``)."""
    prior = None
    if config.enabled and config.layout == "shared_prefix":
        prior = _prior_of_parts(parts, tail_window(config))
    return RequestDigest(
        config=config,
        fields=parts.fields,
        count=parts.count,
        recent=parts.tail,
        evidence=parts.evidence,
        history_bytes=parts.history_bytes,
        prior=prior,
    )


class _Incomplete(ValueError):
    """A stepped summary lacks a role's evidence older than the index's tail."""


class _Prior:
    """Each role's newest evidence older than the events a summary keeps (``newest``), and the
    roles whose such evidence is not known (an index's tail did not reach back to it)."""

    def __init__(self, newest: dict[str, tuple[int, msgspec.Raw]], unknown: set[str]) -> None:
        self.newest = newest
        self.unknown = unknown

    def copied(self) -> _Prior:
        """Owned copies (a ``Raw`` kept from a read pins the whole buffer otherwise)."""
        newest = {role: (index, raw.copy()) for role, (index, raw) in self.newest.items()}
        return _Prior(newest, set(self.unknown))

    def leaving(self, index: int, raw: msgspec.Raw) -> None:
        """Event ``index`` is no longer kept: it is now its role's newest older evidence."""
        role = role_of_raw(raw)
        if role is not None:
            self.newest[role] = (index, raw)
            self.unknown.discard(role)


def _prior_of_parts(parts: IndexedParts, keep: int) -> _Prior:
    """``_Prior`` from an index: a role's newest evidence when it is older than the last
    ``keep`` events, else the newest older one in the index's tail, else unknown (none when
    the tail reaches the first event)."""
    first_kept = parts.count - min(keep, len(parts.tail))
    tail_first = parts.count - len(parts.tail)
    newest: dict[str, tuple[int, msgspec.Raw]] = {}
    wanted: set[str] = set()
    for role, (index, raw) in parts.evidence.items():
        if index < first_kept:
            newest[role] = (index, raw)
        else:
            wanted.add(role)
    for index in range(first_kept - 1, tail_first - 1, -1):
        if not wanted:
            break
        raw = parts.tail[index - tail_first]
        found = role_of_raw(raw)
        if found is not None and found in wanted:
            newest[found] = (index, raw)
            wanted.discard(found)
    return _Prior(newest, wanted if tail_first > 0 else set())
