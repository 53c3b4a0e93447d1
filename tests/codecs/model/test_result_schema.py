"""The contract's JSON schema accepts exactly what the contract accepts, on chosen examples and
on random ones, both ways; the schema sent to servers differs only where llama.cpp needs it."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from teams_runtime.codecs.model._contract import ReplyKind, validate_reply
from teams_runtime.codecs.model._result_schema import contract_schema, generation_schema
from teams_runtime.codecs.roles import ROLES

ROLE_OF: dict[ReplyKind, str] = {
    "task": "qa",
    "version_control": "version_controller",
    "research_decision": "research",
}
BASE: dict[ReplyKind, dict[str, Any]] = {
    "task": {"request_id": "req-1", "role": "qa", "status": "completed", "summary": "done"},
    "version_control": {
        "request_id": "req-1",
        "role": "version_controller",
        "status": "completed",
        "summary": "done",
        "commit_status": "committed",
    },
    "research_decision": {
        "request_id": "req-1",
        "role": "research",
        "needed": False,
        "reason_code": "enough",
    },
}


def _contract_accepts(kind: ReplyKind, answer: Any) -> bool:
    checked = validate_reply(json.dumps(answer), kind=kind, request_id="req-1", role=ROLE_OF[kind])
    return checked.answer is not None and not checked.issues


def _schema_accepts(kind: ReplyKind, answer: Any) -> bool:
    schema = contract_schema(kind, request_id="req-1", role=ROLE_OF[kind])
    return jsonschema.Draft202012Validator(schema).is_valid(answer)


DROP = object()


def _with(kind: ReplyKind, **changes: Any) -> dict[str, Any]:
    answer = BASE[kind] | changes
    return {key: value for key, value in answer.items() if value is not DROP}


EXAMPLES = [
    pytest.param("task", _with("task"), True, id="minimal-task"),
    pytest.param("task", _with("task", next_role="developer"), True, id="next-role"),
    pytest.param("task", _with("task", next_role=None), True, id="next-role-null"),
    pytest.param("task", _with("task", next_role=""), True, id="next-role-empty"),
    pytest.param("task", _with("task", next_role="boss"), False, id="next-role-unknown"),
    pytest.param("task", _with("task", next_role=False), False, id="next-role-false"),
    pytest.param("task", _with("task", next_role=0), False, id="next-role-zero"),
    pytest.param("task", _with("task", error=None), True, id="error-null"),
    pytest.param("task", _with("task", error=True), False, id="error-bool"),
    pytest.param("task", _with("task", summary="   "), False, id="summary-blank"),
    pytest.param("task", _with("task", summary="\u00a0\n"), False, id="summary-unicode-blank"),
    pytest.param("task", _with("task", summary=" a "), True, id="summary-padded"),
    pytest.param("task", _with("task", summary=DROP), False, id="no-summary"),
    pytest.param("task", _with("task", summary=3), False, id="summary-number"),
    pytest.param("task", _with("task", status="done"), False, id="status-unknown"),
    pytest.param("task", _with("task", request_id="req-2"), False, id="other-request"),
    pytest.param("task", _with("task", role="developer"), False, id="other-role"),
    pytest.param("task", _with("task", insights="x"), False, id="insights-text"),
    pytest.param("task", _with("task", insights=None), False, id="insights-null"),
    pytest.param("task", _with("task", proposals=[]), False, id="proposals-list"),
    pytest.param("task", _with("task", artifacts=["a.py", 3]), True, id="artifacts-any-items"),
    pytest.param("task", _with("task", confidence=0.9), True, id="unknown-key-kept"),
    pytest.param("task", [BASE["task"]], False, id="a-list"),
    pytest.param("version_control", _with("version_control"), True, id="vc-minimal"),
    pytest.param(
        "version_control",
        _with("version_control", commit_status="pushed"),
        False,
        id="vc-unknown-commit-status",
    ),
    pytest.param(
        "version_control",
        _with("version_control", change_detected=1),
        False,
        id="vc-change-detected-number",
    ),
    pytest.param(
        "version_control",
        _with("task", role="version_controller"),
        False,
        id="vc-without-commit-status",
    ),
    pytest.param("research_decision", _with("research_decision"), True, id="research-minimal"),
    pytest.param(
        "research_decision",
        _with("research_decision", summary=3),
        False,
        id="research-summary-number",
    ),
    pytest.param(
        "research_decision",
        _with("research_decision", summary=""),
        True,
        id="research-summary-empty",
    ),
    pytest.param(
        "research_decision", _with("research_decision", needed=DROP), False, id="research-no-needed"
    ),
    pytest.param(
        "research_decision",
        _with("research_decision", reason_code=" "),
        False,
        id="research-blank-reason",
    ),
    pytest.param(
        "research_decision",
        _with("research_decision", status="x"),
        True,
        id="research-extra-status",
    ),
]


@pytest.mark.parametrize(("kind", "answer", "valid"), EXAMPLES)
def test_the_schema_and_the_contract_agree_on_examples(
    kind: ReplyKind, answer: Any, valid: bool
) -> None:
    assert _contract_accepts(kind, answer) is valid
    assert _schema_accepts(kind, answer) is valid


_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-2, 2),
    st.sampled_from(
        [
            "",
            " ",
            "done",
            "req-1",
            "qa",
            "research",
            "version_controller",
            "completed",
            "committed",
            "developer",
            "\t",
        ]
    ),
    st.just([]),
    st.just({}),
    st.just(["a"]),
)
_KEYS = st.sampled_from(
    ["request_id", "role", "status", "summary", "insights", "proposals", "artifacts",
     "next_role", "error", "commit_status", "commit_sha", "commit_message", "commit_paths",
     "change_detected", "needed", "subject", "research_query", "reason_code", "other"]
)  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(
    kind=st.sampled_from(list(BASE)),
    changes=st.dictionaries(_KEYS, _VALUES, max_size=5),
    dropped=st.sets(_KEYS, max_size=2),
)
def test_the_schema_and_the_contract_agree_on_random_answers(
    kind: ReplyKind, changes: dict[str, Any], dropped: set[str]
) -> None:
    answer = {k: v for k, v in (BASE[kind] | changes).items() if k not in dropped}
    assert _schema_accepts(kind, answer) is _contract_accepts(kind, answer), answer


@pytest.mark.parametrize("kind", list(BASE))
def test_the_call_s_request_and_role_are_fixed_and_next_role_is_limited(kind: ReplyKind) -> None:
    schema = generation_schema(kind, request_id="req-9", role="planner")
    properties = schema["properties"]
    assert properties["request_id"]["const"] == "req-9"
    assert properties["role"]["const"] == "planner"
    assert properties["next_role"]["enum"] == ["", *ROLES, None]


@pytest.mark.parametrize("kind", list(BASE))
def test_the_generation_schema_differs_only_in_how_non_empty_is_said(kind: ReplyKind) -> None:
    exact = contract_schema(kind, request_id="req-1", role=ROLE_OF[kind])
    sent = generation_schema(kind, request_id="req-1", role=ROLE_OF[kind])
    changed = {
        name for name, value in exact["properties"].items() if sent["properties"][name] != value
    }
    assert changed == ({"reason_code"} if kind == "research_decision" else {"summary"})
    for name in changed:
        assert sent["properties"][name] == {"type": "string", "minLength": 1}
    assert "pattern" not in json.dumps(sent)  # llama.cpp's grammar converter refuses `\S`
    assert {key: value for key, value in sent.items() if key != "properties"} == {
        key: value for key, value in exact.items() if key != "properties"
    }
