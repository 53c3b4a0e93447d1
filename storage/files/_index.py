"""The record index: where things are in one version of a record file (a checked cache).

An index says where, in one version of a record, the events array, the last events and the
newest evidence of every role are. A writer lays one down next to each record it writes
(``.teams_runtime/index/<id>.idx``); a read of a record that has none usable derives one from
the file's bytes in one pass (``index_from_bytes``) and keeps it there when the record is large.
It is a cache, never the truth, and what it says is checked before it is used:

- the file starts with a BLAKE2b digest of the rest, so a changed, truncated or random index
  is refused;
- it names its request and the exact file version it describes (size, mtime, ctime, inode);
- every offset must lie inside the file and land on the layout a writer produces (the events
  array's brackets, the separators between events), and the events it points at must split and
  classify as it says.

Whatever fails a check is never a wrong answer or a crash: the index is derived from the
bytes again, or the record parsed whole when it is not laid out as teams-runtime writes it, and
the next write lays a correct index down. With an index, a cold projection reads a few
kilobytes instead of parsing the whole history, and an append copies the old events' bytes
instead of re-formatting them.

This module holds the index and its file; ``indexed_reads`` reads what a kept index points
at, checking it, and ``index_derivation`` derives an index from a record's bytes.
"""

from __future__ import annotations

import contextlib

import msgspec

from teams_runtime.codecs.request_records import (
    EVENT_SEPARATOR,
    EVENTS_CLOSE,
    EVENTS_OPEN,
    RenderedRecord,
)
from teams_runtime.exceptions import RecordError
from teams_runtime.storage.local_files import FileVersion, open_regular, write_atomic
from teams_runtime.storage.workspace import RecordPaths

__all__ = [
    "INDEX_TAIL",
    "RecordIndex",
    "Span",
    "encode_index",
    "evidence_spans",
    "history_bytes",
    "index_for",
    "load_index",
    "write_index",
]

INDEX_SCHEMA = 2
INDEX_TAIL = 256  # spans of the last events an index keeps: enough for max_events <= 256
_DIGEST_SIZE = 16

Span = tuple[int, int]  # (offset, length) of an event in the record file


class RecordIndex(msgspec.Struct, frozen=True, kw_only=True):
    """Where things are in one version of a record file written by teams-runtime."""

    schema: int = INDEX_SCHEMA
    request_id: str
    record: FileVersion
    count: int
    events_start: int  # offset of the events array's `[`
    events_end: int  # offset just after its `]`
    tail: list[Span]  # the last min(count, INDEX_TAIL) events, oldest first
    evidence: dict[str, tuple[int, Span]]  # role -> (event position, span) of its newest evidence
    # The writer laid out every event (an append may copy them all as bytes); an index derived
    # from another program's file vouches only for the events it points at.
    canonical: bool = True


_INDEX_ENCODER = msgspec.msgpack.Encoder()
_INDEX_DECODER = msgspec.msgpack.Decoder(RecordIndex)


def _digest(payload: bytes) -> bytes:
    import hashlib  # loaded at the first index read or write: `status` of no record needs none

    return hashlib.blake2b(payload, digest_size=_DIGEST_SIZE).digest()


def encode_index(index: RecordIndex) -> bytes:
    """The bytes of an index file: a digest of the payload, then the payload (msgpack)."""
    payload = _INDEX_ENCODER.encode(index)
    return _digest(payload) + payload


def load_index(paths: RecordPaths, version: FileVersion) -> RecordIndex | None:
    """The index if it is intact and describes exactly ``version`` of this record, else
    ``None``. What it points at is checked by ``parts_from_index``."""
    try:
        fd = open_regular(paths.index)  # never blocks on a FIFO planted in its place
        with open(fd, "rb") as handle:
            data = handle.read()
    except OSError:
        return None
    digest, payload = data[:_DIGEST_SIZE], data[_DIGEST_SIZE:]
    if len(digest) != _DIGEST_SIZE or _digest(payload) != digest:
        return None
    try:
        index = _INDEX_DECODER.decode(payload)
    except (msgspec.DecodeError, RecursionError):
        return None
    if (
        index.schema != INDEX_SCHEMA
        or index.request_id != paths.request_id
        or index.record != version
    ):
        return None
    return index


def history_bytes(index: RecordIndex) -> int:
    """The summed length of every event, derived from the layout (nothing to trust)."""
    if not index.count:
        return 0
    inner = index.events_end - index.events_start - len(EVENTS_OPEN) - len(EVENTS_CLOSE)
    return inner - (index.count - 1) * len(EVENT_SEPARATOR)


def evidence_spans(
    roles: list[str | None], spans: list[Span], start: int = 0
) -> dict[str, tuple[int, Span]]:
    """Each role's newest evidence among events classified as ``roles``, at their ``spans``."""
    evidence: dict[str, tuple[int, Span]] = {}
    for position, role in enumerate(roles):
        if role is not None:
            evidence[role] = (start + position, spans[position])
    return evidence


def index_for(
    paths: RecordPaths,
    rendered: RenderedRecord,
    version: FileVersion,
    count: int,
    tail: list[Span],
    evidence: dict[str, tuple[int, Span]],
) -> RecordIndex:
    """The index of a record file just written from ``rendered``."""
    return RecordIndex(
        request_id=paths.request_id,
        record=version,
        count=count,
        events_start=rendered.events_start,
        events_end=rendered.events_end,
        tail=tail[-INDEX_TAIL:],
        evidence=evidence,
    )


def write_index(paths: RecordPaths, index: RecordIndex) -> None:
    """Write the index; a cache, so not fsynced, and a failure only costs a later parse.

    A linked index folder is refused before the record is written (``ensure_folder``)."""
    with contextlib.suppress(RecordError):
        write_atomic(paths.index, encode_index(index), runtime=paths.runtime, durable=False)
