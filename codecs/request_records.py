"""Request records: decode once, keep events as undecoded ``msgspec.Raw``, write them back.

A record file is decoded in a single pass into its top-level fields. Every list-valued field
(``events`` above all) comes back as a list of ``Raw`` slices of the file, so an event is only
ever decoded as far as classifying it needs (``EventHead``); payloads stay bytes.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import msgspec

from teams_runtime.codecs.formats import JsonObject, now_iso
from teams_runtime.exceptions import RecordError

__all__ = [
    "EVENTS_CLOSE",
    "EVENTS_HEAD",
    "EVENTS_KEY",
    "EVENTS_OPEN",
    "EVENT_SEPARATOR",
    "RecordFields",
    "RenderedRecord",
    "decode_any",
    "decode_record",
    "encode_event",
    "encode_field",
    "encode_json",
    "encode_record",
    "format_event",
    "iter_pretty_record",
    "not_utf8_at",
    "pretty_event_size",
    "pretty_frame_size",
    "render_record",
    "split_raw_list",
]

EVENTS_KEY = "events"

# Top-level values as decoded by `decode_record`: lists are lists of Raw, objects are dicts. A
# record may hold any key (spec section 2), so its fields are free-form JSON.
RecordFields = JsonObject

_Scalar = str | int | float | bool | None


class _TopKey:
    """A top-level key as decoded: every occurrence is a key of its own (no two compare equal),
    so a key written twice shows up as two entries instead of the last one silently winning."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name


def _top_key(kind: type, value: Any) -> Any:
    if kind is _TopKey and isinstance(value, str):
        return _TopKey(value)
    raise NotImplementedError


_RECORD_DECODER = msgspec.json.Decoder(
    dict[_TopKey, list[msgspec.Raw] | JsonObject | _Scalar], dec_hook=_top_key
)
_RAW_LIST_DECODER = msgspec.json.Decoder(list[msgspec.Raw])
_ANY_DECODER = msgspec.json.Decoder()
_ENCODER = msgspec.json.Encoder()


def not_utf8_at(data: bytes) -> int | None:
    """The offset of the first byte of ``data`` that is not UTF-8, ``None`` if every one is.

    The whole buffer is checked, as every reader of a record must: an event left out of a
    prompt must not carry bad bytes into the next rewrite either. Most records are ASCII, which
    one C pass tells at about 60 GB/s without the copy a decode makes."""
    if data.isascii():
        return None
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return exc.start
    return None


def decode_record(data: bytes, source: str) -> RecordFields:
    """Decode the bytes of a record file in one pass; ``source`` names the file in errors.

    Raises ``RecordError`` for bytes that are not UTF-8, not JSON, not an object, hold a value
    that cannot be read (a number out of range) or a top-level key twice.
    """
    # The decoder skips over event bytes without looking inside strings; check UTF-8 once
    # here so a bad byte is a clear error now, not a failure when a prompt is built.
    bad = not_utf8_at(data)
    if bad is not None:
        raise RecordError(
            f"{source}: not valid UTF-8 at byte {bad}; "
            "restore the file from a backup or fix it by hand."
        )
    try:
        fields = _RECORD_DECODER.decode(data)
    except msgspec.ValidationError as exc:
        what = "must be a JSON object" if str(exc).startswith("Expected") else "cannot be read"
        raise RecordError(
            f"{source}: a request record {what} ({exc}); "
            "restore the file from a backup or fix it by hand."
        ) from exc
    except msgspec.DecodeError as exc:
        raise RecordError(
            f"{source}: not valid JSON ({exc}); restore the file from a backup or fix it by hand."
        ) from exc
    except RecursionError as exc:
        raise RecordError(
            f"{source}: values are nested too deeply to read safely; "
            "flatten the offending event or field by hand."
        ) from exc
    return _unique_keys(fields, source)


def _unique_keys(decoded: dict[_TopKey, Any], source: str) -> RecordFields:
    """The fields by name; a key written twice is refused, since decoding keeps only the last
    value and a rewrite would silently drop the first (30 events, say)."""
    fields = {key.name: value for key, value in decoded.items()}
    if len(fields) != len(decoded):
        seen: set[str] = set()
        for key in decoded:
            if key.name in seen:
                raise RecordError(
                    f"{source}: the key {key.name!r} appears more than once at the top level; "
                    "merge them by hand (teams-runtime will not drop either)."
                )
            seen.add(key.name)
    return fields


def split_raw_list(raw: msgspec.Raw | bytes | memoryview) -> list[msgspec.Raw]:
    """Split the bytes of a JSON array into its elements, each still undecoded."""
    return _RAW_LIST_DECODER.decode(raw)


def encode_json(value: Any) -> bytes:
    """Encode one value to JSON bytes (``RecordError`` if it cannot be); ``Raw`` parts of it
    are written from their bytes."""
    try:
        return _ENCODER.encode(value)
    except (TypeError, msgspec.EncodeError, RecursionError, UnicodeEncodeError) as exc:
        raise RecordError(f"a value cannot be encoded as JSON: {exc}") from exc


def encode_field(value: Any) -> msgspec.Raw:
    """Encode one decoded field value back to JSON bytes, as a ``Raw`` to embed in a record."""
    return msgspec.Raw(encode_json(value))


def encode_event(event: Mapping[str, Any]) -> msgspec.Raw:
    """Encode an event to append: a ``timestamp`` (now, with offset) first if it has none,
    and no ``payload`` key unless the payload is non-empty (spec section 2)."""
    if not isinstance(event, Mapping):
        raise RecordError(f"an event must be a JSON object, not {type(event).__name__}.")
    prepared: JsonObject = {}
    if "timestamp" not in event:
        prepared["timestamp"] = now_iso()
    for key, value in event.items():
        if key == "payload" and value in (None, {}, [], ""):
            continue
        prepared[key] = value
    return encode_field(prepared)


def encode_record(record: Mapping[str, Any]) -> bytes:
    """The bytes of a record file: 2-space indent, non-ASCII as is, a final newline.

    ``record`` holds decoded top-level values in file order; list values may hold ``Raw``
    elements (as ``decode_record`` returns them), which are written from their original bytes,
    re-indented, never re-encoded. One C pass encodes and one formats the whole file.
    """
    try:
        return msgspec.json.format(_ENCODER.encode(record), indent=2) + b"\n"
    except (TypeError, msgspec.EncodeError, RecursionError, UnicodeEncodeError) as exc:
        raise RecordError(f"request record cannot be encoded as JSON: {exc}") from exc


class RenderedRecord(msgspec.Struct, frozen=True):
    """The bytes of a record file and where its events are in them."""

    data: bytes
    events_start: int  # offset of the events array's `[`
    events_end: int  # offset just after its `]`
    spans: list[tuple[int, int]]  # (offset, length) of every event, in order


# How a non-empty events array is laid out in a record file: `[` newline, events at depth 2
# separated by `,` newline, newline `]`. Writers that splice bytes rely on exactly this.
EVENT_SEPARATOR = b",\n    "
EVENTS_OPEN = b"[\n    "
EVENTS_CLOSE = b"\n  ]"
EVENTS_HEAD = b'  "events": '  # what stands before the array, at the start of its line


def format_event(raw: msgspec.Raw | bytes) -> bytes:
    """An event as it stands in a record file: formatted, re-indented for depth 2."""
    # JSON strings cannot hold a raw newline, so every newline is structure: re-indenting a
    # formatted value is a plain replace.
    return msgspec.json.format(raw, indent=2).replace(b"\n", b"\n    ")


def pretty_event_size(raw: msgspec.Raw | bytes) -> int:
    """The UTF-8 size of an event as a prompt lays it out (``format_event``), in one look when
    it is already laid out so (every event teams-runtime wrote): a compact object or array
    (another program's) is formatted to be measured."""
    data = memoryview(raw)
    if len(data) > 2 and data[0] in b"{[" and data[1] != ord("\n"):
        return len(format_event(raw))
    return len(data)


def pretty_frame_size(fields: Mapping[str, bytes | msgspec.Raw]) -> int:
    """The UTF-8 size of ``iter_pretty_record``'s output for ``fields`` less its events: every
    other field, the braces, and the events array's own brackets as a non-empty one has them.
    An event adds its ``pretty_event_size`` and at most one ``EVENT_SEPARATOR``."""
    size = 3  # `{` newline, then `}`
    for key, raw in fields.items():
        size += len(_field_head(key)) + 2  # `,` newline (or a newline: one less, never more)
        if key == EVENTS_KEY and bytes(raw[:1]) == b"[":
            size += len(EVENTS_OPEN) + len(EVENTS_CLOSE)
        else:
            size += len(_field_value(raw))
    return size


def _field_head(key: str) -> bytes:
    return b"  " + _ENCODER.encode(key) + b": "


def _field_value(raw: msgspec.Raw | bytes) -> bytes:
    return msgspec.json.format(raw, indent=2).replace(b"\n", b"\n  ")


def render_record(fields: Mapping[str, Any], formatted_events: list[bytes]) -> RenderedRecord:
    """Lay out a record file and note where each event is (the same bytes as ``encode_record``).

    ``fields`` are decoded top-level values in file order; the ``events`` field is written from
    ``formatted_events`` (see ``format_event``), which must be already formatted.
    """
    out = bytearray(b"{\n")
    events_start = events_end = -1
    spans: list[tuple[int, int]] = []
    keys = list(fields)
    if EVENTS_KEY not in fields:
        keys.append(EVENTS_KEY)
    for position, key in enumerate(keys):
        out += _field_head(key)
        if key == EVENTS_KEY:
            events_start = len(out)
            if formatted_events:
                out += EVENTS_OPEN
                for number, event in enumerate(formatted_events):
                    if number:
                        out += EVENT_SEPARATOR
                    spans.append((len(out), len(event)))
                    out += event
                out += EVENTS_CLOSE
            else:
                out += b"[]"
            events_end = len(out)
        else:
            out += _field_value(encode_field(fields[key]))
        out += b",\n" if position < len(keys) - 1 else b"\n"
    out += b"}\n"
    return RenderedRecord(bytes(out), events_start, events_end, spans)


def iter_pretty_record(fields: Mapping[str, bytes | msgspec.Raw]) -> Iterator[bytes]:
    """Yield a record laid out as in its file, one chunk per field and one per event.

    Joined, the chunks equal ``msgspec.json.format`` of the record with indent 2.
    """
    if not fields:
        yield b"{}"
        return
    yield b"{\n"
    last = len(fields) - 1
    for position, (key, raw) in enumerate(fields.items()):
        tail = b"\n" if position == last else b",\n"
        data = memoryview(raw)
        events = split_raw_list(raw) if key == EVENTS_KEY and data and data[0] == ord("[") else None
        if not events:  # any other field, or an events value that is not a non-empty list
            yield _field_head(key) + _field_value(raw) + tail
            continue
        yield _field_head(key) + EVENTS_OPEN
        for number, event in enumerate(events):
            yield (EVENT_SEPARATOR if number else b"") + format_event(event)
        yield EVENTS_CLOSE + tail
    yield b"}"


def decode_any(raw: msgspec.Raw | bytes) -> Any:
    """Fully decode JSON bytes (only for what a caller really needs as Python objects)."""
    return _ANY_DECODER.decode(raw)
