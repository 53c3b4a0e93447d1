"""Tolerant reading of a model's reply text: the one JSON object it holds, fenced or with
text around it, or with raw control characters in its strings; none or several stay invalid,
and how it was read is said."""

from __future__ import annotations

import json
from typing import Any

import pytest

from teams_runtime.codecs.model._contract import validate_reply
from teams_runtime.codecs.model._reply_json import MAX_TRIED_STARTS, read_reply

from ...support.fake_model import answer_for
from ...support.fake_openai_server import FakeOpenAIServer, Text

ANSWER = {"request_id": "req-1", "role": "qa", "status": "completed", "summary": "done"}
TEXT = json.dumps(ANSWER)
NOT_JSON = "The answer is not valid JSON: send one JSON object and nothing else."


@pytest.mark.parametrize(
    ("text", "how"),
    [
        pytest.param(TEXT, "as_is", id="bare"),
        pytest.param(f"\n  {TEXT}\n", "as_is", id="whitespace-around"),
        pytest.param(f"```json\n{TEXT}\n```", "extracted", id="json-fence"),
        pytest.param(f"```\n{TEXT}\n```\n", "extracted", id="plain-fence"),
        pytest.param(
            f"Here is my result:\n```json\n{TEXT}\n```\nDone.", "extracted", id="fence-with-text"
        ),
        pytest.param(f"Sure. {TEXT}", "extracted", id="sentence-before"),
        pytest.param(f"{TEXT} Hope this helps {{not json}}.", "extracted", id="braces-in-prose"),
        pytest.param(
            '{"request_id": "req-1", "role": "qa", "status": "completed", '
            '"summary": "line one\nline two\ttabbed"}',
            "repaired",
            id="raw-line-break-in-a-string",
        ),
        pytest.param(
            '```json\n{"request_id": "req-1", "role": "qa",\n "status": "completed",'
            '\n "summary": "a\x01b"}\n```',
            "extracted_repaired",
            id="fenced-and-repaired",
        ),
    ],
)
def test_one_object_is_read_and_how_is_said(text: str, how: str) -> None:
    reading = read_reply(text)
    assert reading.how == how
    assert reading.value["request_id"] == "req-1" and reading.value["role"] == "qa"
    checked = validate_reply(text, kind="task", request_id="req-1", role="qa")
    assert checked.issues == [] and checked.answer is not None


def test_a_repaired_string_keeps_its_characters() -> None:
    reading = read_reply('{"summary": "a\nb\tc\x02"}')
    assert reading.how == "repaired" and reading.value == {"summary": "a\nb\tc\x02"}


@pytest.mark.parametrize(
    ("text", "issue"),
    [
        pytest.param("Sure! The tests pass.", NOT_JSON, id="prose"),
        pytest.param('```json\n{"status": \n```', NOT_JSON, id="torn-in-a-fence"),
        pytest.param('{"a": NaN}', NOT_JSON, id="nan-is-not-json"),
        pytest.param(
            f"First try: {TEXT}\nBetter: {TEXT}",
            "The answer holds 2 JSON objects: send exactly one JSON object and nothing else.",
            id="two-objects",
        ),
        pytest.param(
            f"```json\n{TEXT}\n```\n```json\n{TEXT}\n```",
            "The answer holds 2 JSON objects: send exactly one JSON object and nothing else.",
            id="two-fences",
        ),
        pytest.param("Here: [1, 2]", NOT_JSON, id="an-array-in-text-is-no-object"),
    ],
)
def test_none_or_several_objects_stay_invalid(text: str, issue: str) -> None:
    checked = validate_reply(text, kind="task", request_id="req-1", role="qa")
    assert (checked.answer, checked.issues) == (None, [issue])


def test_the_contract_stays_strict_on_what_was_extracted() -> None:
    text = "```json\n" + json.dumps(ANSWER | {"status": "done", "next_role": "boss"}) + "\n```"
    issues = validate_reply(text, kind="task", request_id="req-1", role="qa").issues
    assert len(issues) == 2 and issues[1].startswith("`status` must be one of")


def test_a_control_character_outside_strings_is_not_repaired() -> None:
    assert read_reply('{"a":\x01 1}').how is None


def test_prose_full_of_braces_is_searched_only_so_far() -> None:
    few = "{ " * (MAX_TRIED_STARTS - 1) + TEXT
    assert read_reply(few).how == "extracted"
    many = "{ " * 200_000 + TEXT  # 400 KB of braces that start no object: not one decode each
    assert read_reply(many).how is None


@pytest.mark.anyio
async def test_a_fenced_answer_is_accepted_in_one_call(
    openai_workspace: Any, seed: Any, read_record: Any, run_once: Any,
    openai_server: FakeOpenAIServer,
) -> None:  # fmt: skip
    workspace = openai_workspace()
    seed(workspace, "req-1", "qa", events=5)
    fenced = "Here is the result:\n```json\n" + json.dumps(answer_for("qa", "req-1")) + "\n```"
    openai_server.then(Text(fenced))
    summary = await run_once(workspace, roles=["qa"])
    assert (summary.handled, summary.failed, summary.prompts_sent) == (1, 0, 1)
    assert [p.answer_read for p in summary.prompts] == ["extracted"]
    assert read_record(workspace, "req-1")["status"] == "completed"
    assert not workspace.attempts_folder("req-1").exists()  # nothing was rejected


@pytest.mark.anyio
async def test_a_rejected_answer_s_attempt_file_says_how_it_was_read(
    openai_workspace: Any, seed: Any, read_record: Any, run_once: Any,
    openai_server: FakeOpenAIServer,
) -> None:  # fmt: skip
    workspace = openai_workspace()
    seed(workspace, "req-1", "qa", events=5)
    wrong = answer_for("qa", "req-1") | {"status": "done"}
    openai_server.then(Text("```json\n" + json.dumps(wrong) + "\n```"), Text("no json here"))
    summary = await run_once(workspace, roles=["qa"])
    assert [p.answer_read for p in summary.prompts] == ["extracted", None, "as_is"]
    kept = sorted(workspace.attempts_folder("req-1").iterdir())
    assert [json.loads(path.read_text())["answer_read"] for path in kept] == ["extracted", None]
    assert read_record(workspace, "req-1")["status"] == "completed"
