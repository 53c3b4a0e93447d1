"""The shared_prefix layout's selection: the tail moves in steps, so between re-anchors a new
event is appended to the selection; the spec's guarantees hold (the recent work, each missing
role's newest evidence, events whole, the notice true); the ContextActor's summary answers the
same, from a whole record, after appends, and from an index (or says it cannot)."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from teams_runtime.codecs.config import PromptContextConfig
from teams_runtime.codecs.evidence import history_evidence
from teams_runtime.codecs.request_records import decode_record, encode_json, encode_record
from teams_runtime.codecs.stored_records import IndexedParts
from teams_runtime.policy.digest import digest_from_fields, digest_from_parts
from teams_runtime.policy.projection import project_request, select_events, tail_start

from ..support.reference import reference_role, reference_select
from ..support.strategies import event, events, record, stepped_configs


def _roles(history: list[Any]) -> list[str | None]:
    return [reference_role(item) for item in history]


def _stepped(history: list[Any], config: PromptContextConfig) -> list[int]:
    roles = _roles(history)
    return list(select_events(len(history), roles.__getitem__, config).indices)


@settings(max_examples=300, deadline=None)
@given(history=events, config=stepped_configs())
def test_at_a_re_anchor_the_selection_is_upstreams_plus_what_came_since(
    history: list[Any], config: PromptContextConfig
) -> None:
    total, recent, maximum = len(history), config.recent_events, config.max_events
    selected = _stepped(history, config)
    if total <= maximum:
        assert selected == list(range(total))
        return
    start = tail_start(total, config)
    assert start % config.step == 0 and total - recent - config.step < start <= total - recent
    anchored = start + recent  # the moment the tail started here
    if anchored > maximum:  # then upstream compacted too: the same selection, and appends
        upstream = reference_select(history[:anchored], True, recent, maximum)
        assert upstream is not None
        assert selected == upstream + list(range(anchored, total))


@settings(max_examples=300, deadline=None)
@given(history=events, config=stepped_configs())
def test_the_selection_keeps_the_guarantees(
    history: list[Any], config: PromptContextConfig
) -> None:
    total, recent, maximum = len(history), config.recent_events, config.max_events
    selected = _stepped(history, config)
    assert selected == sorted(set(selected))
    assert min(total, recent) <= len(selected) <= maximum + config.step - 1
    assert selected[len(selected) - min(total, recent) :] == list(
        range(total - min(total, recent), total)
    )  # the recent work, always
    if total <= maximum:
        return
    roles = _roles(history)
    start = tail_start(total, config)
    in_tail = {role for role in roles[start:] if role}
    older = {role: i for i, role in enumerate(roles[:start]) if role}  # newest before the tail
    missing = {role: i for role, i in older.items() if role not in in_tail}
    if len(older) <= maximum - recent:  # room for every role: each missing one is there
        assert {missing[role] for role in missing} <= set(selected)


@settings(max_examples=200, deadline=None)
@given(history=events, more=st.lists(event, min_size=1, max_size=12), config=stepped_configs())
def test_between_re_anchors_the_events_only_append(
    history: list[Any], more: list[Any], config: PromptContextConfig
) -> None:
    before = _stepped(history, config)
    longer = history + more
    after = _stepped(longer, config)
    same_anchor = len(history) > config.max_events and tail_start(
        len(history), config
    ) == tail_start(len(longer), config)
    if same_anchor:
        assert after == before + list(range(len(history), len(longer)))


@settings(max_examples=150, deadline=None)
@given(history=events, config=stepped_configs())
def test_events_are_whole_and_the_notice_true(
    history: list[Any], config: PromptContextConfig
) -> None:
    projection = project_request(record(history), config)
    assert projection.record["events"] == [history[i] for i in projection.selected_indices]
    notice = projection.notice
    if not projection.compacted:
        assert notice == {}
        return
    assert notice["total_events"] == len(history)
    assert notice["included_events"] == len(projection.selected_indices)
    assert notice["omitted_events"] == len(history) - notice["included_events"]
    assert notice["step"] == config.step  # why more than max_events may be included


def _same(answer: Any, expected: Any) -> None:
    assert answer.selected_indices == expected.selected_indices
    assert answer.backfilled == expected.backfilled
    assert answer.notice == expected.notice
    assert answer.fields == expected.fields
    assert answer.event_sizes == expected.event_sizes


@settings(max_examples=150, deadline=None)
@given(
    history=events,
    config=stepped_configs(),
    batches=st.lists(st.lists(event, min_size=1, max_size=5), min_size=1, max_size=5),
)
def test_the_summary_answers_like_the_policy_before_and_after_appends(
    history: list[Any], config: PromptContextConfig, batches: list[list[Any]]
) -> None:
    current = record(history)
    summary = digest_from_fields(decode_record(encode_record(current), "r"), config)
    _same(summary.project(), project_request(encode_record(current), config))
    for batch in batches:
        summary.append([msgspec.Raw(msgspec.json.encode(item)) for item in batch], {})
        current = {**current, "events": [*current["events"], *batch]}
        assert summary.complete
        _same(summary.project(), project_request(encode_record(current), config))


def _parts(current: dict[str, Any], tail: int) -> IndexedParts:
    fields = decode_record(encode_record(current), "r")
    history: list[msgspec.Raw] = fields["events"]
    newest = history_evidence(encode_json(history)).newest if history else {}
    return IndexedParts(
        version=1,
        fields={**fields, "events": []},
        count=len(history),
        history_bytes=sum(map(len, history)),
        tail=history[len(history) - min(tail, len(history)) :],
        evidence={role: (index, history[index]) for role, index in newest.items()},
        source="r",
    )


@settings(max_examples=200, deadline=None)
@given(history=events, config=stepped_configs(), extra=st.integers(min_value=0, max_value=30))
def test_a_summary_of_an_index_answers_like_the_policy_or_says_it_cannot(
    history: list[Any], config: PromptContextConfig, extra: int
) -> None:
    keep = max(config.max_events, config.recent_events + config.step - 1)
    current = record(history)
    summary = digest_from_parts(_parts(current, keep + extra), config)
    if summary.complete:
        _same(summary.project(), project_request(encode_record(current), config))
    else:  # only when some role's evidence before the tail lies beyond the index's tail
        assert len(history) > keep + extra
        with pytest.raises(ValueError, match="needs the whole record"):
            summary.project()


def test_a_summary_of_an_index_too_short_for_a_role_says_so() -> None:
    # qa reports once, long ago; then reports again in the tail's growing part: its backfill is
    # the old report, which the index's tail (the last 10 events) does not reach.
    old = [{"type": "role_report", "actor": "qa", "payload": {"role": "qa"}}]
    filler = [{"type": "note"}] * 20
    new = [{"type": "role_report", "actor": "qa", "payload": {"role": "qa"}}]
    history = old + filler + [{"type": "note"}] * 8 + new
    config = PromptContextConfig(recent_events=8, max_events=9, layout="shared_prefix", step=4)
    current = record(history)
    assert not digest_from_parts(_parts(current, 10), config).complete
    whole = digest_from_fields(decode_record(encode_record(current), "r"), config)
    assert whole.complete and whole.project().selected_indices[0] == 0  # the old report
