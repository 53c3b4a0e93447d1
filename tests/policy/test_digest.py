"""The ContextActor's per-request summary: answers equal to the pure policy, before and after
appends, in memory that does not grow with the history."""

from __future__ import annotations

import gc
import tracemalloc
from typing import Any

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from teams_runtime.codecs.config import PromptContextConfig
from teams_runtime.codecs.projection_reply import Projection
from teams_runtime.codecs.request_records import decode_record, encode_record
from teams_runtime.demo import sample_record
from teams_runtime.policy.digest import digest_from_fields
from teams_runtime.policy.projection import project_request

from ..support.strategies import configs, event, events, record


def _same(answer: Projection, expected: Projection) -> None:
    assert answer.total_events == expected.total_events
    assert answer.selected_indices == expected.selected_indices
    assert answer.backfilled == expected.backfilled
    assert answer.notice == expected.notice
    assert answer.record == expected.record


@settings(max_examples=150, deadline=None)
@given(history=events, config=configs())
def test_a_summary_answers_like_the_policy(history: list[Any], config: PromptContextConfig) -> None:
    data = encode_record(record(history))
    summary = digest_from_fields(decode_record(data, "r"), config)
    assert summary.count == len(history)
    _same(summary.project(), project_request(data, config))


@settings(max_examples=150, deadline=None)
@given(
    history=events,
    config=configs(),
    batches=st.lists(st.lists(event, min_size=1, max_size=4), min_size=1, max_size=4),
    status=st.text(max_size=4),
)
def test_appends_keep_the_answers_equal(
    history: list[Any], config: PromptContextConfig, batches: list[list[Any]], status: str
) -> None:
    current = record(history)
    summary = digest_from_fields(decode_record(encode_record(current), "r"), config)
    for batch in batches:
        objects = [item if isinstance(item, dict) else {"value": item} for item in batch]
        summary.append([msgspec.Raw(msgspec.json.encode(o)) for o in objects], {"status": status})
        current = {**current, "status": status, "events": [*current["events"], *objects]}
        data = encode_record(current)
        _same(summary.project(), project_request(data, config))


def test_a_summary_of_a_non_list_history_passes_it_through() -> None:
    fields = decode_record(encode_record({"request_id": "r", "events": "oops"}), "r")
    answer = digest_from_fields(fields, PromptContextConfig()).project()
    assert (answer.total_events, answer.record["events"]) == (0, "oops")


def test_memory_of_a_summary_is_flat_in_history_length() -> None:
    def retained(events: int) -> int:
        tracemalloc.start()
        try:
            data = encode_record(sample_record(events, "req-1"))
            fields = decode_record(data, "x")
            summary = digest_from_fields(fields, PromptContextConfig())
            del data, fields
            gc.collect()
            kept = tracemalloc.get_traced_memory()[0]
        finally:
            tracemalloc.stop()
        assert summary.count == events
        return kept

    small, large = retained(1_000), retained(20_000)
    assert large < 1.2 * small  # a pinned file buffer alone would be ~20x
