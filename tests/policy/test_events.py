"""Every event the runtime appends is built in one place (``policy.events``): each type of the
union has its builder, and no other module of the package lays an event out by hand."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import get_args

import msgspec

from teams_runtime.codecs.envelopes import MessageEnvelope
from teams_runtime.codecs.events import Event, event_json, event_type
from teams_runtime.codecs.model import RoleResult
from teams_runtime.policy import events

ROOT = Path(__file__).resolve().parents[2]
NOW = "2026-11-30T09:00:00+01:00"
RESULT = RoleResult(request_id="r", role="qa", status="completed", summary="done")
ENVELOPE = MessageEnvelope(request_id="r", sender="user", target="qa", envelope_id="env-2")


def _every_event() -> list[Event]:
    return [
        events.created(NOW, "orchestrator"),
        events.handed_on(NOW, "planner", "developer"),
        events.handed_on(NOW, "developer", "version_controller", commit=True),
        events.report(NOW, "qa", RESULT),
        events.report(NOW, "version_controller", RESULT, committed=True),
        events.hop_limit(NOW, "qa", "developer", hops=3, max_hops=3),
        events.cancelled(NOW),
        events.model_failed(NOW, "qa", "exit status 1"),
        events.answer_timed_out(NOW, "qa", 90.0),
        events.reopened(NOW, "completed"),
        events.retried(NOW, ENVELOPE, "env-1"),
        events.retry_not_queued(NOW, "qa"),
        events.stale_outcome(NOW, "qa", ENVELOPE, 1, 2),
    ]


def test_every_event_type_has_a_builder() -> None:
    built = {event_type(event) for event in _every_event()}
    assert built == {str(cls.__struct_config__.tag) for cls in get_args(Event)}


def test_the_builders_write_what_records_have_always_held() -> None:
    written = {event_type(event): event_json(event) for event in _every_event()}
    assert written["delegated"] == {
        "timestamp": NOW,
        "type": "delegated",
        "actor": "planner",
        "summary": "planner handed the request to developer",
        "payload": {"from_role": "planner", "to_role": "developer"},
    }
    assert written["created"] == {
        "timestamp": NOW, "type": "created", "actor": "orchestrator", "summary": "request created"
    }  # fmt: skip
    assert written["reopened"]["payload"] == {"from_status": "completed"}
    assert written["reopened"]["summary"] == "the request was reopened (it was completed)"
    retried = written["retried"]["payload"]
    assert retried == {"role": "qa", "envelope_id": "env-2", "retries_envelope": "env-1",
                       "envelope": retried["envelope"]}  # fmt: skip
    assert msgspec.convert(retried["envelope"], MessageEnvelope) == ENVELOPE  # whole, to put again
    assert written["answer_timed_out"]["summary"] == "no answer came for the qa role within 90 s"
    assert "payload" not in written["retry_not_queued"]
    assert [list(event) for event in written.values()] == [
        ["timestamp", "type", "actor", "summary", *(["payload"] if "payload" in event else [])]
        for event in written.values()
    ]


# Where an event-shaped object is laid out and it is no hand-made event of the runtime's: a
# typed event written (`event_json`), the demo's made-up histories, and the event a user
# writes with `teams-runtime append`.
NOT_BY_HAND = {"codecs/events.py", "demo.py", "cli/_requests.py"}


def test_no_module_lays_an_event_out_by_hand() -> None:
    by_hand = []
    for path in sorted(ROOT.rglob("*.py")):
        relative = path.relative_to(ROOT).as_posix()
        if relative.split("/")[0] in {"tests", "build"} or relative in NOT_BY_HAND:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Dict):
                keys = {key.value for key in node.keys if isinstance(key, ast.Constant)}
                if {"type", "summary"} <= keys:
                    by_hand.append(f"{relative}:{node.lineno}")
    assert by_hand == []
