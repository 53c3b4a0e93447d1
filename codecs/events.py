"""What the runtime writes into a request's record: its events, one tagged union (``Event``) of a
frozen Struct per event type, and the top-level fields it sets with them (``RecordUpdates``).

A typed event is written in the spec's key order (section 2: ``timestamp``, ``type``,
``actor``, ``summary``, then ``payload``, only when there is one), not msgspec's tag-first
order: ``event_json`` lays it out, where it is written. Only what the runtime writes is typed:
a record's ``events`` may hold anything (strings, legacy ``event_type``, objects missing
fields), and reading keeps them as undecoded ``msgspec.Raw`` (``request_records``,
``evidence``). ``policy.events`` builds every event the runtime appends.
"""

from __future__ import annotations

from typing import Any, Literal, TypedDict

import msgspec

from teams_runtime.codecs.envelopes import MessageEnvelope
from teams_runtime.codecs.formats import JsonObject
from teams_runtime.codecs.model import RoleResult, result_json
from teams_runtime.codecs.statuses import RequestStatus

__all__ = [
    "PROMPT_TOO_LARGE",
    "AnswerOverdue",
    "AnswerTimedOutEvent",
    "CallFailure",
    "CancelledEvent",
    "CommitRequest",
    "CreatedEvent",
    "DelegatedEvent",
    "Event",
    "HandOff",
    "HopLimitEvent",
    "HopLimitReached",
    "ModelFailedEvent",
    "RecordUpdates",
    "ReopenedEvent",
    "Reopening",
    "Requeued",
    "RetriedEvent",
    "RetryNotQueuedEvent",
    "RoleReportEvent",
    "Stale",
    "StaleOutcomeEvent",
    "VersionControlCompletedEvent",
    "VersionControlRequestedEvent",
    "event_json",
    "event_type",
    "kept_envelope",
    "updates_json",
]


# --- payloads -----------------------------------------------------------------------------


class HandOff(msgspec.Struct, frozen=True, kw_only=True):
    """Who handed the request to whom."""

    from_role: str
    to_role: str


class HopLimitReached(msgspec.Struct, frozen=True, kw_only=True):
    """A hand-off one past ``team.max_hops``: how many there were, and the one refused."""

    hops: int
    max_hops: int
    from_role: str
    to_role: str


# ``CallFailure.cause`` of a prompt that cannot fit its budget or its model's window.
PROMPT_TOO_LARGE = "prompt_too_large"


class CallFailure(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """Whose model failed, and why (content-free); ``cause`` names a failure no retry mends
    as it stands (``prompt_too_large``: the prompt cannot fit; absent for any other)."""

    from_role: str
    reason: str
    cause: str = ""


class AnswerOverdue(msgspec.Struct, frozen=True, kw_only=True):
    """Whose person gave no reply, within how long (``answer_within``)."""

    from_role: str
    answer_within_seconds: float


class Reopening(msgspec.Struct, frozen=True, kw_only=True):
    """The status a request had when more work reopened it."""

    from_status: str


class Stale(msgspec.Struct, frozen=True, kw_only=True):
    """Work of an older epoch of the request: its envelope, the epoch it was made for, and the
    request's epoch when it came back (no ``role`` and ``status``: never role evidence)."""

    envelope_id: str
    epoch: int
    current_epoch: int


class Requeued(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A failed step queued again: for which role, its new envelope (its id, and the envelope
    whole, so a retry stopped before its queue put can put it later), the one it retries."""

    role: str
    envelope_id: str
    retries_envelope: str
    envelope: MessageEnvelope | None = None


# --- events -------------------------------------------------------------------------------


class _Event(msgspec.Struct, frozen=True, kw_only=True, tag_field="type"):
    """What every event has; its ``type`` is its class's tag."""

    timestamp: str  # ISO-8601 with offset
    actor: str
    summary: str


class CreatedEvent(_Event, frozen=True, kw_only=True, tag="created"):
    """The request's record was made (``submit``)."""


class DelegatedEvent(_Event, frozen=True, kw_only=True, tag="delegated"):
    """Work handed to a role: by ``submit``, or by a role's result naming its ``next_role``."""

    payload: HandOff


class VersionControlRequestedEvent(
    _Event, frozen=True, kw_only=True, tag="version_control_requested"
):
    """A hand-off to a role that commits (``prompt_kind: version_control``)."""

    payload: HandOff


class RoleReportEvent(_Event, frozen=True, kw_only=True, tag="role_report"):
    """A role's result, whole (a model's, a person's, or the contract failure)."""

    payload: RoleResult


class VersionControlCompletedEvent(
    _Event, frozen=True, kw_only=True, tag="version_control_completed"
):
    """The result of a role that commits, whole."""

    payload: RoleResult


class HopLimitEvent(_Event, frozen=True, kw_only=True, tag="hop_limit"):
    """The request failed: a hand-off would pass ``team.max_hops``."""

    payload: HopLimitReached


class CancelledEvent(_Event, frozen=True, kw_only=True, tag="cancelled"):
    """The request was cancelled (``teams-runtime cancel``)."""


class ModelFailedEvent(_Event, frozen=True, kw_only=True, tag="model_failed"):
    """Every call of a role's model failed: the request failed."""

    payload: CallFailure


class AnswerTimedOutEvent(_Event, frozen=True, kw_only=True, tag="answer_timed_out"):
    """A person's role gave no reply within ``answer_within``: the request failed."""

    payload: AnswerOverdue


class ReopenedEvent(_Event, frozen=True, kw_only=True, tag="reopened"):
    """More work reopened a finished request (``submit --reopen``)."""

    payload: Reopening


class RetriedEvent(_Event, frozen=True, kw_only=True, tag="retried"):
    """A failed request's last step was queued again (``teams-runtime retry``)."""

    payload: Requeued


class RetryNotQueuedEvent(_Event, frozen=True, kw_only=True, tag="retry_not_queued"):
    """A retry's envelope could not be queued: the request is failed again."""


class StaleOutcomeEvent(_Event, frozen=True, kw_only=True, tag="stale_outcome"):
    """A role's outcome came back for an older epoch of the request (it was cancelled, failed,
    reopened or retried meanwhile): recorded, content-free, and not applied."""

    payload: Stale


Event = (
    CreatedEvent
    | DelegatedEvent
    | VersionControlRequestedEvent
    | RoleReportEvent
    | VersionControlCompletedEvent
    | HopLimitEvent
    | CancelledEvent
    | ModelFailedEvent
    | AnswerTimedOutEvent
    | ReopenedEvent
    | RetriedEvent
    | RetryNotQueuedEvent
    | StaleOutcomeEvent
)


def event_type(event: Event) -> str:
    """The ``type`` ``event`` is written with (its class's tag)."""
    return str(type(event).__struct_config__.tag)


def event_json(event: Event) -> JsonObject:
    """``event`` as its record holds it: the spec's key order, a payload only when it has one
    (a role result as its answer laid it out, ``result_json``)."""
    written: JsonObject = {
        "timestamp": event.timestamp,
        "type": event_type(event),
        "actor": event.actor,
        "summary": event.summary,
    }
    payload = getattr(event, "payload", None)
    if isinstance(payload, RoleResult):
        written["payload"] = result_json(payload)
    elif payload is not None:
        written["payload"] = _payload_json(payload)
    return written


def _payload_json(payload: msgspec.Struct) -> JsonObject:
    """A payload's fields, less those at their default where its struct omits defaults (as
    encoding it would): a field added with a default leaves older events' bytes as they were."""
    written = msgspec.structs.asdict(payload)
    if payload.__struct_config__.omit_defaults:
        for field in msgspec.structs.fields(payload):
            if field.default is not msgspec.NODEFAULT and written[field.name] == field.default:
                del written[field.name]
    return written


# --- the fields set with them ---------------------------------------------------------------


class CommitRequest(msgspec.Struct, frozen=True, kw_only=True):
    """What a hand-off to a role that commits asks it to commit (``version_control``)."""

    mode: Literal["commit"] = "commit"
    scope: str
    summary: str
    paths: list[Any]  # the handing role's artifacts, as its result gave them
    requested_by: str


class RecordUpdates(TypedDict, total=False):
    """The top-level fields an append sets, in the order it sets them (a field the record
    lacks is added in this order)."""

    result: RoleResult  # the latest role result
    updated_at: str
    status: RequestStatus
    current_role: str
    next_role: str
    hops: int
    version_control: CommitRequest
    # The envelope of the step that failed, for `teams-runtime retry`; null once it is spent.
    failed_envelope: MessageEnvelope | None
    # Advanced by a cancel, a failure, a reopen and a retry; absent until it moves past 0.
    epoch: int


def kept_envelope(envelope: MessageEnvelope) -> JsonObject:
    """``envelope`` as a record keeps it (``failed_envelope``): every field but the trace
    context, which belongs to the run that queued it, and the epoch (a retry makes its own)."""
    kept: JsonObject = msgspec.to_builtins(envelope)
    kept.pop("traceparent", None)
    kept.pop("epoch", None)
    return kept


def updates_json(updates: RecordUpdates) -> JsonObject:
    """``updates`` as the record holds them: the result as its answer laid it out, the failed
    envelope without its trace context."""
    fields: JsonObject = dict(updates)
    if "result" in updates:
        fields["result"] = result_json(updates["result"])
    if "version_control" in updates:
        fields["version_control"] = msgspec.structs.asdict(updates["version_control"])
    envelope = updates.get("failed_envelope")
    if envelope is not None:
        fields["failed_envelope"] = kept_envelope(envelope)
    return fields
