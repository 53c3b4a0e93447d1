from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings

from teams_runtime import PromptContextConfig, project_request
from teams_runtime.codecs.envelopes import MessageEnvelope
from teams_runtime.demo import sample_record
from teams_runtime.policy.prompts import PROMPT_KINDS, PromptKind, build_prompt

from ..support.strategies import configs, events, record

pytestmark = pytest.mark.anyio

ENVELOPE = MessageEnvelope(request_id="req-1", sender="planner", target="qa", scope="Ünï scope")
NOTICE_END = (
    "Open `canonical_request` only when the current decision requires evidence missing from "
    "the selected events.\n\nCurrent request:\n"
)


def _prompt(kind: PromptKind, source: dict[str, Any], config: PromptContextConfig | None = None,
            role: str = "qa") -> Any:  # fmt: skip
    projection = project_request(source, config or PromptContextConfig())
    return build_prompt(
        kind,
        role=role,
        projection=projection,
        envelope=ENVELOPE,
        repairing="task" if kind == "repair" else None,
        errors=["`summary` is missing or empty."] if kind == "repair" else None,
        previous='{"status": "done-ish"}',
    )


def _record_json(text: str) -> dict[str, Any]:
    body = text.split("Current request:\n", 1)[1]
    body = body.split("\n\nIncoming envelope:\n", 1)[0]
    parsed: dict[str, Any] = json.loads(body)
    return parsed


@pytest.mark.parametrize("kind", PROMPT_KINDS)
def test_every_kind_has_its_sections_in_order(kind: PromptKind) -> None:
    role = {"research_decision": "research", "version_control": "version_controller"}.get(
        kind, "qa"
    )
    source = sample_record(60, "req-1")
    text = _prompt(kind, source, role=role).text()
    assert text.startswith(f"You are the {role} role inside teams_runtime.\n")
    assert NOTICE_END in text  # the notice stands right before `Current request:`
    assert text.index("Current request event-history projection:") < text.index(
        "Current request:\n"
    )
    if kind == "repair":
        assert "Your previous result was rejected by contract validation." in text
        assert text.index("Validation errors:\n- `summary`") < text.index(
            "Previous invalid payload:\n{"
        )
        assert "Incoming envelope:" not in text
    else:
        assert text.index("Current request:\n") < text.index("\n\nIncoming envelope:\n{")
        envelope = json.loads(text.split("Incoming envelope:\n", 1)[1])
        assert list(envelope) == [
            "request_id", "intent", "urgency", "scope", "artifacts", "params", "body",
        ]  # fmt: skip
        assert envelope["scope"] == "Ünï scope"
    if kind == "research_decision":
        assert '"research_query"' in text and "Local sources already checked:" in text
    if kind == "version_control":
        assert '"commit_status": "committed | no_changes | failed | no_repo"' in text
    if kind == "task":
        assert "Treat `Current request` as the source of truth" in text


def test_no_notice_when_nothing_is_omitted() -> None:
    text = _prompt("task", sample_record(10, "req-1")).text()
    assert "event-history projection" not in text
    assert len(_record_json(text)["events"]) == 10


async def test_chunks_stream_exactly_the_text() -> None:
    bundle = _prompt("task", sample_record(40, "req-1"))
    streamed = [chunk async for chunk in bundle.chunks()]
    assert len(streamed) > 10  # a chunk per field and per event, not one blob
    assert "".join(streamed) == bundle.text() == "".join(bundle.iter_chunks())
    assert bundle.chars() == len(bundle.text())


@settings(max_examples=150, deadline=None)
@given(history=events, config=configs())
def test_the_prompt_record_parses_back_to_the_selected_events(
    history: list[Any], config: PromptContextConfig
) -> None:
    source = record(history)
    bundle = _prompt("task", source, config)
    embedded = _record_json(bundle.text())
    selected = bundle.projection.selected_indices
    assert embedded["events"] == [history[i] for i in selected]
    assert {k: v for k, v in embedded.items() if k != "events"} == {
        k: v for k, v in source.items() if k != "events"
    }


def test_large_history_prompt_is_at_most_30_percent_of_full_history(
    large_history: dict[str, Any],
) -> None:
    source = large_history
    compacted = _prompt("task", source)
    full = _prompt("task", source, PromptContextConfig(enabled=False))
    ratio = compacted.chars() / full.chars()
    assert ratio <= 0.30, ratio
    assert len(_record_json(compacted.text())["events"]) <= 16
