"""The value a projection answers with: the selected events, counts and the notice.

A plain msgspec Struct of plain data (JSON fragments are ``bytes``), so it crosses a process or
network boundary unchanged, in JSON or msgpack. The policy that fills it is ``projection``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import msgspec

from teams_runtime.codecs.config import PromptContextConfig
from teams_runtime.codecs.envelopes import CompactionNotice
from teams_runtime.codecs.formats import JsonObject
from teams_runtime.codecs.request_ids import canonical_request_ref
from teams_runtime.codecs.request_records import RecordFields, decode_any, iter_pretty_record

__all__ = ["SELECTION", "Backfill", "BudgetNote", "OversizedEvent", "Projection"]

SELECTION = "recent_tail_plus_latest_role_evidence"


class Backfill(msgspec.Struct, frozen=True):
    """An older event selected as the newest evidence of a role missing from the tail."""

    index: int
    role: str


class OversizedEvent(msgspec.Struct, frozen=True):
    """An event left out because alone it takes more tokens than the budget leaves for
    events: named in the notice by its index and size, so the role can open the record."""

    index: int
    tokens: int


class BudgetNote(msgspec.Struct, frozen=True, kw_only=True):
    """What a token budget decided, when it left out events the selection had kept: the
    budget, the tokens the prompt is estimated to take under it, and the events too large
    for it alone (content-free: the notice carries it after ``canonical_request``)."""

    max_prompt_tokens: int
    prompt_tokens_estimate: int
    oversized: tuple[OversizedEvent, ...] = ()


class Projection(msgspec.Struct, frozen=True, kw_only=True, tag=True, omit_defaults=True):
    """A projected copy of a request record plus the counts that describe it.

    ``fields`` holds every top-level key of the record, in order, as JSON bytes; when the
    record's ``events`` is a list, ``fields["events"]`` is the JSON array of the selected
    events, each copied byte for byte, and ``event_sizes`` the UTF-8 size of each as a prompt
    lays it out (``request_records.pretty_event_size``): what a token budget counts, without
    a parse. ``budget`` is set only when a token budget left out events the selection kept
    (``policy.budget``).
    """

    request_id: str
    config: PromptContextConfig
    total_events: int
    selected_indices: tuple[int, ...]
    backfilled: tuple[Backfill, ...]
    fields: dict[str, bytes]
    history_bytes: int  # the byte size of every event as stored (what full history would add)
    event_sizes: tuple[int, ...] = ()
    budget: BudgetNote | None = None

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
    def notice(self) -> JsonObject:
        """The content-free notice (spec section 5) in its key order; empty if not compacted."""
        if not self.compacted:
            return {}
        notice = msgspec.structs.asdict(
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
        if self.config.layout == "shared_prefix":  # why more than max_events may be included
            notice["step"] = self.config.step
        budget = self.budget
        if budget is not None:  # only when the budget decided: the spec's keys stay as they are
            notice["max_prompt_tokens"] = budget.max_prompt_tokens
            notice["prompt_tokens_estimate"] = budget.prompt_tokens_estimate
            if budget.oversized:
                notice["oversized_events"] = [
                    {"index": item.index, "tokens": item.tokens} for item in budget.oversized
                ]
        return notice

    @property
    def record(self) -> RecordFields:
        """The projected record decoded to Python objects (a fresh copy on every access)."""
        return {key: decode_any(raw) for key, raw in self.fields.items()}

    def value(self, key: str) -> Any:
        """One top-level field decoded (``None`` if the record has no such field)."""
        raw = self.fields.get(key)
        return decode_any(raw) if raw is not None else None

    def raw_fields(self) -> dict[str, msgspec.Raw]:
        """``fields`` as ``msgspec.Raw``, to embed the record in a larger JSON value."""
        return {key: msgspec.Raw(value) for key, value in self.fields.items()}

    def iter_record_json(self) -> Iterator[bytes]:
        """Yield the projected record as 2-space-indented JSON, a chunk per field and event."""
        return iter_pretty_record(self.fields)
