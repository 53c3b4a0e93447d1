"""What a role's outcome writes, as pure plans: reports, hand-offs, failures, research gates."""

from __future__ import annotations

import json
from typing import Any

import pytest

from teams_runtime.codecs.envelopes import MessageEnvelope
from teams_runtime.codecs.events import kept_envelope
from teams_runtime.codecs.model import ResearchDecision, RoleResult, result_json
from teams_runtime.codecs.model._contract import validate_reply
from teams_runtime.policy.outcomes import (
    MAX_REPAIRS,
    RequestState,
    as_ended,
    contract_failure,
    follow_up_id,
    plan_for,
    plan_model_failure,
    plan_no_answer,
    plan_outcome,
    research_result,
)

NOW = "2026-11-30T09:00:00+01:00"
ENVELOPE = MessageEnvelope(
    request_id="req-1",
    sender="planner",
    target="developer",
    intent="implement",
    urgency="high",
    scope="Add CSV export",
    artifacts=["plan.md"],
    params={"sprint": 3},
    body="go",
)


def _result(role: str = "developer", **changes: Any) -> RoleResult:
    answer = {"request_id": "req-1", "role": role, "status": "completed", "summary": "did it"}
    text = json.dumps(answer | changes)
    kind = "version_control" if role == "version_controller" else "task"
    checked = validate_reply(text, kind=kind, request_id="req-1", role=role)
    assert checked.issues == [] and isinstance(checked.answer, RoleResult)
    return checked.answer


@pytest.mark.parametrize("status", ["completed", "blocked", "failed"])
def test_a_result_without_next_role_finishes_the_request(status: str) -> None:
    result = _result("qa", status=status)
    plan = plan_outcome("qa", ENVELOPE, result, NOW)
    assert plan.events_json() == [
        {
            "timestamp": NOW,
            "type": "role_report",
            "actor": "qa",
            "summary": "did it",
            "payload": result_json(result),
        }
    ]
    kept = {"failed_envelope": kept_envelope(ENVELOPE)} if status == "failed" else {}
    assert plan.updates_json() == {
        "result": result_json(result),
        "updated_at": NOW,
        "status": status,
        "current_role": "qa",
        "next_role": "",
        **kept,  # a failed step keeps its envelope, for `retry`
    }
    assert plan.follow_up is None


def test_the_version_controller_reports_a_completed_commit() -> None:
    result = _result("version_controller", commit_status="committed", commit_sha="abc")
    (report,) = plan_outcome("version_controller", ENVELOPE, result, NOW).events_json()
    assert report["type"] == "version_control_completed"
    assert report["payload"]["commit_sha"] == "abc"


def test_a_next_role_hands_the_request_over() -> None:
    result = _result(next_role="qa", artifacts=["src/export.py", 7])
    plan = plan_outcome("developer", ENVELOPE, result, NOW, hops=2)
    report, hand_off = plan.events_json()
    assert (report["type"], report["payload"]) == ("role_report", result_json(result))
    assert hand_off == {
        "timestamp": NOW,
        "type": "delegated",
        "actor": "developer",
        "summary": "developer handed the request to qa",
        "payload": {"from_role": "developer", "to_role": "qa"},
    }
    assert plan.updates_json() == {
        "result": result_json(result),
        "updated_at": NOW,
        "status": "in_progress",
        "current_role": "qa",
        "next_role": "qa",
        "hops": 3,
    }
    assert plan.follow_up == MessageEnvelope(
        request_id="req-1",
        sender="developer",
        target="qa",
        envelope_id=follow_up_id(ENVELOPE.envelope_id, "qa"),
        intent="implement",
        urgency="high",
        scope="Add CSV export",
        artifacts=["src/export.py", "7"],
        params={"sprint": 3},
        body="did it",
    )


def test_a_hand_off_to_the_version_controller_says_what_to_commit() -> None:
    result = _result(next_role="version_controller", artifacts=["src/export.py"])
    plan = plan_outcome("developer", ENVELOPE, result, NOW)
    assert plan.events_json()[1]["type"] == "version_control_requested"
    assert plan.updates_json()["version_control"] == {
        "mode": "commit",
        "scope": "Add CSV export",
        "summary": "did it",
        "paths": ["src/export.py"],
        "requested_by": "developer",
    }
    assert plan.follow_up is not None and plan.follow_up.target == "version_controller"


def test_a_failed_result_that_names_a_next_role_is_still_handed_over() -> None:
    plan = plan_outcome("qa", ENVELOPE, _result("qa", status="failed", next_role="developer"), NOW)
    assert plan.updates_json()["status"] == "in_progress"
    assert plan.follow_up is not None and plan.follow_up.target == "developer"


def test_a_model_failure_fails_the_request_with_its_reason() -> None:
    plan = plan_model_failure("qa", "the model printed nothing", NOW)
    assert plan.events_json() == [
        {
            "timestamp": NOW,
            "type": "model_failed",
            "actor": "qa",
            "summary": "the model failed for the qa role",
            "payload": {"from_role": "qa", "reason": "the model printed nothing"},
        }
    ]
    assert plan.updates_json() == {"status": "failed", "current_role": "qa", "updated_at": NOW}
    assert plan.follow_up is None
    with_envelope = plan_model_failure("qa", "the model printed nothing", NOW, ENVELOPE)
    assert with_envelope.updates_json()["failed_envelope"] == kept_envelope(ENVELOPE)
    assert "traceparent" not in kept_envelope(ENVELOPE)  # the trace is the queuing run's


def test_a_person_who_did_not_answer_in_time_fails_the_request_retryably() -> None:
    plan = plan_no_answer("qa", 3600.0, NOW, ENVELOPE)
    assert [event["type"] for event in plan.events_json()] == ["answer_timed_out"]
    assert plan.events_json()[0]["payload"] == {"from_role": "qa", "answer_within_seconds": 3600.0}
    assert plan.updates_json() == {"status": "failed", "current_role": "qa", "updated_at": NOW,
                            "failed_envelope": kept_envelope(ENVELOPE)}  # fmt: skip
    assert plan.follow_up is None


def test_a_contract_failure_is_a_failed_result_with_the_issues() -> None:
    issues = ["`summary` is missing or empty.", "`status` must be one of: ..."]
    failure = contract_failure("req-1", "qa", issues)
    assert failure.status == "failed"
    assert failure.error == "contract_validation_failed"
    assert failure.contract_issues == issues
    assert failure.summary == (
        f"The qa result was rejected by contract validation after {MAX_REPAIRS} repair attempts."
    )
    assert (failure.request_id, failure.role, failure.next_role) == ("req-1", "qa", "")
    # It is a result like any other: it meets the task contract, and it finishes the request.
    text = json.dumps(result_json(failure))
    assert validate_reply(text, kind="task", request_id="req-1", role="qa").issues == []
    assert plan_outcome("qa", ENVELOPE, failure, NOW).updates_json()["status"] == "failed"


@pytest.mark.parametrize(
    ("summary", "expected"),
    [
        pytest.param("Local notes cover it.", "Local notes cover it.", id="own-summary"),
        pytest.param("", "Research gate: local_context_sufficient.", id="no-summary"),
    ],
)
def test_a_research_decision_is_recorded_as_a_role_result(summary: str, expected: str) -> None:
    decision = ResearchDecision(
        request_id="req-1",
        role="research",
        needed=True,
        subject="CSV dialects",
        research_query="excel csv quoting",
        reason_code="local_context_sufficient",
        summary=summary,
        next_role="planner",
    )
    result = research_result("research", decision)
    assert result.status == "completed"
    assert result.summary == expected
    assert result.next_role == "planner"
    assert result.proposals == {
        "research_decision": {
            "needed": True,
            "subject": "CSV dialects",
            "research_query": "excel csv quoting",
            "reason_code": "local_context_sufficient",
        }
    }
    text = json.dumps(result_json(result))
    assert validate_reply(text, kind="task", request_id="req-1", role="research").issues == []


def test_one_hand_off_past_max_hops_fails_the_request_and_drops_its_work() -> None:
    result = _result(next_role="qa")
    assert plan_outcome("developer", ENVELOPE, result, NOW, hops=2, max_hops=3).follow_up
    plan = plan_outcome("developer", ENVELOPE, result, NOW, hops=3, max_hops=3)
    report, stop = plan.events_json()
    assert report["type"] == "role_report" and stop["type"] == "hop_limit"
    assert stop["payload"] == {"hops": 3, "max_hops": 3, "from_role": "developer", "to_role": "qa"}
    assert "team.max_hops is 3" in stop["summary"]
    assert plan.updates_json()["status"] == "failed" and plan.follow_up is None and plan.drop_queued
    assert plan.updates_json()["failed_envelope"]["envelope_id"] == ENVELOPE.envelope_id


def test_a_cancelled_request_records_the_report_and_nothing_else() -> None:
    result = _result(next_role="qa")
    plan = as_ended(plan_outcome("developer", ENVELOPE, result, NOW))
    (report,) = plan.events_json()
    assert report["type"] == "role_report"
    assert plan.updates_json() == {"result": result_json(result), "updated_at": NOW}
    assert plan.follow_up is None


@pytest.mark.parametrize("status", ["cancelled", "failed"])
def test_a_request_that_ended_meanwhile_gets_only_the_report(status: str) -> None:
    state = RequestState(hops=7, status=status)
    assert state.ended == status
    result = _result(next_role="qa")
    plan = plan_for(
        state, plan_outcome("developer", ENVELOPE, result, NOW, hops=state.count), ENVELOPE
    )
    assert [event["type"] for event in plan.events_json()] == ["role_report"]
    assert plan.updates_json() == {
        "result": result_json(result),
        "updated_at": NOW,
    }  # untouched: hops
    assert (plan.follow_up, plan.drop_queued) == (None, False)
    failure = plan_for(state, plan_model_failure("developer", "exit 1", NOW), ENVELOPE)
    assert [event["type"] for event in failure.events_json()] == ["model_failed"]
    assert "status" not in failure.updates_json()


@pytest.mark.parametrize(
    ("hops", "status", "count", "ended"),
    [
        pytest.param(None, None, 0, "", id="absent"),
        pytest.param(3, "in_progress", 3, "", id="live"),
        pytest.param(True, "completed", 0, "", id="bool-is-no-count"),
        pytest.param(-2, "queued", 0, "", id="negative"),
        pytest.param(8, "failed", 8, "failed", id="failed"),
        pytest.param("8", ["cancelled"], 0, "", id="odd-values"),
    ],
)
def test_the_state_an_outcome_is_decided_from(
    hops: Any, status: Any, count: int, ended: str
) -> None:
    state = RequestState.of({"hops": hops, "status": status, "other": 1})
    assert (state.count, state.ended) == (count, ended)
    # Exactly as read; no epoch in the record: absent.
    assert state.expected() == {"hops": hops, "status": status, "epoch": None}
    live = plan_for(state, plan_outcome("developer", ENVELOPE, _result(), NOW), ENVELOPE)
    assert ("status" in live.updates_json()) == (not ended)


def test_follow_up_ids_are_the_same_on_every_delivery_and_differ_by_role() -> None:
    assert follow_up_id("env-1", "qa") == follow_up_id("env-1", "qa")
    assert (
        len(
            {follow_up_id("env-1", "qa"), follow_up_id("env-1", "dev"), follow_up_id("env-2", "qa")}
        )
        == 3
    )
