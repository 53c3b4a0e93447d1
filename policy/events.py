"""Every event the runtime appends to a request's record, built here: their types, actors,
summaries and payloads (``codecs.events`` has their shapes and how they are written)."""

from __future__ import annotations

from teams_runtime.codecs.envelopes import MessageEnvelope
from teams_runtime.codecs.events import (
    AnswerOverdue,
    AnswerTimedOutEvent,
    CallFailure,
    CancelledEvent,
    CreatedEvent,
    DelegatedEvent,
    HandOff,
    HopLimitEvent,
    HopLimitReached,
    ModelFailedEvent,
    ReopenedEvent,
    Reopening,
    Requeued,
    RetriedEvent,
    RetryNotQueuedEvent,
    RoleReportEvent,
    Stale,
    StaleOutcomeEvent,
    VersionControlCompletedEvent,
    VersionControlRequestedEvent,
)
from teams_runtime.codecs.model import RoleResult

__all__ = [
    "answer_timed_out",
    "cancelled",
    "created",
    "handed_on",
    "hop_limit",
    "model_failed",
    "reopened",
    "report",
    "retried",
    "retry_not_queued",
    "stale_outcome",
]


def created(now: str, by: str) -> CreatedEvent:
    """A new request's first event, credited to ``by`` (``Cast.intake_actor``)."""
    return CreatedEvent(timestamp=now, actor=by, summary="request created")


def handed_on(
    now: str, by: str, to_role: str, *, commit: bool = False
) -> DelegatedEvent | VersionControlRequestedEvent:
    """``by`` handed the request to ``to_role``: a ``delegated`` event, or, to a role that
    commits (``commit``), a ``version_control_requested`` one."""
    summary = f"{by} handed the request to {to_role}"
    payload = HandOff(from_role=by, to_role=to_role)
    if commit:
        return VersionControlRequestedEvent(
            timestamp=now, actor=by, summary=summary, payload=payload
        )
    return DelegatedEvent(timestamp=now, actor=by, summary=summary, payload=payload)


def report(
    now: str, role: str, result: RoleResult, *, committed: bool = False
) -> RoleReportEvent | VersionControlCompletedEvent:
    """``role``'s result, whole: a ``role_report``, or from a role that commits
    (``committed``) a ``version_control_completed``."""
    if committed:
        return VersionControlCompletedEvent(
            timestamp=now, actor=role, summary=result.summary, payload=result
        )
    return RoleReportEvent(timestamp=now, actor=role, summary=result.summary, payload=result)


def hop_limit(now: str, role: str, to_role: str, *, hops: int, max_hops: int) -> HopLimitEvent:
    """The request stops: ``role``'s hand-off to ``to_role`` would pass ``max_hops``."""
    return HopLimitEvent(
        timestamp=now,
        actor=role,
        summary=f"stopped: the request was handed between roles {hops} times "
        f"(team.max_hops is {max_hops})",
        payload=HopLimitReached(hops=hops, max_hops=max_hops, from_role=role, to_role=to_role),
    )


def cancelled(now: str, actor: str = "user") -> CancelledEvent:
    """The request was cancelled (``teams-runtime cancel``)."""
    return CancelledEvent(timestamp=now, actor=actor, summary="the request was cancelled")


def model_failed(now: str, role: str, reason: str, cause: str = "") -> ModelFailedEvent:
    """``role``'s model failed (``reason`` is content-free; ``cause``: ``CallFailure``'s)."""
    return ModelFailedEvent(
        timestamp=now,
        actor=role,
        summary=f"the model failed for the {role} role",
        payload=CallFailure(from_role=role, reason=reason, cause=cause),
    )


def answer_timed_out(now: str, role: str, within: float) -> AnswerTimedOutEvent:
    """The person of ``role`` gave no reply within ``within`` seconds."""
    return AnswerTimedOutEvent(
        timestamp=now,
        actor=role,
        summary=f"no answer came for the {role} role within {within:g} s",
        payload=AnswerOverdue(from_role=role, answer_within_seconds=within),
    )


def reopened(now: str, status: str) -> ReopenedEvent:
    """More work reopened a request that was ``status``."""
    return ReopenedEvent(
        timestamp=now,
        actor="user",
        summary=f"the request was reopened (it was {status})",
        payload=Reopening(from_status=status),
    )


def retried(now: str, envelope: MessageEnvelope, old_id: str) -> RetriedEvent:
    """A failed step queued again as ``envelope``, in place of the envelope ``old_id``."""
    return RetriedEvent(
        timestamp=now,
        actor="user",
        summary=f"the {envelope.target} step was queued again",
        payload=Requeued(
            role=envelope.target,
            envelope_id=envelope.envelope_id,
            retries_envelope=old_id,
            envelope=envelope,
        ),
    )


def retry_not_queued(now: str, role: str) -> RetryNotQueuedEvent:
    """A retry of ``role``'s step could not queue its envelope: the request is failed again."""
    return RetryNotQueuedEvent(
        timestamp=now,
        actor="user",
        summary=f"the {role} step could not be queued; the request is failed again",
    )


def stale_outcome(
    now: str, role: str, envelope: MessageEnvelope, epoch: int, current_epoch: int
) -> StaleOutcomeEvent:
    """``role``'s outcome of ``envelope``, made for ``epoch``, came back when the request was at
    ``current_epoch``: recorded, not applied."""
    return StaleOutcomeEvent(
        timestamp=now,
        actor=role,
        summary=f"the {role} outcome of an earlier epoch ({epoch}) was not applied",
        payload=Stale(envelope_id=envelope.envelope_id, epoch=epoch, current_epoch=current_epoch),
    )
