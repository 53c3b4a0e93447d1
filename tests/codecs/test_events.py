"""The events the runtime writes: the spec's key order on disk, a payload only when there is
one, and every event decodable back into the tagged union (what a record holds is what the
union says)."""

from __future__ import annotations

from typing import get_args

import msgspec

from teams_runtime.codecs.envelopes import MessageEnvelope
from teams_runtime.codecs.events import (
    CancelledEvent,
    Event,
    RecordUpdates,
    RoleReportEvent,
    event_json,
    event_type,
    updates_json,
)
from teams_runtime.codecs.model import RoleResult, result_json, validate_reply
from teams_runtime.codecs.request_records import encode_event

NOW = "2026-11-30T09:00:00+01:00"


def test_an_event_is_written_in_the_specs_key_order_not_tag_first() -> None:
    event = CancelledEvent(timestamp=NOW, actor="user", summary="the request was cancelled")
    assert msgspec.json.encode(event).startswith(b'{"type":')  # msgspec's own order
    assert bytes(encode_event(event_json(event))) == (
        b'{"timestamp":"2026-11-30T09:00:00+01:00","type":"cancelled","actor":"user",'
        b'"summary":"the request was cancelled"}'
    )


def test_a_report_carries_the_result_as_its_answer_laid_it_out() -> None:
    text = '{"summary": "s", "zeta": [1], "status": "completed", "role": "qa", "request_id": "r"}'
    result = validate_reply(text, kind="task", request_id="r", role="qa").answer
    assert isinstance(result, RoleResult)
    written = event_json(RoleReportEvent(timestamp=NOW, actor="qa", summary="s", payload=result))
    assert list(written) == ["timestamp", "type", "actor", "summary", "payload"]
    assert written["payload"] == result_json(result)
    assert list(written["payload"]) == [
        *("insights", "proposals", "artifacts", "error"),  # the defaults the answer left out
        *("summary", "zeta", "status", "role", "request_id", "next_role"),
    ]


def test_every_event_type_decodes_back_into_the_union() -> None:
    tags = {str(cls.__struct_config__.tag) for cls in get_args(Event)}
    assert len(tags) == len(get_args(Event))  # one class per type
    event = RoleReportEvent(
        timestamp=NOW,
        actor="qa",
        summary="s",
        payload=RoleResult(request_id="r", role="qa", status="completed", summary="s"),
    )
    data = msgspec.json.encode(event_json(event))
    assert msgspec.json.decode(data, type=Event) == event
    assert event_type(event) == "role_report"


def test_field_updates_are_written_as_the_record_holds_them() -> None:
    result = RoleResult(request_id="r", role="qa", status="failed", summary="s", extra={"x": 1})
    envelope = MessageEnvelope(request_id="r", sender="u", target="qa", traceparent="00-ab")
    updates = RecordUpdates(result=result, status="failed", failed_envelope=envelope)
    written = updates_json(updates)
    assert list(written) == ["result", "status", "failed_envelope"]  # in the order set
    assert written["result"] == result_json(result) and written["result"]["x"] == 1
    assert "traceparent" not in written["failed_envelope"]  # the queuing run's, not kept
    assert updates_json(RecordUpdates(failed_envelope=None)) == {"failed_envelope": None}
