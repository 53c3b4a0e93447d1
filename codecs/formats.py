"""Text formats used across the package: pretty JSON (and ``JsonObject``, free-form JSON),
timestamps (ISO-8601 with offset), counted nouns ("1 prompt", "2 prompts") and values made safe
to print on a terminal."""

from __future__ import annotations

import math
from typing import Any

import msgspec

__all__ = ["JsonObject", "count_of", "now_iso", "pretty_json", "pretty_json_bytes", "printable"]

# A JSON object whose shape nobody fixes: a record's keys beyond the spec's, an event's payload
# as another program wrote it, an envelope's ``params``, a model's reply before the contract
# checks it, a JSON schema. The one name for such data; data whose shape the runtime knows has
# a Struct, a TypedDict or a Literal of its own instead.
JsonObject = dict[str, Any]

_ENCODER = msgspec.json.Encoder()
# C0 controls, DEL and C1 controls: a terminal acts on them (clear the screen, set the window
# title, move the cursor) instead of showing them.
_CONTROLS = {code: None for code in (*range(0x20), *range(0x7F, 0xA0))}


def pretty_json_bytes(value: Any) -> bytes:
    """``value`` as 2-space-indented JSON bytes (non-ASCII kept as is), no final newline."""
    return msgspec.json.format(_ENCODER.encode(value), indent=2)


def pretty_json(value: Any) -> str:
    """``value`` as 2-space-indented JSON text, no final newline."""
    return pretty_json_bytes(value).decode()


def now_iso() -> str:
    """The current local time as ISO-8601 with its UTC offset (how records stamp events)."""
    from datetime import datetime  # here, not at the top: `status` of no record needs none

    return datetime.now().astimezone().isoformat()


# The times ``iso_of`` shows as they are: 1970-01-01 to 9999-12-30 (a day short of the end, so
# no local offset carries it past what ``datetime`` holds).
_LAST_SHOWN = 253402214400.0


def iso_of(unix_time: float) -> str:
    """A Unix time as local ISO-8601 with its UTC offset, to the second (as ``now_iso``).

    Total: a time outside 1970 to 9999 (or not finite, say from another program's header or a
    file's mtime) is shown as the nearest end of that range rather than raising."""
    from datetime import datetime  # as in now_iso

    when = min(max(unix_time, 0.0), _LAST_SHOWN) if math.isfinite(unix_time) else 0.0
    return datetime.fromtimestamp(when).astimezone().isoformat(timespec="seconds")


def count_of(count: int, noun: str) -> str:
    """``count`` and ``noun`` in the right number: ``1 prompt``, ``2 prompts``, ``0 prompts``,
    ``1,200 prompts`` (grouped as the tables group theirs)."""
    return f"{count:,} {noun if count == 1 else noun + 's'}"


def printable(text: str) -> str:
    """``text`` without control characters (escape sequences, bells, carriage returns), for a
    value read from a record or a log that a command prints as text. JSON output keeps values
    exact: its escaping already makes them inert."""
    return text.translate(_CONTROLS)
