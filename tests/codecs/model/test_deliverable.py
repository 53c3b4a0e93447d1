"""The contract's deliverable (``output``) and its placeholders: an answer may carry its work as
text or an object of a bounded size; the example shape names ``output`` only for a role asked
for it (the default team's shape is unchanged); an answer that gives back the example's own
placeholder text is rejected, the issue naming the field."""

from __future__ import annotations

import json
from typing import Any

import pytest

from teams_runtime.codecs.model import MAX_OUTPUT_BYTES, contract_shape, validate_reply
from teams_runtime.codecs.model._result_schema import contract_schema

VALID: dict[str, Any] = {"request_id": "req-1", "role": "writer", "status": "completed",
                         "summary": "Wrote the draft.", "next_role": ""}  # fmt: skip


def _issues(**fields: Any) -> list[str]:
    answer = json.dumps({**VALID, **fields})
    return validate_reply(answer, kind="task", request_id="req-1", role="writer").issues


@pytest.mark.parametrize(
    "output",
    [
        pytest.param("The draft.\n\nA second paragraph.", id="text"),
        pytest.param({"title": "Launch", "sections": ["a", "b"]}, id="object"),
        pytest.param("x" * (MAX_OUTPUT_BYTES - 2), id="at-the-limit"),
    ],
)
def test_an_output_of_text_or_an_object_is_kept_as_given(output: Any) -> None:
    checked = validate_reply(json.dumps({**VALID, "output": output}), kind="task",
                             request_id="req-1", role="writer")  # fmt: skip
    assert checked.issues == []
    assert checked.answer is not None and checked.answer.output == output


@pytest.mark.parametrize(
    ("output", "issue"),
    [
        pytest.param(["a"], "`output` must be a string or an object.", id="list"),
        pytest.param(3, "`output` must be a string or an object.", id="number"),
        pytest.param(
            "x" * MAX_OUTPUT_BYTES,
            f"`output` is {MAX_OUTPUT_BYTES + 2} bytes as JSON, over the limit of "
            f"{MAX_OUTPUT_BYTES}: shorten it, or write the work to files and name them in "
            "`artifacts`.",
            id="too-large",
        ),
    ],
)
def test_an_output_of_another_kind_or_too_large_is_an_issue(output: Any, issue: str) -> None:
    assert _issues(output=output) == [issue]


@pytest.mark.parametrize(
    ("fields", "field", "placeholder"),
    [
        pytest.param({"summary": "one or two sentences on what you did and found"},
                     "summary", "one or two sentences on what you did and found", id="summary"),
        pytest.param({"summary": "  One or two sentences on what you did and found. "},
                     "summary", "one or two sentences on what you did and found",
                     id="summary-case-and-stop"),
        pytest.param({"insights": ["facts the next role needs"]}, "insights",
                     "facts the next role needs", id="insights"),
        pytest.param({"artifacts": ["paths you created or changed"]}, "artifacts",
                     "paths you created or changed", id="artifacts"),
        pytest.param({"output": "your work itself: the text (or JSON object) the next role "
                                "takes up"}, "output",
                     "your work itself: the text (or JSON object) the next role takes up",
                     id="output"),
        pytest.param({"summary": "one sentence on what you did and found"}, "summary",
                     "one or two sentences on what you did and found", id="near-copy"),
        pytest.param({"output": "your work itself: the text (or JSON object) the next role "
                                "takes up, but there's still work to be done."}, "output",
                     "your work itself: the text (or JSON object) the next role takes up",
                     id="placeholder-then-words"),
    ],
)  # fmt: skip
def test_an_answer_echoing_the_examples_placeholder_is_an_issue(
    fields: dict[str, Any], field: str, placeholder: str
) -> None:
    assert _issues(**fields) == [
        f'`{field}` repeats the example\'s placeholder "{placeholder}": write your own content '
        "there."
    ]


def test_a_research_decision_echoing_its_placeholder_is_an_issue() -> None:
    answer = {"request_id": "req-1", "role": "research", "needed": False,
              "reason_code": "enough", "summary": "One sentence on the decision."}  # fmt: skip
    checked = validate_reply(json.dumps(answer), kind="research_decision", request_id="req-1",
                             role="research")  # fmt: skip
    assert checked.issues == [
        '`summary` repeats the example\'s placeholder "one sentence on the decision": write '
        "your own content there."
    ]


def test_a_summary_that_only_mentions_the_placeholder_words_is_fine() -> None:
    assert _issues(summary="I wrote one or two sentences on what I did and found.") == []


def test_the_shape_and_schema_name_output_only_for_a_role_asked_for_it() -> None:
    plain = contract_shape("task", "req-1", "writer")
    assert "output" not in plain
    asked = contract_shape("task", "req-1", "writer", output=True)
    assert list(asked)[:5] == ["request_id", "role", "status", "summary", "output"]
    assert asked == {**plain, "output": asked["output"]}
    assert "output" not in contract_shape("research_decision", "req-1", "r", output=True)
    assert "output" not in contract_schema("task", request_id="req-1", role="writer")["properties"]
    schema = contract_schema("task", request_id="req-1", role="writer", output=True)
    assert schema["properties"]["output"] == {"type": ["string", "object"]}
    assert "output" not in schema["required"]
