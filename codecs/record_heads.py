"""The head of a request record on NATS: one KV value that says what the record is now.

A record on NATS is its events (one JetStream message each, or several for an event larger
than a message may be: see docs/scaling.md) plus a head: the top-level fields, and where the
events that count are. The head is the commit point of every write: an append publishes its
events first and then replaces the head with a revision-checked update, so a head names only
events whose append completed.

A head must fit in one message whatever the record holds, so most of what it keeps is
bounded: the sequences of the last ``HEAD_TAIL`` events, digests (not the text) of the keys on
the last events, the ids of the last ``HEAD_RECENT`` appends; a top-level field too large to
stand in the head is ``spilled``: its value is a message of its own and the head keeps ``null``
in its place (so the fields keep their order) and the message's sequence. ``void`` is not
bounded: it gains a range (two integers) for every append a dead writer left half done and
never loses one, so a request that sees very many of those grows its head, towards the one
message it must fit in.
"""

from __future__ import annotations

import hashlib

import msgspec

__all__ = [
    "HEAD_RECENT",
    "HEAD_TAIL",
    "RecordHead",
    "decode_head",
    "encode_head",
    "field_values",
    "join_fields",
    "key_digest",
]

HEAD_TAIL = 256  # stream sequences of the last events a head keeps (as the file index does)
HEAD_RECENT = 64  # ids of the last appends a head keeps: a retried append finds its own
# 1: `keys` held the keys themselves (read as their digests). Kept: main ran schema 1 from the
# merge of the backend until the merge of fix13a, through four merges, any of which a team may
# have run against its server.
_SCHEMA = 2


class RecordHead(msgspec.Struct, kw_only=True):
    """What a record is at one revision of its KV entry."""

    schema: int = _SCHEMA
    fields: msgspec.Raw  # every top-level field as a JSON object; `events` is `[]` in its place
    count: int = 0  # events in the history
    history_bytes: int = 0  # summed length of the events as the record file lays them out
    last_seq: int = 0  # stream sequence of the newest event's (last) message (0: none)
    tip: int = 0  # the request's last stream sequence the next append must find (>= last_seq)
    tail: list[int] = []  # stream sequences of the last min(count, HEAD_TAIL) events
    evidence: dict[str, tuple[int, int]] = {}  # role -> (position, sequence) of newest evidence
    # `key_digest` of each append key on the last events -> the count after its newest event
    keys: list[tuple[str, int]] = []
    void: list[tuple[int, int]] = []  # stream sequence ranges of abandoned appends (never events)
    recent: list[tuple[str, int]] = []  # ids of the last appends -> count after each
    spilled: dict[str, int] = {}  # top-level field -> sequence of the message holding its value


_ENCODER = msgspec.json.Encoder()
_DECODER = msgspec.json.Decoder(RecordHead)
_FIELDS_DECODER = msgspec.json.Decoder(dict[str, msgspec.Raw])


def key_digest(key: str) -> str:
    """What a head keeps of an append key: 128 bits of its SHA-256, whatever the key's length."""
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def encode_head(head: RecordHead) -> bytes:
    """The KV value of a head."""
    return _ENCODER.encode(head)


def decode_head(data: bytes) -> RecordHead:
    """Decode a KV value written by ``encode_head``; ``msgspec.DecodeError`` if it is not one.
    Fields it no longer has (``append``: the id of the append that wrote it) are ignored."""
    head = _DECODER.decode(data)
    head.fields = msgspec.Raw(bytes(head.fields))  # do not pin the whole value
    if head.schema < _SCHEMA:
        head.keys = [(key_digest(key), count) for key, count in head.keys]
        head.schema = _SCHEMA
    return head


def field_values(fields: msgspec.Raw | bytes) -> dict[str, msgspec.Raw]:
    """A head's fields as name -> undecoded value, in their order."""
    return _FIELDS_DECODER.decode(fields)


def join_fields(fields: msgspec.Raw | bytes, spilled: dict[str, bytes]) -> bytes:
    """The fields as one JSON object, each spilled value (name -> its JSON bytes) in its place."""
    values = field_values(fields)
    for name, value in spilled.items():
        values[name] = msgspec.Raw(value)
    return _ENCODER.encode(values)
