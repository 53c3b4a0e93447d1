"""The request's deliverable across its roles: the record's ``result`` keeps the last non-empty
``output`` a role gave until a later one gives its own, while each report keeps its answer as
given."""

from __future__ import annotations

from typing import Any

import pytest

from teams_runtime import PromptContextConfig, project_request
from teams_runtime.codecs.envelopes import MessageEnvelope
from teams_runtime.codecs.model import RoleResult, result_json
from teams_runtime.demo import sample_record
from teams_runtime.policy.deliverables import carried_output
from teams_runtime.policy.outcomes import plan_outcome

ENVELOPE = MessageEnvelope(request_id="req-1", sender="writer", target="reviewer", scope="s")
DRAFT = "The draft, whole."


def _result(next_role: str = "", **extra: Any) -> RoleResult:
    return RoleResult(request_id="req-1", role="reviewer", status="completed",
                      summary="Approved.", next_role=next_role, extra=extra)  # fmt: skip


@pytest.mark.parametrize("next_role", [pytest.param("", id="finishes"),
                                       pytest.param("editor", id="hands-on")])  # fmt: skip
def test_a_result_without_output_keeps_the_one_before(next_role: str) -> None:
    plan = plan_outcome("reviewer", ENVELOPE, _result(next_role), "t", carried=DRAFT)
    kept = result_json(plan.updates["result"])
    assert (kept["summary"], kept["output"]) == ("Approved.", DRAFT)
    assert list(kept)[-1] == "output"  # after the answer's own keys
    assert "output" not in plan.events_json()[0]["payload"]  # the report: the answer as given


@pytest.mark.parametrize("own", [pytest.param("A new draft.", id="text"),
                                 pytest.param({"v": 2}, id="object")])  # fmt: skip
def test_a_result_with_its_own_output_replaces_it(own: Any) -> None:
    plan = plan_outcome("reviewer", ENVELOPE, _result(output=own), "t", carried=DRAFT)
    assert plan.updates["result"].output == own


@pytest.mark.parametrize("empty", [None, "", "  ", {}])
def test_an_empty_output_carries_nothing(empty: Any) -> None:
    plan = plan_outcome("reviewer", ENVELOPE, _result(), "t", carried=empty)
    assert "output" not in result_json(plan.updates["result"])


def test_the_output_carried_is_the_records_results() -> None:
    record = sample_record(3, "req-1")
    assert carried_output(project_request(record, PromptContextConfig())) is None
    record["result"] = {"role": "writer", "summary": "Wrote it.", "output": DRAFT}
    assert carried_output(project_request(record, PromptContextConfig())) == DRAFT
