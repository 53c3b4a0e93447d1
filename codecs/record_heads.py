"""The head of a request record on NATS: one KV value that says what the record is now.

A record on NATS is its events (one JetStream message each, see docs/scaling.md) plus a head:
the top-level fields, and where the events that count are. The head is the commit point of
every write: an append publishes its events first and then replaces the head with a
revision-checked update, so a head names only events whose append completed.
"""

from __future__ import annotations

import msgspec

__all__ = ["HEAD_RECENT", "HEAD_TAIL", "RecordHead", "decode_head", "encode_head"]

HEAD_TAIL = 256  # stream sequences of the last events a head keeps (as the file index does)
HEAD_RECENT = 64  # ids of the last appends a head keeps: a retried append finds its own


class RecordHead(msgspec.Struct, kw_only=True):
    """What a record is at one revision of its KV entry."""

    schema: int = 1
    fields: msgspec.Raw  # every top-level field as a JSON object; `events` is `[]` in its place
    count: int = 0  # events in the history
    history_bytes: int = 0  # summed length of the events as the record file lays them out
    last_seq: int = 0  # stream sequence of the newest event (0: none)
    tip: int = 0  # the request's last stream sequence the next append must find (>= last_seq)
    tail: list[int] = []  # stream sequences of the last min(count, HEAD_TAIL) events
    evidence: dict[str, tuple[int, int]] = {}  # role -> (position, sequence) of newest evidence
    keys: list[tuple[str, int]] = []  # append keys on the last events -> count after that append
    void: list[tuple[int, int]] = []  # stream sequence ranges of abandoned appends (never events)
    append: str = ""  # the id of the append (or create) that wrote this revision
    recent: list[tuple[str, int]] = []  # ids of the last appends -> count after each


_ENCODER = msgspec.json.Encoder()
_DECODER = msgspec.json.Decoder(RecordHead)


def encode_head(head: RecordHead) -> bytes:
    """The KV value of a head."""
    return _ENCODER.encode(head)


def decode_head(data: bytes) -> RecordHead:
    """Decode a KV value written by ``encode_head``; ``msgspec.DecodeError`` if it is not one."""
    head = _DECODER.decode(data)
    head.fields = msgspec.Raw(bytes(head.fields))  # do not pin the whole value
    return head
