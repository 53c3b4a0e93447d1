"""Selection under a token budget (``policy.budget``): the projection as it is when it fits,
else events left out whole by the written priorities, the notice saying so, and
``PromptTooLarge`` only when no event can go and it still does not fit."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from teams_runtime import PromptContextConfig, project_request
from teams_runtime.codecs.envelopes import MessageEnvelope
from teams_runtime.codecs.projection_reply import BudgetNote
from teams_runtime.demo import sample_record
from teams_runtime.exceptions import PromptTooLarge
from teams_runtime.policy.budget import (
    Budget,
    FixedTokens,
    exceeded_advice,
    fit_prompt,
    prompt_too_large,
    rate_tokens,
)
from teams_runtime.policy.prompts import PromptBundle, build_prompt
from teams_runtime.policy.token_counts import DEFAULT_RATE, TokenRate

from ..support.strategies import configs, events, record

ENVELOPE = MessageEnvelope(request_id="req-1", sender="planner", target="qa", scope="budget")
NOTICE_KEYS = [
    "compacted",
    "total_events",
    "included_events",
    "omitted_events",
    "recent_events",
    "max_events",
    "selection",
    "canonical_request",
]


def _bundle(source: dict[str, Any], config: PromptContextConfig | None = None) -> PromptBundle:
    projection = project_request(source, config or PromptContextConfig())
    return build_prompt("task", role="qa", projection=projection, envelope=ENVELOPE)


def _fit(bundle: PromptBundle, tokens: int, rate: TokenRate = DEFAULT_RATE) -> PromptBundle:
    fitted = fit_prompt(bundle, Budget(tokens=tokens), rate_tokens(bundle, rate))
    assert fitted.estimate <= tokens
    return fitted.bundle


def _tokens(bundle: PromptBundle, rate: TokenRate = DEFAULT_RATE) -> int:
    return rate.tokens(len(bundle.text().encode()))


def _notice(text: str) -> dict[str, Any]:
    block = text.split("Current request event-history projection:\n", 1)[1]
    found: dict[str, Any] = json.loads(block.split("\nThe `events` array", 1)[0])
    return found


def _padded(events: int, size: int = 600) -> dict[str, Any]:
    source = sample_record(events, "req-1")
    for index, event in enumerate(source["events"]):
        event["summary"] = f"event {index} " + "x" * size
    return source


@pytest.mark.parametrize(
    "source",
    [
        pytest.param(sample_record(40, "req-1"), id="compacted"),
        pytest.param(sample_record(5, "req-1"), id="short"),
        pytest.param({**sample_record(3, "req-1"), "scope": "Ünïcødé scope ✓"}, id="non-ascii"),
        pytest.param({"request_id": "req-1", "events": "not a list"}, id="events-not-a-list"),
    ],
)
def test_the_sizes_add_up_to_the_prompt_or_a_few_bytes_more(source: dict[str, Any]) -> None:
    bundle = _bundle(source)
    sizes = bundle.sizes()
    parts = sizes.brief + sizes.record + sizes.envelope + sizes.notice + sum(sizes.events)
    assert 0 <= parts - len(bundle.text().encode()) <= 16


def test_a_prompt_that_fits_is_the_same_prompt() -> None:
    bundle = _bundle(sample_record(40, "req-1"))
    fitted = _fit(bundle, _tokens(bundle) + 40)
    assert fitted is bundle
    assert fitted.projection.budget is None


def test_over_the_budget_the_oldest_go_first_and_the_notice_says_so() -> None:
    bundle = _bundle(_padded(40))
    whole = _tokens(bundle)
    fitted = _fit(bundle, whole * 2 // 3)
    projection = fitted.projection
    kept = projection.selected_indices
    before = bundle.projection.selected_indices
    assert 0 < len(kept) < len(before)
    assert kept == before[-len(kept) :]  # the newest stay: what goes is the oldest end
    assert {item.index for item in projection.backfilled} <= set(kept)
    notice = _notice(fitted.text())
    assert list(notice) == [*NOTICE_KEYS, "max_prompt_tokens", "prompt_tokens_estimate"]
    assert notice["included_events"] == len(kept)
    assert notice["omitted_events"] == 40 - len(kept)
    assert notice["max_prompt_tokens"] == whole * 2 // 3
    assert _tokens(fitted) <= notice["prompt_tokens_estimate"] <= whole * 2 // 3
    shown = fitted.text().split("Current request:\n", 1)[1].split("\n\nIncoming")[0]
    assert json.loads(shown)["events"] == bundle.projection.record["events"][-len(kept) :]


def test_a_budget_also_bounds_a_history_compaction_keeps_whole() -> None:
    bundle = _bundle(_padded(12), PromptContextConfig(enabled=False))
    assert not bundle.projection.compacted
    fitted = _fit(bundle, _tokens(bundle) // 2)
    assert fitted.projection.compacted and fitted.projection.budget is not None
    assert (
        fitted.projection.selected_indices == tuple(range(12))[-fitted.projection.included_events :]
    )
    assert _tokens(fitted) <= _tokens(bundle) // 2


def test_an_event_too_large_alone_is_named_and_the_older_ones_still_go_in() -> None:
    source = _padded(6, size=200)
    source["events"][4]["summary"] = "huge " + "y" * 40_000
    bundle = _bundle(source)
    budget = _tokens(_bundle(_padded(6, size=200))) + 400
    fitted = _fit(bundle, budget)
    projection = fitted.projection
    assert 4 not in projection.selected_indices
    assert projection.selected_indices == (0, 1, 2, 3, 5)
    notice = _notice(fitted.text())
    (oversized,) = notice["oversized_events"]
    assert oversized["index"] == 4 and oversized["tokens"] > budget // 2
    assert list(notice)[-1] == "oversized_events"
    assert _tokens(fitted) <= budget


def test_the_notice_stays_content_free_when_the_budget_decides() -> None:
    source = _padded(30)
    source["events"][-1]["summary"] = "SECRET-" + "z" * 30_000
    fitted = _fit(_bundle(source), 3_000)
    notice = fitted.notice
    assert "SECRET" not in notice and "zzzz" not in notice


def test_no_room_even_without_events_fails_naming_each_part() -> None:
    bundle = _bundle(sample_record(20, "req-1"))
    with pytest.raises(PromptTooLarge) as caught:
        fit_prompt(
            bundle,
            Budget(tokens=300, setting="roles.qa.prompt_context.max_prompt_tokens", window=512),
            rate_tokens(bundle, DEFAULT_RATE),
        )
    reason = str(caught.value)
    assert reason.startswith(
        "the prompt cannot fit its budget of 300 tokens "
        "(roles.qa.prompt_context.max_prompt_tokens) even without any event: its brief"
    )
    assert "its window is 512 tokens" in reason
    for part in ("the request's other fields", "the envelope", "the notice"):
        assert part in reason
    assert reason.endswith("or a shorter request (its result, scope or body).")


def test_the_reason_names_only_the_parts_there_are_and_what_helps_this_budget() -> None:
    fixed = FixedTokens(brief=8, record=290, envelope=0, instructions=False)
    reason = prompt_too_large(fixed, 1, 1, "--max-prompt-tokens")
    assert reason == (
        "the prompt cannot fit its budget of 1 token (--max-prompt-tokens) even without any "
        "event: the lines around the record take about 8 tokens, the request's other fields "
        "290, the notice 1 (299 in all). What would help: a larger budget "
        "(--max-prompt-tokens), or a shorter request (its result, scope or body)."
    )
    assert "llama" not in reason  # a written budget is mended where it is written


@settings(max_examples=150, deadline=None)
@given(
    history=events,
    config=configs(),
    share=st.floats(min_value=0.05, max_value=1.2),
    rate=st.sampled_from([DEFAULT_RATE, TokenRate(0.31, "learned"), TokenRate(1.0, "server")]),
)
def test_under_any_budget_the_prompt_fits_or_fails_and_events_stay_whole(
    history: list[Any], config: PromptContextConfig, share: float, rate: TokenRate
) -> None:
    bundle = _bundle(record(history), config)
    budget = max(1, int(_tokens(bundle, rate) * share))
    try:
        fitted = _fit(bundle, budget, rate)
    except PromptTooLarge:
        # Failing means the prompt without any event, and a notice saying so, was over it
        # (give or take the parts' rounding).
        nothing = msgspec.structs.replace(
            bundle.projection,
            selected_indices=(),
            backfilled=(),
            fields={**bundle.projection.fields, "events": b"[]"},
            event_sizes=(),
            budget=BudgetNote(max_prompt_tokens=budget, prompt_tokens_estimate=budget),
        )
        assert _tokens(bundle.with_projection(nothing), rate) + rate.tokens(24) + 4 > budget
        return
    assert _tokens(fitted, rate) <= budget
    before = bundle.projection.selected_indices
    kept = fitted.projection.selected_indices
    if fitted is bundle:
        return
    assert set(kept) <= set(before) and list(kept) == sorted(kept)
    oversized = {item.index for item in fitted.projection.budget.oversized}  # type: ignore[union-attr]
    dropped = [i for i in before if i not in kept and i not in oversized]
    assert all(i < min(kept, default=len(history)) for i in dropped)  # oldest first
    chosen = bundle.projection.record["events"]
    by_index = dict(zip(before, chosen, strict=True)) if isinstance(chosen, list) else {}
    assert fitted.projection.record["events"] == [by_index[i] for i in kept]


def test_the_advice_for_a_prompt_past_a_servers_context_fits_the_request() -> None:
    short = exceeded_advice(project_request(sample_record(2, "req-1")))
    assert "max_events" not in short  # two events: fewer would not help
    assert short.startswith("give the role a token budget (prompt_context.max_prompt_tokens")
    long = exceeded_advice(project_request(sample_record(30, "req-1")))
    assert ", lower prompt_context.max_events, or start the server" in long
