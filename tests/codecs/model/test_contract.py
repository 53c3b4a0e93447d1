"""The role-answer contracts: every issue at once, defaults, kept keys, the example shape, and
the dry-run backend's answers meeting them."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import msgspec
import pytest

from teams_runtime.actors.models._backends import DryRunBackend
from teams_runtime.codecs.config import DryRunConfig
from teams_runtime.codecs.model._contract import (
    ReplyKind,
    ResearchDecision,
    RoleResult,
    VersionControlResult,
    contract_fields,
    contract_shape,
    defaults_of,
    reply_json,
    validate_reply,
)
from teams_runtime.codecs.roles import ROLES
from teams_runtime.policy.prompts import PromptBundle, PromptKind

pytestmark = pytest.mark.anyio

STRUCTS: dict[ReplyKind, type[msgspec.Struct]] = {
    "task": RoleResult,
    "version_control": VersionControlResult,
    "research_decision": ResearchDecision,
}
NOT_JSON = "The answer is not valid JSON: send one JSON object and nothing else."


def _validate(
    answer: Any, kind: ReplyKind = "task", role: str = "qa"
) -> tuple[dict[str, Any] | None, list[str]]:
    """The checked answer as the record would hold it (``None`` with issues), and the issues."""
    text = answer if isinstance(answer, str) else json.dumps(answer)
    checked = validate_reply(text, kind=kind, request_id="req-1", role=role)
    return (None if checked.answer is None else reply_json(checked.answer)), checked.issues


def _task(**changes: Any) -> dict[str, Any]:
    answer = {"request_id": "req-1", "role": "qa", "status": "completed", "summary": "done"}
    return {key: value for key, value in (answer | changes).items() if value is not ...}


def _research(**changes: Any) -> dict[str, Any]:
    answer = {"request_id": "req-1", "role": "research", "needed": False, "reason_code": "enough"}
    return {key: value for key, value in (answer | changes).items() if value is not ...}


# --- validate_reply ----------------------------------------------------------------------------


def test_every_issue_is_listed_at_once() -> None:
    answer = {
        "request_id": "req-2",
        "role": "developer",
        "status": "done",
        "insights": "not a list",
        "proposals": [],
        "next_role": "boss",
    }
    assert _validate(answer) == (
        None,
        [
            '`request_id` must be "req-1".',
            '`role` must be "qa".',
            f"`next_role` must be empty or one of: {', '.join(ROLES)}.",
            "`status` must be one of: completed, blocked, failed.",
            "`summary` is missing or empty.",
            "`insights` must be a list.",
            "`proposals` must be an object.",
        ],
    )


def test_issues_name_keys_and_never_echo_values() -> None:
    secret = "SECRET-7f3"
    answer = {key: secret for key in ("request_id", "role", "status", "summary", "error")}
    answer |= {"insights": secret, "artifacts": secret, "next_role": secret}
    _, issues = _validate(answer)
    assert len(issues) == 6  # summary and error are fine strings
    assert not [issue for issue in issues if secret in issue]


def test_a_minimal_answer_gets_the_defaults() -> None:
    answer, issues = _validate(_task())
    assert issues == []
    assert answer == {
        "insights": [],
        "proposals": {},
        "artifacts": [],
        "error": "",
        "request_id": "req-1",
        "role": "qa",
        "status": "completed",
        "summary": "done",
        "next_role": "",
    }
    # Laid out as recorded: the defaults first, then the answer's keys in its order.
    assert list(answer) == [
        *("insights", "proposals", "artifacts", "error"),
        *("request_id", "role", "status", "summary", "next_role"),
    ]


def test_a_result_keeps_the_layout_and_the_unknown_keys_of_its_answer() -> None:
    given = {"status": "blocked", "note": 1, "summary": "s", "request_id": "req-1", "role": "qa",
             "artifacts": ["a.md"], "next_role": None, "error": None}  # fmt: skip
    checked = validate_reply(json.dumps(given), kind="task", request_id="req-1", role="qa")
    result = checked.answer
    assert isinstance(result, RoleResult) and (result.status, result.artifacts) == (
        "blocked",
        ["a.md"],
    )
    assert result.extra == {"note": 1}
    assert list(reply_json(result).items()) == [
        *(("insights", []), ("proposals", {}), ("artifacts", ["a.md"]), ("error", "")),
        *(("status", "blocked"), ("note", 1), ("summary", "s")),
        *(("request_id", "req-1"), ("role", "qa"), ("next_role", "")),
    ]


def test_defaults_are_fresh_for_every_answer() -> None:
    first = validate_reply(json.dumps(_task()), kind="task", request_id="req-1", role="qa")
    assert isinstance(first.answer, RoleResult)
    first.answer.insights.append("mutated")
    first.answer.proposals["k"] = "v"
    second = validate_reply(json.dumps(_task()), kind="task", request_id="req-1", role="qa")
    assert isinstance(second.answer, RoleResult)
    assert (second.answer.insights, second.answer.proposals) == ([], {})
    assert defaults_of("task")["insights"] == []


def test_keys_the_contract_does_not_know_are_kept() -> None:
    answer, issues = _validate(_task(confidence=0.9, notes={"a": [1]}))
    assert issues == []
    assert answer is not None and (answer["confidence"], answer["notes"]) == (0.9, {"a": [1]})


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        pytest.param({"error": None}, {"error": ""}, id="null-error-is-no-error"),
        pytest.param({"next_role": None}, {"next_role": ""}, id="null-next-role-is-finish"),
        pytest.param({"next_role": "developer"}, {"next_role": "developer"}, id="next-role"),
        pytest.param({"status": "blocked"}, {"status": "blocked"}, id="blocked"),
    ],
)
def test_accepted_values(changes: dict[str, Any], expected: dict[str, Any]) -> None:
    answer, issues = _validate(_task(**changes))
    assert issues == []
    assert answer is not None and {key: answer[key] for key in expected} == expected


@pytest.mark.parametrize(
    ("changes", "issue"),
    [
        pytest.param({"summary": "   "}, "`summary` is missing or empty.", id="blank-summary"),
        pytest.param({"summary": ...}, "`summary` is missing or empty.", id="no-summary"),
        pytest.param({"summary": 3}, "`summary` is missing or empty.", id="summary-number"),
        pytest.param(
            {"status": ...}, "`status` must be one of: completed, blocked, failed.", id="no-status"
        ),
        pytest.param({"request_id": ...}, '`request_id` must be "req-1".', id="no-request-id"),
        pytest.param({"error": True}, "`error` must be a string.", id="error-bool"),
        pytest.param({"artifacts": "a.md"}, "`artifacts` must be a list of paths.", id="artifacts"),
        pytest.param({"proposals": "x"}, "`proposals` must be an object.", id="proposals"),
        pytest.param(
            {"next_role": 3},
            f"`next_role` must be empty or one of: {', '.join(ROLES)}.",
            id="next-role-number",
        ),
    ],
)
def test_one_bad_field_is_one_issue(changes: dict[str, Any], issue: str) -> None:
    assert _validate(_task(**changes)) == (None, [issue])


@pytest.mark.parametrize(
    ("text", "issue"),
    [
        pytest.param("Sure! Here is my answer: status completed", NOT_JSON, id="prose"),
        pytest.param("", NOT_JSON, id="empty"),
        pytest.param('{"status": "completed"', NOT_JSON, id="torn"),
        pytest.param(
            '{"a": 1} and {"b": 2}',
            "The answer holds 2 JSON objects: send exactly one JSON object and nothing else.",
            id="two-objects",
        ),
        pytest.param("[1, 2]", "The answer must be a JSON object, not an array.", id="list"),
        pytest.param('"text"', "The answer must be a JSON object, not a string.", id="string"),
        pytest.param("3", "The answer must be a JSON object, not a number.", id="number"),
    ],
)
def test_answers_that_are_not_one_json_object(text: str, issue: str) -> None:
    assert _validate(text) == (None, [issue])


def test_whitespace_around_the_object_is_fine() -> None:
    answer, issues = _validate("\n\n  " + json.dumps(_task()) + "  \n")
    assert issues == [] and answer is not None and answer["summary"] == "done"


def test_a_research_decision_gets_its_defaults() -> None:
    answer, issues = _validate(_research(next_role="planner"), "research_decision", "research")
    assert issues == []
    assert answer == {
        "subject": "",
        "research_query": "",
        "summary": "",
        "request_id": "req-1",
        "role": "research",
        "needed": False,
        "reason_code": "enough",
        "next_role": "planner",
    }


@pytest.mark.parametrize(
    ("changes", "issues"),
    [
        pytest.param({"needed": ...}, ["`needed` is missing (true or false)."], id="no-needed"),
        pytest.param({"needed": "no"}, ["`needed` must be true or false."], id="needed-text"),
        pytest.param({"needed": 0}, ["`needed` must be true or false."], id="needed-number"),
        pytest.param(
            {"reason_code": ""}, ["`reason_code` must be a non-empty string."], id="reason-empty"
        ),
        pytest.param(
            {"reason_code": ...}, ["`reason_code` must be a non-empty string."], id="no-reason"
        ),
        pytest.param({"subject": 3}, ["`subject` must be a string."], id="subject-number"),
        pytest.param(
            {"needed": ..., "reason_code": " ", "role": "qa"},
            [
                '`role` must be "research".',
                "`needed` is missing (true or false).",
                "`reason_code` must be a non-empty string.",
            ],
            id="all-at-once",
        ),
    ],
)
def test_research_decision_checks(changes: dict[str, Any], issues: list[str]) -> None:
    assert _validate(_research(**changes), "research_decision", "research") == (None, issues)


def test_a_version_control_answer_gets_the_commit_defaults() -> None:
    changes = {"role": "version_controller", "commit_status": "no_changes"}
    answer, issues = _validate(_task(**changes), "version_control", "version_controller")
    assert issues == []
    assert answer is not None
    assert {key: answer[key] for key in ("commit_sha", "commit_message", "commit_paths")} == {
        "commit_sha": "",
        "commit_message": "",
        "commit_paths": [],
    }
    assert answer["change_detected"] is False


@pytest.mark.parametrize(
    ("changes", "issue"),
    [
        pytest.param({"commit_status": ...}, "commit_status", id="no-commit-status"),
        pytest.param({"commit_status": "pushed"}, "commit_status", id="unknown-commit-status"),
        pytest.param(
            {"commit_paths": "a.py"}, "`commit_paths` must be a list of paths.", id="paths"
        ),
        pytest.param(
            {"change_detected": "yes"},
            "`change_detected` must be true or false.",
            id="change-detected",
        ),
        pytest.param({"commit_sha": 123}, "`commit_sha` must be a string.", id="sha"),
    ],
)
def test_version_control_checks(changes: dict[str, Any], issue: str) -> None:
    base = {"role": "version_controller", "commit_status": "committed"}
    _, issues = _validate(_task(**(base | changes)), "version_control", "version_controller")
    if issue == "commit_status":
        issue = "`commit_status` must be one of: committed, no_changes, failed, no_repo."
    assert issues == [issue]


def test_a_task_answer_is_not_a_version_control_answer() -> None:
    _, issues = _validate(_task(role="version_controller"), "version_control", "version_controller")
    assert issues == ["`commit_status` must be one of: committed, no_changes, failed, no_repo."]


# --- the example shape --------------------------------------------------------------------------


@pytest.mark.parametrize("kind", list(STRUCTS))
def test_the_shape_has_the_structs_fields_in_order(kind: ReplyKind) -> None:
    shape = contract_shape(kind, "req-9", "planner")
    carried = {"extra", "key_order"}  # a role result's layout, not the contract's
    names = [field.name for field in msgspec.structs.fields(STRUCTS[kind])]
    assert list(shape) == [name for name in names if name not in carried]
    assert [field.name for field in contract_fields(kind)] == list(shape)
    assert (shape["request_id"], shape["role"]) == ("req-9", "planner")
    if kind != "research_decision":
        assert shape["status"] == "completed | blocked | failed"
    if kind == "version_control":
        assert shape["commit_status"] == "committed | no_changes | failed | no_repo"


@pytest.mark.parametrize("kind", list(STRUCTS))
def test_defaults_are_only_for_optional_fields(kind: ReplyKind) -> None:
    fields = {field.name: field for field in msgspec.structs.fields(STRUCTS[kind])}
    defaults = defaults_of(kind)
    assert set(defaults) <= set(fields)
    assert all(not fields[name].required for name in defaults)
    assert "next_role" not in defaults  # filled from the answer itself


# --- the dry-run backend meets the contract -----------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "role"),
    [
        pytest.param("task", "planner", id="task"),
        pytest.param("task", "qa", id="task-end-of-route"),
        pytest.param("research_decision", "research", id="research"),
        pytest.param("version_control", "version_controller", id="version-control"),
        pytest.param("repair", "developer", id="repair"),
    ],
)
async def test_dry_run_answers_validate_cleanly(
    prompt_bundle: Callable[..., PromptBundle], kind: PromptKind, role: str
) -> None:
    bundle = prompt_bundle(kind, role=role, request_id="req-7", events=30)
    text = (await DryRunBackend(DryRunConfig()).complete(bundle)).text
    checked = validate_reply(text, kind=bundle.reply_kind, request_id="req-7", role=role)
    assert checked.issues == []
    answer = checked.answer
    assert answer is not None and (answer.request_id, answer.role) == ("req-7", role)
