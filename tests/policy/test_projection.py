from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings

from teams_runtime import (
    Backfill,
    PromptContextConfig,
    RecordError,
    notice_text,
    project_request,
)

from ..support.reference import reference_role, reference_select
from ..support.strategies import configs, events, record

WORKED = PromptContextConfig(recent_events=4, max_events=7)


def test_worked_example_selects_exactly_the_spec_events(worked_example: dict[str, Any]) -> None:
    projection = project_request(worked_example, WORKED)
    stamps = [event["timestamp"] for event in projection.record["events"]]
    assert stamps == ["T05", "T06", "T08", "T09", "T10", "T11", "T12"]
    assert (projection.total_events, projection.included_events, projection.omitted_events) == (
        12,
        7,
        5,
    )
    assert projection.compacted
    assert projection.backfilled == (
        Backfill(4, "designer"),
        Backfill(5, "planner"),
        Backfill(7, "developer"),
    )


def test_worked_example_notice_has_exact_keys_and_order(worked_example: dict[str, Any]) -> None:
    notice = project_request(worked_example, WORKED).notice
    assert list(notice.items()) == [
        ("compacted", True),
        ("total_events", 12),
        ("included_events", 7),
        ("omitted_events", 5),
        ("recent_events", 4),
        ("max_events", 7),
        ("selection", "recent_tail_plus_latest_role_evidence"),
        ("canonical_request", "./.teams_runtime/requests/request-123.json"),
    ]


def test_notice_text_is_exactly_the_spec_block(worked_example: dict[str, Any]) -> None:
    text = notice_text(project_request(worked_example, WORKED))
    assert text == (
        "Current request event-history projection:\n"
        "{\n"
        '  "compacted": true,\n'
        '  "total_events": 12,\n'
        '  "included_events": 7,\n'
        '  "omitted_events": 5,\n'
        '  "recent_events": 4,\n'
        '  "max_events": 7,\n'
        '  "selection": "recent_tail_plus_latest_role_evidence",\n'
        '  "canonical_request": "./.teams_runtime/requests/request-123.json"\n'
        "}\n"
        "The `events` array below contains complete selected events, not summaries.\n"
        "Omitted events still exist in the canonical request and must not be treated as events "
        "that never happened.\n"
        "Open `canonical_request` only when the current decision requires evidence missing "
        "from the selected events."
    )


def test_notice_without_request_id_has_empty_canonical_request(
    worked_example: dict[str, Any],
) -> None:
    source = worked_example
    del source["request_id"]
    assert project_request(source, WORKED).notice["canonical_request"] == ""


def test_notice_never_points_outside_the_store_for_an_unsafe_id(
    worked_example: dict[str, Any],
) -> None:
    source = worked_example
    source["request_id"] = "../../etc/passwd"
    assert project_request(source, WORKED).notice["canonical_request"] == ""


@pytest.mark.parametrize(
    ("total", "compacted"),
    [
        pytest.param(16, False, id="equal-to-max-not-compacted"),
        pytest.param(17, True, id="one-more-than-max-compacted"),
    ],
)
def test_compaction_needs_strictly_more_than_max_events(
    total: int, compacted: bool, make_event: Callable[[int, str, str], dict[str, Any]]
) -> None:
    source = record([make_event(n, "delegated", "orchestrator") for n in range(total)])
    projection = project_request(source)
    assert projection.compacted is compacted
    assert bool(notice_text(projection)) is compacted
    assert projection.included_events == (total if not compacted else 8)


def test_disabled_keeps_every_event_and_has_no_notice(worked_example: dict[str, Any]) -> None:
    source = worked_example
    projection = project_request(source, PromptContextConfig(enabled=False))
    assert projection.record["events"] == source["events"]
    assert projection.notice == {}
    assert notice_text(projection) == ""


def test_recent_equal_to_max_is_recent_only(worked_example: dict[str, Any]) -> None:
    projection = project_request(worked_example, PromptContextConfig(recent_events=4, max_events=4))
    assert projection.selected_indices == (8, 9, 10, 11)
    assert projection.backfilled == ()


@pytest.mark.parametrize(
    "value",
    [
        pytest.param(None, id="null"),
        pytest.param("events", id="string"),
        pytest.param({"0": {}}, id="object"),
        pytest.param(3, id="number"),
    ],
)
def test_non_list_events_pass_through(value: Any) -> None:
    source = {"request_id": "r", "events": value, "extra": [1]}
    projection = project_request(source, PromptContextConfig(recent_events=1, max_events=1))
    assert projection.record == source
    assert (projection.total_events, projection.included_events, projection.omitted_events) == (
        0,
        0,
        0,
    )
    assert not projection.compacted


def test_missing_events_pass_through() -> None:
    source = {"request_id": "r"}
    projection = project_request(source)
    assert projection.record == source
    assert projection.total_events == 0


def test_tail_keeps_any_shape_and_backfill_ignores_non_objects(
    make_event: Callable[[int, str, str], dict[str, Any]],
) -> None:
    history: list[Any] = [
        make_event(0, "role_report", "planner"),
        "a string event",
        42,
        None,
        {"type": "role_report"},  # evidence without identity: does not count
        {"payload": "not an object", "actor": "qa", "type": "note"},
        ["list"],
        "tail string",
        7,
    ]
    projection = project_request(
        record(history), PromptContextConfig(recent_events=2, max_events=4)
    )
    assert projection.record["events"] == [history[0], "tail string", 7]
    assert projection.backfilled == (Backfill(0, "planner"),)


def test_legacy_event_type_and_payload_evidence_count() -> None:
    history = [
        {"event_type": " Role_Report ", "actor": "Designer", "summary": "legacy"},
        {
            "type": "version_control_completed",
            "actor": "orchestrator",
            "payload": {"role": "version_controller", "status": "committed"},
        },
        {"type": "note", "payload": {"role": "qa", "status": ""}},  # empty status: not evidence
        {"type": "delegated", "actor": "x"},
        {"type": "delegated", "actor": "y"},
    ]
    projection = project_request(
        record(history), PromptContextConfig(recent_events=2, max_events=4)
    )
    assert projection.backfilled == (Backfill(0, "designer"), Backfill(1, "version_controller"))


def test_payload_role_wins_over_actor() -> None:
    history = [
        {
            "type": "role_report",
            "actor": "orchestrator",
            "payload": {"role": " QA ", "status": "x"},
        },
        {"type": "role_report", "actor": "qa", "payload": {"status": "done"}},
        {"type": "delegated"},
        {"type": "delegated"},
    ]
    projection = project_request(
        record(history), PromptContextConfig(recent_events=2, max_events=3)
    )
    # Event 1 is qa evidence (actor), event 0 too (payload.role): only the newest qa is backfilled.
    assert projection.backfilled == (Backfill(1, "qa"),)


def test_other_keys_and_unicode_are_kept(worked_example: dict[str, Any]) -> None:
    source = worked_example
    source["scope"] = "Ünïcode scope — 日本語"
    source["unknown_key"] = {"nested": [1, 2.5, None, True], "ß": "ok"}
    source["params"] = {"workflow": {"phase": "qa"}}
    before = copy.deepcopy(source)
    projection = project_request(source, WORKED)
    assert source == before  # never mutated
    projected = projection.record
    assert list(projected) == list(source)
    for key in source:
        if key != "events":
            assert projected[key] == source[key]
    text = b"".join(projection.iter_record_json()).decode()
    assert "Ünïcode scope — 日本語" in text  # non-ASCII kept as is
    assert json.loads(text) == projected


def test_bytes_and_mapping_inputs_agree(worked_example: dict[str, Any]) -> None:
    source = worked_example
    from_bytes = project_request(json.dumps(source, indent=2).encode(), WORKED)
    from_mapping = project_request(source, WORKED)
    assert from_bytes.record == from_mapping.record
    assert from_bytes.selected_indices == from_mapping.selected_indices
    assert from_bytes.notice == from_mapping.notice


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(b'{"events": [', id="torn"),
        pytest.param(b"[1, 2]", id="array"),
        pytest.param(b"3", id="scalar"),
        pytest.param(b'{"a": "\xff"}', id="invalid-utf8"),
        pytest.param(b"", id="empty"),
    ],
)
def test_bad_bytes_are_record_errors(data: bytes) -> None:
    with pytest.raises(RecordError, match=r"^request record: "):
        project_request(data)


def test_rendered_record_equals_json_dumps_indent_2(worked_example: dict[str, Any]) -> None:
    source = worked_example
    source["empty_list"] = []
    source["empty_obj"] = {}
    source["events"].append({"type": "x", "payload": {"deep": [[], {}, [1, [2, {"a": None}]]]}})
    projection = project_request(source, PromptContextConfig(enabled=False))
    rendered = b"".join(projection.iter_record_json()).decode()
    assert rendered == json.dumps(source, indent=2, ensure_ascii=False)


@settings(max_examples=400, deadline=None)
@given(history=events, config=configs())
def test_equals_the_plain_reference(history: list[Any], config: PromptContextConfig) -> None:
    projection = project_request(record(history), config)
    expected = reference_select(history, config.enabled, config.recent_events, config.max_events)
    assert expected is not None
    assert list(projection.selected_indices) == expected
    assert projection.record["events"] == [history[i] for i in expected]


@settings(max_examples=300, deadline=None)
@given(history=events, config=configs())
def test_invariants(history: list[Any], config: PromptContextConfig) -> None:
    source = record(history)
    before = copy.deepcopy(source)
    projection = project_request(source, config)
    assert source == before
    selected = projection.selected_indices
    assert list(selected) == sorted(set(selected))  # chronological, no duplicates
    total = len(history)
    assert projection.included_events + projection.omitted_events == total
    if projection.compacted:
        assert config.recent_events <= projection.included_events <= config.max_events
        assert selected[-config.recent_events :] == tuple(
            range(total - config.recent_events, total)
        )
        roles = [item.role for item in projection.backfilled]
        assert len(roles) == len(set(roles))  # at most one backfill per role
        tail_roles = {reference_role(history[i]) for i in selected[-config.recent_events :]}
        assert not tail_roles & set(roles)
        for item in projection.backfilled:  # the newest evidence of that role wins
            newer = range(item.index + 1, total)
            assert all(reference_role(history[i]) != item.role for i in newer)
        assert notice_text(projection).startswith("Current request event-history projection:\n")
    else:
        assert selected == tuple(range(total))
        assert notice_text(projection) == ""
    # Selected events are the originals, unchanged.
    assert projection.record["events"] == [history[i] for i in selected]


@settings(max_examples=200, deadline=None)
@given(history=events, config=configs())
def test_bytes_path_equals_reference(history: list[Any], config: PromptContextConfig) -> None:
    data = json.dumps(record(history), ensure_ascii=False).encode()
    projection = project_request(data, config)
    assert list(projection.selected_indices) == reference_select(
        history, config.enabled, config.recent_events, config.max_events
    )
