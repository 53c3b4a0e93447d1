"""What a role's outcome writes: a pure plan (events, field updates, the next envelope).

The role actor persists the plan in one append and then queues the follow-up envelope; keeping
the plan pure keeps routing rules testable without a model, a store or a clock.

A plan is decided from the request's state (``RequestState``: its ``hops`` and ``status``), and
written only if the record still holds that state (a compare-and-set): several workers on one
request each decide from what the write replaces, so ``hops`` never counts a hand-off twice,
the hop limit fails the request once, and a request that ended meanwhile gets only the report.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, Literal, TypedDict

import msgspec

from teams_runtime.codecs.config import DEFAULT_CAST, Cast
from teams_runtime.codecs.envelopes import MessageEnvelope
from teams_runtime.codecs.events import (
    CommitRequest,
    Event,
    RecordUpdates,
    event_json,
    updates_json,
)
from teams_runtime.codecs.formats import JsonObject
from teams_runtime.codecs.model import ContractFailure, ResearchDecision, RoleResult
from teams_runtime.codecs.projection_reply import Projection
from teams_runtime.codecs.statuses import ENDED, EndedStatus, ended_status
from teams_runtime.policy import events
from teams_runtime.policy.deliverables import keep_output

__all__ = [
    "FAILED_ENVELOPE",
    "MAX_REPAIRS",
    "OutcomePlan",
    "RequestState",
    "StateFields",
    "as_ended",
    "contract_failure",
    "follow_up_id",
    "hops_of",
    "in_epoch",
    "plan_cancel",
    "plan_for",
    "plan_model_failure",
    "plan_no_answer",
    "plan_outcome",
    "recorded_follow_up",
    "research_result",
    "state_of",
    "status_of",
]

MAX_REPAIRS = 2
# The top-level field a failing outcome keeps its envelope in, for `teams-runtime retry`.
FAILED_ENVELOPE: Final = "failed_envelope"


class StateFields(TypedDict):
    """The fields an outcome is decided from, as the record held them (any JSON value)."""

    hops: Any
    status: Any
    epoch: Any


class RequestState(msgspec.Struct, frozen=True, kw_only=True):
    """What an outcome is decided from: the record's ``hops``, ``status`` and ``epoch`` as read
    (any JSON value; ``None``: absent). The write that carries the decision expects them
    unchanged."""

    hops: Any = None
    status: Any = None
    epoch: Any = None

    @classmethod
    def of(cls, fields: Mapping[str, Any]) -> RequestState:
        """The state in decoded top-level fields (a projection's values, a refusal's fields)."""
        return cls(hops=fields.get("hops"), status=fields.get("status"), epoch=fields.get("epoch"))

    @property
    def epoch_number(self) -> int:
        """The request's epoch: 0 while the record has none (or none that is a count)."""
        epoch = self.epoch
        return epoch if type(epoch) is int and epoch >= 0 else 0

    def is_stale(self, envelope: MessageEnvelope) -> bool:
        """Whether ``envelope`` was made for an older epoch than this (one queued before
        epochs existed counts as made for the current one)."""
        return envelope.epoch is not None and envelope.epoch != self.epoch_number

    @property
    def count(self) -> int:
        """How many hand-offs the record counts (0 if ``hops`` is no valid count)."""
        hops = self.hops
        return hops if type(hops) is int and hops >= 0 else 0

    @property
    def ended(self) -> EndedStatus | Literal[""]:
        """The status if the request has ended (``ENDED``: cancelled or failed), else ``""``."""
        return ended_status(self.status) or ""

    def expected(self) -> StateFields:
        """What the write expects the record to hold (``RecordStore.append(expect=...)``)."""
        return StateFields(hops=self.hops, status=self.status, epoch=self.epoch)


class OutcomePlan(msgspec.Struct, frozen=True, kw_only=True):
    """One write to the record, the envelope to queue after it (if any), and whether the
    request's other queued envelopes are dropped (it ended: hop limit)."""

    events: list[Event]
    updates: RecordUpdates
    follow_up: MessageEnvelope | None = None
    drop_queued: bool = False

    def events_json(self) -> list[JsonObject]:
        """The events as the record holds them (``codecs.events.event_json``)."""
        return [event_json(event) for event in self.events]

    def updates_json(self) -> JsonObject:
        """The field updates as the record holds them (``codecs.events.updates_json``)."""
        return updates_json(self.updates)


def follow_up_id(envelope_id: str, next_role: str) -> str:
    """The id of the envelope an outcome queues: the same on every delivery of its parent, so a
    duplicate of it is recognised like its parent was."""
    import hashlib  # here, not at the top: `status` reads outcomes' state, never makes ids

    digest = hashlib.blake2b(f"{envelope_id}>{next_role}".encode(), digest_size=10).hexdigest()
    return f"env-{digest}"


def contract_failure(request_id: str, role: str, issues: list[str]) -> ContractFailure:
    """The result recorded when every repair of a role's answer was rejected."""
    return ContractFailure(
        request_id=request_id,
        role=role,
        status="failed",
        summary=f"The {role} result was rejected by contract validation "
        f"after {MAX_REPAIRS} repair attempts.",
        error="contract_validation_failed",
        contract_issues=issues,
    )


def research_result(role: str, decision: ResearchDecision) -> RoleResult:
    """The role result a research-gate decision is recorded as."""
    kept = {
        "needed": decision.needed,
        "subject": decision.subject,
        "research_query": decision.research_query,
        "reason_code": decision.reason_code,
    }
    return RoleResult(
        request_id=decision.request_id,
        role=role,
        status="completed",
        summary=decision.summary or f"Research gate: {decision.reason_code}.",
        proposals={"research_decision": kept},
        next_role=decision.next_role,
    )


def _hand_off(
    role: str, envelope: MessageEnvelope, result: RoleResult, now: str, hops: int, cast: Cast
) -> OutcomePlan:
    next_role = result.next_role
    commit = cast.is_version_control(next_role)  # the version controller, or a role like it
    updates = RecordUpdates(
        result=result,
        updated_at=now,
        status="in_progress",
        current_role=next_role,
        next_role=next_role,
        hops=hops + 1,
    )
    if commit:
        updates["version_control"] = CommitRequest(
            scope=envelope.scope, summary=result.summary, paths=result.artifacts, requested_by=role
        )
    return OutcomePlan(
        events=[
            _report(role, result, now, cast),
            events.handed_on(now, role, next_role, commit=commit),
        ],
        updates=updates,
        follow_up=_follow_up(role, envelope, next_role, result.summary, result.artifacts),
    )


def _follow_up(
    role: str, envelope: MessageEnvelope, next_role: str, summary: str, artifacts: list[Any]
) -> MessageEnvelope:
    """The envelope ``role``'s outcome of ``envelope`` queues for ``next_role``."""
    return MessageEnvelope(
        request_id=envelope.request_id,
        sender=role,
        target=next_role,
        envelope_id=follow_up_id(envelope.envelope_id, next_role),
        intent=envelope.intent,
        urgency=envelope.urgency,
        scope=envelope.scope,
        artifacts=[str(item) for item in artifacts],
        params=envelope.params,
        body=summary,
    )


def _report(role: str, result: RoleResult, now: str, cast: Cast) -> Event:
    return events.report(now, role, result, committed=cast.is_version_control(role))


def plan_outcome(
    role: str,
    envelope: MessageEnvelope,
    result: RoleResult,
    now: str,
    *,
    hops: int = 0,
    max_hops: int = 40,
    cast: Cast = DEFAULT_CAST,
    carried: Any = None,
) -> OutcomePlan:
    """The role's report event plus ``result``/``status``/``current_role``; a ``next_role``
    adds a hand-off event and the envelope for that role. The record's ``result`` keeps
    ``carried`` (the deliverable it held) when ``result`` gives no ``output`` of its own.

    ``hops`` is how many hand-offs the request has had: one more than ``max_hops`` fails it
    with a ``hop_limit`` event instead. (A request that ended meanwhile: ``plan_for``.)
    ``cast`` (the team) says which roles commit: a hand-off to one asks for a commit, and its
    report is a ``version_control_completed`` event.
    """
    if result.next_role and hops + 1 > max_hops:
        plan = _hop_limit(role, envelope, result, now, hops, max_hops, cast)
    elif result.next_role:
        plan = _hand_off(role, envelope, result, now, hops, cast)
    else:
        updates = RecordUpdates(
            result=result,
            updated_at=now,
            status=result.status,  # the request ends as its last role's result did
            current_role=role,
            next_role="",
        )
        if result.status == "failed":  # kept for `retry`: this step is what it asks again
            updates[FAILED_ENVELOPE] = envelope
        plan = OutcomePlan(events=[_report(role, result, now, cast)], updates=updates)
    plan.updates["result"] = keep_output(result, carried)  # the report keeps the answer as given
    return plan


def _hop_limit(
    role: str,
    envelope: MessageEnvelope,
    result: RoleResult,
    now: str,
    hops: int,
    max_hops: int,
    cast: Cast,
) -> OutcomePlan:
    stop = events.hop_limit(now, role, result.next_role, hops=hops, max_hops=max_hops)
    updates = RecordUpdates(
        result=result,
        updated_at=now,
        status="failed",
        current_role=role,
        next_role="",
        failed_envelope=envelope,
    )
    report = _report(role, result, now, cast)
    return OutcomePlan(events=[report, stop], updates=updates, drop_queued=True)


def as_ended(plan: OutcomePlan) -> OutcomePlan:
    """``plan`` for a request that ended meanwhile (cancelled, or failed by another worker's
    outcome): its first event (the report, or the model failure) and the result, the status
    left as it is, nothing handed on, nothing counted."""
    keep = RecordUpdates()
    if "result" in plan.updates:
        keep["result"] = plan.updates["result"]
    if "updated_at" in plan.updates:
        keep["updated_at"] = plan.updates["updated_at"]
    return OutcomePlan(events=plan.events[:1], updates=keep)


def plan_for(state: RequestState, plan: OutcomePlan, envelope: MessageEnvelope) -> OutcomePlan:
    """``plan`` (an outcome of ``envelope``) as a request in ``state`` takes it.

    - Work of an older epoch (``envelope.epoch``): only a content-free ``stale_outcome``
      event, nothing handed on, queued or changed.
    - A request that ended meanwhile: only its report.
    - Else the plan, its follow-up made for this epoch, and a request that it ends failed
      moves to the next epoch (whatever was still under way for it is stale from then on).
    """
    if state.is_stale(envelope):  # is_stale: envelope.epoch is a number
        now = plan.events[0].timestamp if plan.events else plan.updates.get("updated_at", "")
        stale = events.stale_outcome(
            now, envelope.target, envelope, envelope.epoch or 0, state.epoch_number
        )
        return OutcomePlan(events=[stale], updates=RecordUpdates())
    if state.ended:
        return as_ended(plan)
    return in_epoch(state, plan)


def in_epoch(state: RequestState, plan: OutcomePlan) -> OutcomePlan:
    """``plan`` written in ``state``'s epoch: its follow-up carries it, and a plan that ends
    the request ``failed`` or ``cancelled`` moves it to the next one."""
    updates = plan.updates
    if updates.get("status") in ENDED:
        updates = RecordUpdates(**updates, epoch=state.epoch_number + 1)
    follow_up = plan.follow_up
    if follow_up is not None:
        follow_up = msgspec.structs.replace(follow_up, epoch=state.epoch_number)
    return msgspec.structs.replace(plan, updates=updates, follow_up=follow_up)


def plan_cancel(now: str, actor: str = "user") -> OutcomePlan:
    """What ``teams-runtime cancel`` writes: a ``cancelled`` event and the status."""
    updates = RecordUpdates(status="cancelled", next_role="", updated_at=now)
    return OutcomePlan(events=[events.cancelled(now, actor)], updates=updates, drop_queued=True)


def plan_model_failure(
    role: str, reason: str, now: str, envelope: MessageEnvelope | None = None, cause: str = ""
) -> OutcomePlan:
    """A ``model_failed`` event and ``status: failed`` (``reason`` is content-free, ``cause``
    as ``CallFailure`` says), and the ``envelope`` whose call failed, for ``retry``
    (``FAILED_ENVELOPE``)."""
    return _failed_with(events.model_failed(now, role, reason, cause), role, now, envelope)


def plan_no_answer(
    role: str, within: float, now: str, envelope: MessageEnvelope | None = None
) -> OutcomePlan:
    """An ``answer_timed_out`` event and ``status: failed``: the person of ``role`` gave no
    answer within ``within`` seconds (``answer_within``, with ``on_failure: fail``); the
    ``envelope`` that waited is kept for ``retry`` (``FAILED_ENVELOPE``), as a model's is."""
    return _failed_with(events.answer_timed_out(now, role, within), role, now, envelope)


def _failed_with(
    event: Event, role: str, now: str, envelope: MessageEnvelope | None
) -> OutcomePlan:
    """``event`` and ``status: failed`` at ``role``, keeping ``envelope`` (if any) for
    ``retry`` (``FAILED_ENVELOPE``)."""
    updates = RecordUpdates(status="failed", current_role=role, updated_at=now)
    if envelope is not None:
        updates[FAILED_ENVELOPE] = envelope
    return OutcomePlan(events=[event], updates=updates)


def status_of(projection: Projection) -> str:
    """The record's ``status`` (``""`` if it has none that is a string)."""
    status = projection.value("status")
    return status if isinstance(status, str) else ""


def hops_of(projection: Projection) -> int:
    """How many hand-offs the record counts (``hops``; 0 if it has no valid count)."""
    return state_of(projection).count


def state_of(projection: Projection) -> RequestState:
    """The state an outcome is decided from, as ``projection`` shows it."""
    return RequestState(
        hops=projection.value("hops"),
        status=projection.value("status"),
        epoch=projection.value("epoch"),
    )


_HAND_OFFS = ("delegated", "version_control_requested")


def recorded_follow_up(
    role: str,
    envelope: MessageEnvelope,
    recorded: list[JsonObject],
    cast: Cast = DEFAULT_CAST,
) -> MessageEnvelope | None:
    """The envelope a recorded outcome handed on, rebuilt (with the same id) from its events
    (``None`` if it handed on nothing, or to a role ``cast`` no longer has)."""
    if not any(isinstance(e, dict) and e.get("type") in _HAND_OFFS for e in recorded):
        return None
    report = next((e for e in recorded if isinstance(e.get("payload"), dict)), None)
    if report is None:
        return None
    result = report["payload"]
    next_role, summary = result.get("next_role"), result.get("summary")
    if not isinstance(next_role, str) or not isinstance(summary, str) or not next_role:
        return None
    if next_role not in cast.roles:
        return None
    return _follow_up(role, envelope, next_role, summary, result.get("artifacts", []))
