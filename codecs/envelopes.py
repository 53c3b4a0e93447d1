"""Structs that travel between roles and into prompts: the envelope and the compaction notice."""

from __future__ import annotations

import msgspec

from teams_runtime.codecs.formats import JsonObject

__all__ = ["CompactionNotice", "EnvelopeView", "MessageEnvelope"]


class MessageEnvelope(msgspec.Struct, frozen=True, kw_only=True):
    """A unit of work for one role (spec section 6)."""

    request_id: str
    sender: str
    target: str
    # Names this unit of work: its outcome is appended under it, so a second delivery of the
    # same envelope is recognised. The queue gives one to an envelope that has none.
    envelope_id: str = ""
    intent: str = ""
    urgency: str = "normal"
    scope: str = ""
    artifacts: list[str] = []
    params: JsonObject = {}  # the submitter's own: any JSON object
    body: str = ""
    # The W3C trace context (``traceparent``) of the span that queued this envelope, when
    # OpenTelemetry is on (``actors.telemetry``): a request's hops on any worker join one trace.
    # Never shown in a prompt.
    traceparent: str | None = None
    # The request's epoch this work was made for (``epoch`` in the record, absent: 0). A
    # cancel, a failure, a reopen and a retry advance it: work of an older epoch is recorded
    # as stale, never applied. None: queued before epochs existed, taken as the current one.
    # Never shown in a prompt.
    epoch: int | None = None

    def prompt_view(self) -> EnvelopeView:
        """What a prompt shows of the envelope."""
        return EnvelopeView(
            request_id=self.request_id,
            intent=self.intent,
            urgency=self.urgency,
            scope=self.scope,
            artifacts=self.artifacts,
            params=self.params,
            body=self.body,
        )


class EnvelopeView(msgspec.Struct, frozen=True, kw_only=True):
    """The fields of an envelope a prompt shows, in the order it shows them (spec section 6):
    not who sent it, nor its id or trace context."""

    request_id: str
    intent: str
    urgency: str
    scope: str
    artifacts: list[str]
    params: JsonObject
    body: str


class CompactionNotice(msgspec.Struct, frozen=True, kw_only=True):
    """What a compacted prompt says it left out (spec section 5); fields in the spec's order."""

    compacted: bool = True
    total_events: int
    included_events: int
    omitted_events: int
    recent_events: int
    max_events: int
    selection: str
    canonical_request: str
