"""Values on a team's events stream: an event, or a top-level field spilled from a record head,
as one message or, when larger than a message may be, as several (docs/scaling.md).

The server refuses a message larger than its ``max_payload`` (1 MiB unless configured),
headers included, and closes the connection of a client that sends one. A value that does not
fit in one message is split into parts published one after another: each says
``Tr-Part: k/n``, and the last one also names the stream sequences of the others
(``Tr-Parts``). A head points at a value by the sequence of its last message; a reader gets the
others in one more round of direct gets. A value that fits is one message without these headers,
as every value was before parts existed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

from nats.js import JetStreamContext

from teams_runtime.exceptions import RecordError

__all__ = [
    "HEADER_APPEND",
    "HEADER_FIELD",
    "HEADER_PART",
    "HEADER_PARTS",
    "HistoryParts",
    "message_room",
    "read_value",
    "split_value",
]

HEADER_APPEND = "Tr-Append"  # the id of the append that published a message
HEADER_PART = "Tr-Part"  # "k/n": the message is part k of a value split into n
HEADER_PARTS = "Tr-Parts"  # on the last part: the sequences of the parts before it
HEADER_FIELD = "Tr-Field"  # the value is a spilled top-level field, never an event
# Bytes of each message kept for its headers: the append id, the expected last sequence and the
# request's subject filter (up to about 700 bytes for a 200-byte id), the part (n/m). The list
# of earlier parts on a last part is counted apart, _SEQUENCE_ROOM bytes a part.
HEADER_ROOM = 2048
_SEQUENCE_ROOM = 21  # up to 20 digits and a comma


def message_room(max_payload: int) -> int:
    """The bytes of data a message may carry beside its headers, on a server whose
    ``max_payload`` (the server's INFO) is given."""
    return max_payload - HEADER_ROOM


def split_value(data: bytes, room: int) -> list[bytes]:
    """``data`` as the parts of its messages: itself when it fits in ``room`` bytes, else parts
    of one size small enough that the last leaves space for the list of the others."""
    if len(data) <= room:
        return [data]
    count = 2
    while True:
        size = room - _SEQUENCE_ROOM * count
        if size < 1024:
            raise RecordError(
                f"a value of {len(data)} bytes does not fit in messages of {room} bytes; raise "
                "the NATS server's max_payload (at least 64 KiB)."
            )
        needed = -(-len(data) // size)
        if needed <= count:
            return [data[start : start + size] for start in range(0, len(data), size)]
        count = needed


def _earlier_parts(headers: Mapping[str, str] | None, seq: int) -> list[int]:
    listed = (headers or {}).get(HEADER_PARTS)
    if not listed:
        return []
    try:
        return [int(item) for item in listed.split(",")]
    except ValueError:
        raise RecordError(
            f"the message at sequence {seq} names its parts as {listed[:40]!r}, not as "
            "teams-runtime writes them; restore the request with `teams-runtime import`."
        ) from None


async def read_value(js: JetStreamContext, stream: str, seq: int) -> bytes:
    """The bytes of the value whose (last) message is at ``seq`` in ``stream``."""
    msg = await js.get_msg(stream, seq=seq, direct=True)
    earlier = _earlier_parts(msg.headers, seq)
    if not earlier:
        return msg.data or b""
    parts = await asyncio.gather(*(js.get_msg(stream, seq=part, direct=True) for part in earlier))
    return b"".join([*(part.data or b"" for part in parts), msg.data or b""])


class HistoryParts:
    """Joins the parts of split values while a request's messages are read in order."""

    def __init__(self) -> None:
        self._waiting: dict[int, bytes] = {}

    def value(self, seq: int, headers: Mapping[str, str] | None, data: bytes) -> bytes | None:
        """The value a message completes (itself when it is whole), or ``None`` for a part
        that is not the last (kept until the last one comes)."""
        earlier = _earlier_parts(headers, seq)
        if earlier:
            try:
                return b"".join([*(self._waiting.pop(part) for part in earlier), data])
            except KeyError as exc:
                raise RecordError(
                    f"the message at sequence {seq} is the last part of a value whose part at "
                    f"sequence {exc.args[0]} is missing; restore the request with "
                    "`teams-runtime import`."
                ) from None
        if headers and HEADER_PART in headers:
            self._waiting[seq] = data
            return None
        return data
