"""What every record store checks and lays out in an append, whatever keeps the record."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import msgspec

from teams_runtime.codecs.request_records import (
    EVENTS_KEY,
    RecordFields,
    decode_any,
    encode_field,
    format_event,
)
from teams_runtime.exceptions import RecordError

__all__ = ["checked_updates", "condition_fields", "field_holds", "fields_are", "format_history"]


def format_history(history: list[msgspec.Raw], source: str) -> list[bytes]:
    """Each event as the record file lays it out; ``RecordError`` naming ``source`` and the
    event's position for one that cannot be."""
    formatted = []
    for position, raw in enumerate(history):
        try:
            formatted.append(format_event(raw))
        except (msgspec.DecodeError, RecursionError) as exc:
            raise RecordError(
                f"{source}: event {position} cannot be laid out again ({exc}); "
                "fix that event by hand."
            ) from exc
    return formatted


def checked_updates(updates: Mapping[str, Any]) -> RecordFields:
    """The updates of an append as a dict; ``RecordError`` if they try to set ``events``."""
    if EVENTS_KEY in updates:
        raise RecordError("`events` cannot be set directly; append events instead.")
    return dict(updates)


def field_holds(fields: Mapping[str, Any], refuse_if: Mapping[str, Any]) -> bool:
    """Whether a top-level field holds the value ``refuse_if`` names for it."""
    return any(
        key in fields and decode_any(encode_field(fields[key])) == value
        for key, value in refuse_if.items()
    )


def _same(left: Any, right: Any) -> bool:
    """JSON equality that tells ``true`` from ``1`` and ``1.0`` from ``1`` (Python does not)."""
    if type(left) is not type(right):
        return False
    if isinstance(left, dict):
        return left.keys() == right.keys() and all(_same(left[k], right[k]) for k in left)
    if isinstance(left, list):
        return len(left) == len(right) and all(map(_same, left, right))
    return bool(left == right)


def _value(fields: Mapping[str, Any], key: str) -> Any:
    return decode_any(encode_field(fields[key])) if key in fields else None


def fields_are(fields: Mapping[str, Any], expect: Mapping[str, Any]) -> bool:
    """Whether every field ``expect`` names holds exactly that value (absent: ``None``)."""
    return all(_same(_value(fields, key), value) for key, value in expect.items())


def condition_fields(fields: Mapping[str, Any], names: Iterable[str]) -> RecordFields:
    """The values of the fields a condition named, as the record holds them (absent ones
    left out): what a refused append answers, so the writer decides again without a read."""
    return {key: _value(fields, key) for key in names if key in fields}
