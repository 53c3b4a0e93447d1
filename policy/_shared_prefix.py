"""The ``shared_prefix`` prompt layout: what every role of a request shares first, the role's
own part after it (docs/compaction.md, "The layout").

First the preamble (it names no role), then the request's fields that no hop changes, its
events last among them (in record order: a new hop's events are appended, so the prompt before
them stays as it was); then the fields a hop sets (``RecordUpdates``: ``result``,
``updated_at``, ``status``, ...), the notice, the role's header, rules and contract, and the
envelope less what the record already holds (its ``body``, ``scope``, ...: named, not repeated).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from teams_runtime.codecs.envelopes import MessageEnvelope
from teams_runtime.codecs.events import RecordUpdates
from teams_runtime.codecs.formats import JsonObject, pretty_json
from teams_runtime.codecs.projection_reply import Projection
from teams_runtime.codecs.request_records import (
    EVENTS_KEY,
    decode_any,
    encode_json,
    iter_pretty_record,
    pretty_frame_size,
)

__all__ = ["PER_HOP_FIELDS", "PREAMBLE", "SharedPrefix"]

PREAMBLE = """\
You are a role of a team inside teams_runtime, working on the request below. First comes the
request's record: the fields that stay as they are, then its events. After it come the fields
that change every hop, your role, its rules and the answer's shape, and why you were called."""

# The fields an append sets (a hop's outcome, a cancel, a retry): they change every hop, so
# they stand after the events. Every other field stays as the request was submitted.
PER_HOP_FIELDS = frozenset(RecordUpdates.__annotations__)

_STABLE = "\n\nCurrent request (the fields that stay the same, then the events):\n"
_PER_HOP = "\n\nCurrent request, continued (the fields that change every hop):\n"
_ENVELOPE = "\n\nIncoming envelope"


def _utf8_size(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-8"))


class SharedPrefix:
    """One prompt in the shared_prefix layout: its parts as text chunks, and their sizes."""

    def __init__(
        self, projection: Projection, head: str, notice: str, envelope: MessageEnvelope | None
    ) -> None:
        fields = projection.fields
        self.stable = {k: v for k, v in fields.items() if k not in PER_HOP_FIELDS}
        if EVENTS_KEY in self.stable:  # last: a new hop's events are appended to the prefix
            self.stable[EVENTS_KEY] = self.stable.pop(EVENTS_KEY)
        self.per_hop = {k: v for k, v in fields.items() if k in PER_HOP_FIELDS}
        self.head = head
        self.notice = notice
        self.envelope = envelope_text(projection, envelope)

    def iter_chunks(self) -> Iterator[str]:
        """The prompt text in order; joined, exactly the prompt."""
        yield PREAMBLE + _STABLE
        for chunk in iter_pretty_record(self.stable):
            yield chunk.decode("utf-8")
        if self.per_hop:
            yield _PER_HOP
            for chunk in iter_pretty_record(self.per_hop):
                yield chunk.decode("utf-8")
        if self.notice:
            yield "\n\n" + self.notice
        yield "\n\n" + self.head
        yield self.envelope
        yield "\n"

    def brief_text(self) -> str:
        """Everything but the record, the notice and the envelope: what a budget's brief is."""
        per_hop = _PER_HOP if self.per_hop else ""  # (the notice's "\n\n" is the notice's)
        return PREAMBLE + _STABLE + per_hop + "\n\n" + self.head + "\n"

    def record_frame_text(self) -> str:
        """The record's fields as laid out here, with an empty events array."""
        stable = dict(self.stable)
        if EVENTS_KEY in stable and bytes(stable[EVENTS_KEY][:1]) == b"[":
            stable[EVENTS_KEY] = b"[]"
        parts = [b"".join(iter_pretty_record(stable))]
        if self.per_hop:
            parts.append(b"".join(iter_pretty_record(self.per_hop)))
        return b"\n".join(parts).decode("utf-8")

    def sizes(self) -> tuple[int, int, int]:
        """The UTF-8 sizes of the brief, the record (but its events) and the envelope; with
        the notice's and the events' (``PromptSizes``) they add up to at least the prompt."""
        record = pretty_frame_size(self.stable)
        if self.per_hop:
            record += pretty_frame_size(self.per_hop)
        return _utf8_size(self.brief_text()), record, _utf8_size(self.envelope)


def envelope_text(projection: Projection, envelope: MessageEnvelope | None) -> str:
    """The envelope as this layout shows it: each field the record holds with the same value
    (its ``body``, ``scope``, ``request_id``, ...) named instead of repeated."""
    if envelope is None:
        return ""
    shown = envelope.prompt_view()
    view: JsonObject = {key: getattr(shown, key) for key in shown.__struct_fields__}
    same = [key for key, value in view.items() if _held(projection.fields, key, value)]
    kept = {key: value for key, value in view.items() if key not in same}
    named = f" ({', '.join(same)}: as in the request above)" if same else ""
    return f"{_ENVELOPE}{named}:\n{pretty_json(kept)}"


def _held(fields: Mapping[str, bytes], key: str, value: object) -> bool:
    """Whether the record holds ``value`` at ``key``: the same JSON (``1`` is not ``true``)."""
    raw = fields.get(key)
    return raw is not None and encode_json(decode_any(raw)) == encode_json(value)
