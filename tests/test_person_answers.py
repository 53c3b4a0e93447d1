"""A person's answers in one process: two answers to one envelope at the same moment record
one (the keyed append decides), which waiting answer an id names, and the ``answer_within``
setting of a person's role."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import anyio
import pytest

from teams_runtime.actors.context import open_context
from teams_runtime.actors.intake import submit
from teams_runtime.actors.person_answers import (
    Answered,
    person_result,
    pick_waiting,
    record_answer,
)
from teams_runtime.actors.team import Team
from teams_runtime.cli import main
from teams_runtime.codecs.config import parse_team_config
from teams_runtime.codecs.envelopes import MessageEnvelope
from teams_runtime.codecs.roles import ROLES
from teams_runtime.codecs.waiting_answers import WaitingAnswer
from teams_runtime.exceptions import AnswerRefused, ConfigError
from teams_runtime.storage import Workspace
from teams_runtime.storage.backends import open_backend

from .cli_in_process import init_nats_workspace

PERSON_QA = "roles:\n  qa:\n    model: {backend: human}\n"


@pytest.fixture(params=["file", "nats"])
def person_workspace(request: pytest.FixtureRequest, tmp_path: Path) -> Workspace:
    """A dry-run workspace whose qa is a person, on either backend."""
    root = tmp_path / "ws"
    if request.param == "nats":
        init_nats_workspace(root, request.getfixturevalue("nats_server").settings())
    else:
        assert main(["init", str(root)]) == 0
    config = root / "team_runtime.yaml"
    config.write_text(config.read_text() + PERSON_QA)
    return Workspace(root)


async def _answer_twice_at_once(workspace: Workspace) -> list[Answered | str]:
    async with (
        open_backend(workspace) as backend,
        open_context(workspace.root, store=backend.store) as context,
    ):
        (item,) = await anyio.to_thread.run_sync(backend.inbox.items)
        outcomes: list[Answered | str] = []

        async def answer(summary: str) -> None:
            result = person_result(item, {"status": "completed", "summary": summary}, ROLES)
            try:
                outcomes.append(
                    await record_answer(
                        context, backend.queue, backend.inbox, item, result, max_hops=40
                    )
                )
            except AnswerRefused as exc:
                outcomes.append(str(exc))

        async with anyio.create_task_group() as group:  # both past their checks, then writing
            group.start_soon(answer, "first")
            group.start_soon(answer, "second")
        return outcomes


@pytest.mark.anyio
async def test_two_answers_at_the_same_moment_record_one(person_workspace: Workspace) -> None:
    await submit(person_workspace.root, role="qa", scope="check it", request_id="req-1")
    with anyio.fail_after(60):
        summary = await Team(person_workspace.root).run(once=True)
    assert summary.waiting == 1 and summary.prompts_sent == 0
    with anyio.fail_after(60):
        outcomes = await _answer_twice_at_once(person_workspace)
    (answered,) = [outcome for outcome in outcomes if isinstance(outcome, Answered)]
    assert (answered.request_id, answered.role, answered.request_status) == (
        "req-1", "qa", "completed"
    )  # fmt: skip
    assert [outcome for outcome in outcomes if isinstance(outcome, str)] == [
        "request req-1: another answer to the qa role was recorded at the same moment; this "
        "one was not."
    ]
    async with open_backend(person_workspace) as backend:
        record = json.loads(await anyio.to_thread.run_sync(backend.store.load, "req-1"))
        assert await anyio.to_thread.run_sync(backend.inbox.items) == []
    reports = [event for event in record["events"] if event.get("type") == "role_report"]
    assert [(event["actor"], event["summary"]) for event in reports] == [
        ("qa", record["result"]["summary"])
    ]


@pytest.mark.anyio
async def test_a_team_serving_a_person_counts_what_waits_for_them(
    person_workspace: Workspace,
) -> None:
    await submit(person_workspace.root, role="qa", scope="check it", request_id="req-1")
    team = Team(person_workspace.root)
    assert team.people == ("qa",)
    async with team:
        with anyio.fail_after(60):
            await team.run(once=True)
        statuses = {status.role: status for status in await team.status()}
    assert (statuses["qa"].person, statuses["qa"].answers) == (True, 1)
    assert (statuses["planner"].person, statuses["planner"].answers) == (False, 0)


def _waiting(request_id: str, role: str, envelope_id: str) -> WaitingAnswer:
    envelope = MessageEnvelope(
        request_id=request_id, sender="developer", target=role, envelope_id=envelope_id
    )
    return WaitingAnswer(envelope=envelope, since=1.0)


def test_an_id_names_one_waiting_answer_or_says_which_there_are() -> None:
    qa = _waiting("req-1", "qa", "env-a")
    vc = _waiting("req-1", "version_controller", "env-b")
    other = _waiting("req-2", "qa", "env-c")
    items = [qa, vc, other]
    assert pick_waiting(items, "req-2", None) is other
    assert pick_waiting(items, "env-b", None) is vc  # an envelope id, whichever request
    assert pick_waiting(items, "req-1", "qa") is qa
    message = (
        "2 answers wait for request req-1: env-a (qa), env-b (version_controller); name one by "
        "its envelope id, or give --role."
    )
    with pytest.raises(AnswerRefused, match=f"^{re.escape(message)}$"):
        pick_waiting(items, "req-1", None)


def test_a_person_result_gets_its_ids_and_the_contracts_defaults() -> None:
    item = _waiting("req-1", "qa", "env-a")
    result = person_result(item, {"status": "blocked", "summary": "Totals off."}, ROLES)
    assert result == {
        "request_id": "req-1", "role": "qa", "status": "blocked", "summary": "Totals off.",
        "insights": [], "proposals": {}, "artifacts": [], "next_role": "", "error": "",
    }  # fmt: skip
    with pytest.raises(AnswerRefused, match=r'`role` must be "qa"\.'):
        person_result(item, {"status": "completed", "summary": "x", "role": "developer"}, ROLES)


def _model(text: str) -> Any:
    return parse_team_config(text, "team_runtime.yaml").model_for("qa")


@pytest.mark.parametrize(
    ("written", "seconds"),
    [
        pytest.param("90", 90.0, id="a-number"),
        pytest.param("2.5", 2.5, id="a-fraction"),
        pytest.param("90s", 90.0, id="seconds"),
        pytest.param("30m", 1800.0, id="minutes"),
        pytest.param("4h", 14_400.0, id="hours"),
        pytest.param("2d", 172_800.0, id="days"),
    ],
)
def test_answer_within_takes_seconds_or_one_unit(written: str, seconds: float) -> None:
    model = _model(f"roles:\n  qa:\n    model: {{backend: human, answer_within: {written}}}\n")
    assert (model.backend, model.answer_within, model.answer_seconds) == (
        "human", seconds, seconds
    )  # fmt: skip
    assert model.structured_output == "off"  # a person gets no response_format


def test_a_person_without_answer_within_waits_without_a_limit() -> None:
    assert _model(PERSON_QA).answer_seconds is None


@pytest.mark.parametrize(
    ("model", "message"),
    [
        pytest.param(
            "{backend: human, answer_within: soon}",
            "team_runtime.yaml roles.qa.model.answer_within must be a duration: seconds as a "
            "number, or a number and one unit (90s, 30m, 4h, 2d).",
            id="not-a-duration",
        ),
        pytest.param(
            "{backend: human, answer_within: 0}",
            "team_runtime.yaml roles.qa.model.answer_within must be greater than 0.",
            id="zero",
        ),
        pytest.param(
            "{backend: human, answer_within: 400d}",
            "team_runtime.yaml roles.qa.model.answer_within must be at most 366d (a year).",
            id="too-long",
        ),
        pytest.param(
            "{backend: human, answer_within: true}",
            "team_runtime.yaml roles.qa.model.answer_within must be a duration: seconds as a "
            "number, or a number and one unit (90s, 30m, 4h, 2d).",
            id="a-boolean",
        ),
        pytest.param(
            "{answer_within: 2h}",
            "team_runtime.yaml roles.qa.model.answer_within is for a person's role: set "
            "model.backend to human with it, or remove it (docs/roles.md).",
            id="not-a-person",
        ),
    ],
)
def test_a_bad_answer_within_is_named_where_it_was_written(model: str, message: str) -> None:
    with pytest.raises(ConfigError, match=f"^{re.escape(message)}$"):
        _model(f"roles:\n  qa:\n    model: {model}\n")
