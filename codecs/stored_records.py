"""What a ``RecordStore`` hands back: a record's parts as an index gives them, a whole parsed
record, and the outcome of an append (shapes only: the stores in ``storage`` make them, the
ContextActor and the digest read them)."""

from __future__ import annotations

from collections.abc import Hashable

import msgspec

from teams_runtime.codecs.request_records import RecordFields

__all__ = ["AppendOutcome", "IndexedParts", "ParsedRecord", "RecordRead"]


class IndexedParts(msgspec.Struct, frozen=True):
    """A record as an index lets one read it: the other fields plus the few events needed."""

    version: Hashable
    fields: RecordFields  # every top-level field; `events` is an empty list here
    count: int
    history_bytes: int
    tail: list[msgspec.Raw]  # the last events (all of them when there are few)
    evidence: dict[str, tuple[int, msgspec.Raw]]  # role -> (position, event): newest evidence
    source: str  # names the record in errors (its file, for the file store)

    def covers(self, events: int) -> bool:
        """Whether ``tail`` holds the last ``events`` events (or the whole history)."""
        return len(self.tail) >= min(events, self.count)


class ParsedRecord(msgspec.Struct, frozen=True):
    """A whole record, decoded once: top-level fields, events as undecoded ``Raw``."""

    version: Hashable
    fields: RecordFields
    source: str  # names the record in errors (its file, for the file store)


RecordRead = IndexedParts | ParsedRecord


class AppendOutcome(msgspec.Struct, frozen=True):
    """The outcome of one append: the version it replaced and what is stored now.

    ``applied`` is ``False`` when an append with the same key was already stored (nothing was
    written); ``count`` is then the event count that append left, as it answered the first time.
    """

    read_version: Hashable
    parts: IndexedParts | None  # None when not applied
    count: int
    applied: bool = True
    refused: bool = False  # the append's condition (`unless`, `expect`) failed: nothing written
    # Refused: the fields the condition named, as the record held them (absent ones left out).
    fields: RecordFields = msgspec.field(default_factory=dict)
    # Every event was laid out anew (the record was in another layout): bytes read before
    # this append are not the record's bytes any more.
    relaid: bool = False
