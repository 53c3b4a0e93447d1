"""Prompts and contracts from the team's config: the default team's prompts byte for byte as
before, a team's own rules in its prompts, and its hand-off rules in the contract, the JSON
schema and the repair prompt."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from teams_runtime import PromptContextConfig, project_request
from teams_runtime.codecs.config import Cast, parse_team_config
from teams_runtime.codecs.envelopes import MessageEnvelope
from teams_runtime.codecs.model._contract import validate_reply
from teams_runtime.codecs.model._result_schema import contract_schema, generation_schema
from teams_runtime.codecs.roles import NextRoles
from teams_runtime.demo import sample_record
from teams_runtime.policy.prompts import PromptKind, build_prompt, next_roles_of

# Digests of the default team's prompts and schemas as the runtime built them before a team
# could be declared (commit b9541f2), for the record and envelope `_prompts` uses.
GOLDEN = json.loads((Path(__file__).parent / "data" / "default_team_prompts.json").read_text())

TEAM = """\
team: {roles: [writer, reviewer, editor]}
roles:
  writer:
    rules: [Write the draft the scope asks for., Keep it under a page.]
    hands_to: [reviewer]
  reviewer:
    hands_to: [writer, editor, ""]
  editor:
    hands_to: [""]
"""


def _cast(text: str) -> Cast:
    return parse_team_config(text, "team_runtime.yaml").cast


def _prompts(cast: Cast) -> dict[str, str]:
    """Every prompt of every role of ``cast``: its own kind and a repair, on two records (one
    compacted, one not)."""
    prompts = {}
    for events in (10, 60):
        projection = project_request(sample_record(events, "req-golden"), PromptContextConfig())
        for role in cast.names:
            envelope = MessageEnvelope(
                request_id="req-golden",
                sender="planner",
                target=role,
                scope="Ünï scope",
                params={"local_sources": ["docs/a.md"]},
            )
            own = cast.prompt_kind_of(role)
            kinds: tuple[PromptKind, ...] = (own, "repair")
            for kind in kinds:
                bundle = build_prompt(
                    kind,
                    role=role,
                    projection=projection,
                    envelope=envelope,
                    repairing=own if kind == "repair" else None,
                    errors=["`summary` is missing or empty."] if kind == "repair" else None,
                    previous='{"status": "done-ish"}',
                    cast=cast,
                )
                prompts[f"{events}/{role}/{kind}"] = bundle.text()
    return prompts


def _digest(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("", id="no-roles-section"),
        pytest.param("roles: {qa: {model: {attempts: 1}}, planner: {}}\n", id="models-only"),
        pytest.param(
            "team: {roles: [orchestrator, research, planner, designer, architect, developer, "
            "qa, version_controller]}\n",
            id="the-eight-listed",
        ),
    ],
)
def test_the_default_team_gets_the_prompts_it_always_got(text: str) -> None:
    cast = _cast(text)
    prompts = {key: _digest(prompt) for key, prompt in _prompts(cast).items()}
    assert prompts == GOLDEN["prompts"]
    schemas = {
        kind: _digest(
            generation_schema(
                kind, request_id="req-golden", role="qa", next_roles=next_roles_of("qa", cast)
            )
        )
        for kind in ("task", "research_decision", "version_control")
    }
    assert schemas == GOLDEN["schemas"]


def test_a_team_of_its_own_gets_its_rules_and_hand_offs_in_its_prompts() -> None:
    prompts = _prompts(_cast(TEAM))
    writer = prompts["60/writer/task"]
    assert writer.startswith("You are the writer role inside teams_runtime.\n")
    assert (
        "Role rules (writer):\n- Write the draft the scope asks for.\n- Keep it under a page.\n"
        in writer
    )
    assert "- Set `next_role` to the role that should act next: one of reviewer.\n" in writer
    assert '"next_role": "one of reviewer"' in writer
    reviewer = prompts["60/reviewer/task"]
    assert "Role rules (reviewer):\n- none\n" in reviewer
    assert '(one of writer, editor), or "" when the request is done.' in reviewer
    assert '"next_role": "one of writer, editor, or empty to finish"' in reviewer
    editor = prompts["10/editor/task"]
    assert '- Set `next_role` to "": your result finishes the request.' in editor
    assert '"next_role": "empty: this role finishes the request"' in editor
    # No built-in role is offered to a team that does not have it.
    assert all("planner" not in prompt.split("Current request")[0] for prompt in prompts.values())


@pytest.mark.parametrize(
    ("role", "next_role", "issue"),
    [
        pytest.param(
            "writer",
            "editor",
            "`next_role` must be one of: reviewer (writer may hand the request only to these, "
            "and may not finish it).",
            id="outside-hands-to",
        ),
        pytest.param(
            "writer",
            "",
            "`next_role` must be one of: reviewer (writer may hand the request only to these, "
            "and may not finish it).",
            id="may-not-finish",
        ),
        pytest.param(
            "reviewer",
            "qa",
            "`next_role` must be empty or one of: writer, editor (reviewer may hand only to "
            "these).",
            id="not-in-the-team",
        ),
        pytest.param(
            "editor",
            "writer",
            '`next_role` must be "": editor hands the request to no role (it finishes it).',
            id="finishes-only",
        ),
    ],
)
def test_a_hand_off_the_role_may_not_make_is_a_contract_issue(
    role: str, next_role: str, issue: str
) -> None:
    cast = _cast(TEAM)
    answer = {"request_id": "req-1", "role": role, "status": "completed", "summary": "done",
              "next_role": next_role}  # fmt: skip
    checked = validate_reply(json.dumps(answer), kind="task", request_id="req-1",
                              role=role, next_roles=cast.next_roles(role))  # fmt: skip
    assert (checked.answer, checked.issues) == (None, [issue])
    # The schema sent with the prompt refuses it too, and takes what the contract takes.
    schema = contract_schema("task", request_id="req-1", role=role,
                             next_roles=cast.next_roles(role))  # fmt: skip
    assert next_role not in schema["properties"]["next_role"]["enum"]
    for allowed in cast.next_roles(role).values:
        checked = validate_reply(json.dumps({**answer, "next_role": allowed}),
                                  kind="task", request_id="req-1", role=role,
                                  next_roles=cast.next_roles(role))  # fmt: skip
        taken = checked.answer
        assert checked.issues == [] and taken is not None and taken.next_role == allowed
        assert allowed in schema["properties"]["next_role"]["enum"]


def test_a_role_that_may_not_finish_must_name_its_next_role() -> None:
    writer = NextRoles(roles=("reviewer",), finish=False, limited=True)
    schema = contract_schema("task", request_id="req-1", role="writer", next_roles=writer)
    assert "next_role" in schema["required"]
    assert schema["properties"]["next_role"] == {"type": "string", "enum": ["reviewer"]}
    for left_out in ({}, {"next_role": None}):
        answer = {"request_id": "req-1", "role": "writer", "status": "completed",
                  "summary": "done", **left_out}  # fmt: skip
        issues = validate_reply(json.dumps(answer), kind="task", request_id="req-1",
                                 role="writer", next_roles=writer).issues  # fmt: skip
        assert issues and issues[0].startswith("`next_role` must be one of: reviewer")


def test_the_repair_prompt_names_the_roles_the_role_may_hand_to() -> None:
    cast = _cast(TEAM)
    answer = {"request_id": "req-1", "role": "writer", "status": "completed", "summary": "d",
              "next_role": "editor"}  # fmt: skip
    writer = cast.next_roles("writer")
    issues = validate_reply(json.dumps(answer), kind="task", request_id="req-1",
                             role="writer", next_roles=writer).issues  # fmt: skip
    projection = project_request(sample_record(10, "req-1"), PromptContextConfig())
    envelope = MessageEnvelope(request_id="req-1", sender="user", target="writer", scope="s")
    text = build_prompt("repair", role="writer", projection=projection, envelope=envelope,
                        repairing="task", errors=issues, previous=json.dumps(answer),
                        cast=cast).text()  # fmt: skip
    assert (
        "Validation errors:\n- `next_role` must be one of: reviewer (writer may hand the "
        "request only to these, and may not finish it).\n" in text
    )
    assert '"next_role": "one of reviewer"' in text  # the shape to answer in, again
