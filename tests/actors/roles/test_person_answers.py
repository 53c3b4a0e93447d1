"""A person's answers in one process: two answers to one envelope at the same moment record
one (the keyed append decides), which waiting answer an id names, and the contract a person's
result is held to: its role's in the team's cast, ``hands_to`` included."""

from __future__ import annotations

import json
import re
from pathlib import Path

import anyio
import pytest

from teams_runtime.actors.context._actor import open_context
from teams_runtime.actors.intake._submit import submit
from teams_runtime.actors.roles._person_answers import (
    Answered,
    person_result,
    pick_waiting,
    record_answer,
)
from teams_runtime.actors.team._team import Team
from teams_runtime.cli import main
from teams_runtime.codecs.config import DEFAULT_CAST, parse_team_config
from teams_runtime.codecs.envelopes import MessageEnvelope
from teams_runtime.codecs.model import result_json
from teams_runtime.codecs.waiting_answers import WaitingAnswer
from teams_runtime.exceptions import AnswerRefused
from teams_runtime.storage import Workspace
from teams_runtime.storage.opening import open_storage

from ...support.cli_in_process import init_nats_workspace

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
        open_storage(workspace) as storage,
        open_context(workspace.root, store=storage.store) as context,
    ):
        (item,) = await storage.inbox.items()
        outcomes: list[Answered | str] = []

        async def answer(summary: str) -> None:
            result = person_result(item, {"status": "completed", "summary": summary})
            try:
                outcomes.append(
                    await record_answer(
                        context, storage.queue, storage.inbox, item, result, max_hops=40
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
    assert summary.waiting == 1 and summary.model_calls == 0
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
    async with open_storage(person_workspace) as storage:
        record = json.loads(await storage.store.load("req-1"))
        assert await storage.inbox.items() == []
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
    result = person_result(item, {"status": "blocked", "summary": "Totals off."}, DEFAULT_CAST)
    assert result_json(result) == {
        "request_id": "req-1", "role": "qa", "status": "blocked", "summary": "Totals off.",
        "insights": [], "proposals": {}, "artifacts": [], "next_role": "", "error": "",
    }  # fmt: skip
    with pytest.raises(AnswerRefused, match=r'`role` must be "qa"\.'):
        person_result(item, {"status": "completed", "summary": "x", "role": "developer"})


CAST = """\
team:
  roles: [writer, reviewer, approver]
roles:
  reviewer:
    hands_to: [writer, approver, ""]
  approver:
    hands_to: [writer, ""]
    model: {backend: human}
"""


def test_a_person_names_only_a_role_its_hands_to_allows() -> None:
    cast = parse_team_config(CAST, "team_runtime.yaml").cast
    item = _waiting("req-1", "approver", "env-a")
    result = person_result(
        item, {"status": "completed", "summary": "Ok.", "next_role": "writer"}, cast
    )
    assert (result.role, result.next_role) == ("approver", "writer")
    message = "`next_role` must be empty or one of: writer (approver may hand only to these)."
    for next_role in ("reviewer", "qa"):  # a role of the cast it may not hand to; not of it
        given = {"status": "completed", "summary": "Ok.", "next_role": next_role}
        with pytest.raises(AnswerRefused, match=re.escape(message)):
            person_result(item, given, cast)


def test_a_person_role_the_team_no_longer_has_is_refused() -> None:
    cast = parse_team_config(CAST, "team_runtime.yaml").cast
    with pytest.raises(AnswerRefused, match=r"waits for the qa role, which the team no longer "
                       r"has \(its roles are: writer, reviewer, approver\)"):  # fmt: skip
        person_result(
            _waiting("req-1", "qa", "env-a"), {"status": "completed", "summary": "x"}, cast
        )


def _one_waiting(workspace: Workspace, capsys: pytest.CaptureFixture[str]) -> None:
    ws = ("--workspace", str(workspace.root))
    assert main(["submit", "--role", "qa", "--scope", "s", "--request-id", "req-1", *ws]) == 0
    assert main(["run", "--once", "--plain", *ws]) == 0
    capsys.readouterr()


@pytest.mark.parametrize(
    ("content", "message"),
    [
        pytest.param(
            '{"status": "completed", "summary": "ok", "status": "failed"}',
            "the key 'status' is written twice in one object",
            id="key-twice",
        ),
        pytest.param(
            '{"status": "completed", "summary": "' + "x" * 1_100_000 + '"}',
            "longer than 1,048,576 bytes, the most an answer may be",
            id="too-long",
        ),
    ],
)
def test_an_answer_file_with_a_key_twice_or_too_long_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, message: str
) -> None:
    root = tmp_path / "ws"
    assert main(["init", str(root)]) == 0
    (root / "team_runtime.yaml").write_text((root / "team_runtime.yaml").read_text() + PERSON_QA)
    workspace = Workspace(root)
    _one_waiting(workspace, capsys)
    answer = tmp_path / "answer.json"
    answer.write_text(content)
    status = main(["answer", "req-1", "--from", str(answer), "--workspace", str(root)])
    _, err = capsys.readouterr()
    assert status == 2 and message in err and "Nothing was recorded" in err
    record = json.loads(workspace.request_path("req-1").read_text())
    assert [e["type"] for e in record["events"]] == ["created", "delegated"]
