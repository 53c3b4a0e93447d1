"""What an append changes in a record head, worked out without a round trip: its events laid
out once (``prepare``), and the head after they are published (``advanced_head``)."""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

from teams_runtime.codecs.evidence import append_key_of, role_of_raw
from teams_runtime.codecs.record_heads import (
    HEAD_RECENT,
    HEAD_TAIL,
    RecordHead,
    field_values,
    key_digest,
)
from teams_runtime.codecs.request_records import encode_json
from teams_runtime.storage._append_checks import format_history
from teams_runtime.storage.protocols import IDEMPOTENCY_WINDOW

__all__ = ["Prepared", "advanced_head", "prepare"]


class Prepared(msgspec.Struct, frozen=True):
    """The events of one append, laid out once before any round trip."""

    formatted: list[bytes]
    roles: list[str | None]
    keys: list[str | None]


def prepare(events: list[msgspec.Raw], source: str) -> Prepared:
    """Lay ``events`` out as the record file does (``RecordError`` naming ``source`` for one
    that cannot be), with the role and append key of each."""
    return Prepared(
        format_history(events, source),
        [role_of_raw(raw) for raw in events],
        [append_key_of(raw) for raw in events],
    )


def advanced_head(
    head: RecordHead,
    *,
    updates: Mapping[str, msgspec.Raw],
    prepared: Prepared,
    published: list[int],
    tip: int,
    append_id: str,
) -> RecordHead:
    """The head after the append ``append_id``: fields updated, the events whose (last)
    messages are at ``published`` counted, ``tip`` the request's last sequence now."""
    fields, spilled = head.fields, dict(head.spilled)
    if updates:  # else the fields stay as they are, bytes and all
        values = field_values(head.fields)
        for name, value in updates.items():
            values[name] = value
            spilled.pop(name, None)
        fields = msgspec.Raw(encode_json(values))
    count = head.count
    new_count = count + len(published)
    evidence = dict(head.evidence)
    latest = dict(head.keys)  # a key's newest event is the one a retry is answered from
    for offset, seq in enumerate(published):
        role = prepared.roles[offset]
        if role is not None:
            evidence[role] = (count + offset, seq)
        event_key = prepared.keys[offset]
        if event_key is not None:
            digest = key_digest(event_key)
            latest.pop(digest, None)
            latest[digest] = count + offset + 1
    oldest = new_count - IDEMPOTENCY_WINDOW  # keys of events older than the window go
    return RecordHead(
        fields=fields,
        count=new_count,
        history_bytes=head.history_bytes + sum(len(f) for f in prepared.formatted),
        last_seq=published[-1] if published else head.last_seq,
        tip=tip,
        tail=[*head.tail, *published][-HEAD_TAIL:],
        evidence=evidence,
        keys=[(digest, after) for digest, after in latest.items() if after - 1 >= oldest],
        void=head.void,
        recent=[*head.recent, (append_id, new_count)][-HEAD_RECENT:],
        spilled=spilled,
    )
