"""The replay's parts: the prefix a prompt cache could serve (with its lifetime), the
projection at a hop (equal to the policy's own), evidence kept, the policies by name, and a
budget's overflows."""

from __future__ import annotations

import msgspec
import pytest

from teams_runtime.codecs.config import PromptContextConfig, TeamConfig
from teams_runtime.codecs.prompt_records import PromptRecord
from teams_runtime.codecs.request_records import encode_json
from teams_runtime.demo import sample_record
from teams_runtime.monitoring.replay import (
    Layout,
    PrefixCache,
    ReplaySetup,
    RequestView,
    common_prefix,
    parse_policy,
    replay,
)
from teams_runtime.policy.projection import project_fields
from teams_runtime.policy.token_counts import LearnedRatios

# --- the prefix a cache could serve ----------------------------------------------------------


def _plain_prefix(first: str, second: str) -> int:
    """The common prefix's length, a character at a time."""
    length = 0
    for mine, theirs in zip(first, second, strict=False):
        if mine != theirs:
            break
        length += 1
    return length


@pytest.mark.parametrize(
    ("first", "second"),
    [
        pytest.param("", "abc", id="empty"),
        pytest.param("abc", "abc", id="equal"),
        pytest.param("abcdef", "abcxyz", id="short"),
        pytest.param("a" * 10_000 + "b", "a" * 10_000 + "c", id="past-a-block"),
        pytest.param("x" * 4096, "x" * 4096 + "tail", id="one-a-prefix-at-a-block-edge"),
        pytest.param("é" * 5000 + "1", "é" * 5000 + "2", id="not-ascii"),
    ],
)
def test_common_prefix_is_the_plain_one(first: str, second: str) -> None:
    assert common_prefix(first, second) == _plain_prefix(first, second)
    assert common_prefix(second, first) == common_prefix(first, second)


def test_a_cache_serves_the_longest_prefix_of_any_prompt_alive_on_its_server() -> None:
    cache = PrefixCache(ttl=300)
    assert cache.send("s", "qa", 0, "HEAD one two three") == (0, 0)
    assert cache.send("s", "dev", 10, "HEAD one zzz") == (9, 0)  # another role's
    assert cache.send("s", "qa", 20, "HEAD one two four") == (13, 13)  # its own: longer
    assert cache.send("other", "qa", 30, "HEAD one two three") == (0, 0)  # another server


def test_a_prompt_lives_in_the_cache_for_its_lifetime_only() -> None:
    cache = PrefixCache(ttl=60)
    cache.send("s", "qa", 0, "shared prefix A")
    assert cache.send("s", "qa", 60, "shared prefix B").any_role == 14  # at 60 s: alive
    assert cache.send("s", "qa", 119, "shared prefix C").any_role == 14  # B's, sent at 60
    assert cache.send("s", "qa", 300, "shared prefix D").any_role == 0  # all gone
    assert PrefixCache(ttl=0).send("s", "qa", 0, "x") == (0, 0)


def test_identical_prompts_are_served_whole() -> None:
    cache = PrefixCache(ttl=10)
    cache.send("s", "qa", 0, "the same prompt")
    assert cache.send("s", "qa", 1, "the same prompt") == (15, 15)


# --- the projection at a hop -----------------------------------------------------------------

_RECORD = sample_record(60, "req-view")
_ODD = {
    "request_id": "req-odd",
    "result": {"summary": "ünïcode"},
    "events": [
        {"type": "role_report", "payload": {"role": "qa", "status": "completed", "n": "é"}},
        7,
        "a string event",
        {"type": "created", "actor": "orchestrator"},
        {"type": "note", "event_type": "role_report", "actor": "planner"},
        {
            "type": "role_report",
            "actor": "designer",
            "payload": {"role": "designer", "status": "x"},
        },
    ]
    * 5,
}


@pytest.mark.parametrize(
    "config",
    [
        pytest.param(PromptContextConfig(), id="defaults"),
        pytest.param(PromptContextConfig(enabled=False), id="full"),
        pytest.param(PromptContextConfig(recent_events=4, max_events=4), id="recent-only"),
        pytest.param(PromptContextConfig(recent_events=2, max_events=9), id="2-9"),
        pytest.param(PromptContextConfig(layout="shared_prefix"), id="shared-prefix"),
        pytest.param(
            PromptContextConfig(recent_events=3, max_events=5, layout="shared_prefix", step=4),
            id="shared-prefix-3-5-step-4",
        ),
    ],
)
@pytest.mark.parametrize("record", [_RECORD, _ODD], ids=["sample", "odd"])
def test_the_projection_at_a_hop_is_the_policys_own(
    record: dict[str, object], config: PromptContextConfig
) -> None:
    data = encode_json(record)
    view = RequestView("req", data)
    events = record["events"]
    assert isinstance(events, list)
    for total in sorted({0, 1, 5, 16, 17, len(events) // 2, len(events)}):
        cut = {**record, "events": events[:total]}
        # Compact bytes, as another program writes a record: the sizes still agree.
        expected = project_fields(msgspec.json.decode(encode_json(cut)), config)
        ours = view.projection(total, config)
        assert ours.selected_indices == expected.selected_indices
        assert ours.backfilled == expected.backfilled
        assert ours.fields == {
            k: encode_json(msgspec.json.decode(v)) for k, v in expected.fields.items()
        }
        assert ours.event_sizes == expected.event_sizes
        assert ours.notice == expected.notice


def test_newest_evidence_is_each_roles_last_report_before_the_hop() -> None:
    view = RequestView("req-odd", encode_json(_ODD))
    assert view.newest_evidence(0) == {}
    assert view.newest_evidence(1) == {"qa": 0}
    assert view.newest_evidence(6) == {"qa": 0, "planner": 4, "designer": 5}
    assert view.newest_evidence(8) == {"qa": 6, "planner": 4, "designer": 5}


# --- policies by name ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "name", "kind"),
    [
        ("configured", "configured", "configured"),
        ("recent_only", "recent_only", "recent_only"),
        ("full", "full", "full"),
        ("recorded", "recorded", "recorded"),
        ("max_prompt_tokens:4096", "max_prompt_tokens:4096", "budget"),
        ("4/12", "4/12", "events"),
        ("8/8", "8/8", "events"),
    ],
)
def test_policies_by_their_names(text: str, name: str, kind: str) -> None:
    policy = parse_policy(text)
    assert (policy.name, policy.kind) == (name, kind)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        pytest.param("fulll", "unknown policy 'fulll'", id="unknown"),
        pytest.param("12/4", "'12/4': must have R <= M", id="r-over-m"),
        pytest.param("0/4", "'0/4': must be a positive integer", id="zero"),
        pytest.param("max_prompt_tokens:0", "N must be from 1 to", id="no-tokens"),
        pytest.param("max_prompt_tokens:", "unknown policy", id="no-number"),
        pytest.param("4/", "unknown policy", id="half-a-pair"),
    ],
)
def test_a_bad_policy_says_the_valid_forms(text: str, says: str) -> None:
    with pytest.raises(ValueError, match="valid policies: configured, recent_only, full") as got:
        parse_policy(text)
    assert says in str(got.value)


def test_policies_project_as_they_say() -> None:
    config = TeamConfig()
    record = _call("req", 10)
    assert parse_policy("full").context_for(config, record).enabled is False
    recent = parse_policy("recent_only").context_for(config, record)
    assert (recent.recent_events, recent.max_events) == (8, 8)
    pair = parse_policy("3/5").context_for(config, record)
    assert (pair.enabled, pair.recent_events, pair.max_events) == (True, 3, 5)
    budget = parse_policy("max_prompt_tokens:900").budget_for(config, record)
    assert budget is not None and budget.tokens == 900
    assert parse_policy("configured").budget_for(config, record) is None  # none written


# --- whole replays on a small scene ----------------------------------------------------------


def _call(request_id: str, total: int, role: str = "qa", second: int = 0) -> PromptRecord:
    return PromptRecord(
        timestamp=f"2026-12-01T10:00:{second:02d}+00:00",
        role=role,
        purpose="role_task",
        request_id=request_id,
        enabled=True,
        recent_events=8,
        max_events=16,
        total_events=total,
        included_events=min(total, 16),
        omitted_events=max(total - 16, 0),
        compacted=total > 16,
        eligible=total > 16,
        backfilled_roles=[],
        prompt_chars=1000,
        full_history_chars=1000,
        model="dry_run/dry_run",
    )


def _run(records: list[PromptRecord], *policies: str) -> dict[str, object]:
    data = {"req": encode_json(sample_record(40, "req"))}
    setup = ReplaySetup(TeamConfig(), {}, LearnedRatios())
    report = replay(
        records, data.get, [parse_policy(p) for p in policies], [Layout("upstream")], setup
    )
    return {row.policy: row for row in report.rows} | {"report": report}


def test_evidence_kept_counts_each_roles_newest_report_before_the_hop() -> None:
    got = _run([_call("req", 40)], "configured", "2/2", "full")
    view = RequestView("req", encode_json(sample_record(40, "req")))
    newest = view.newest_evidence(40)
    tail = set(range(38, 40))
    configured, two, full = got["configured"], got["2/2"], got["full"]
    assert configured.evidence_pairs == len(newest) == 8  # type: ignore[attr-defined]
    assert configured.evidence_kept == 1.0  # type: ignore[attr-defined]
    assert full.evidence_kept == 1.0  # type: ignore[attr-defined]
    kept = sum(index in tail for index in newest.values())
    assert two.evidence_kept == kept / len(newest) < 1  # type: ignore[attr-defined]


def test_calls_without_their_record_are_left_out_and_counted() -> None:
    got = _run([_call("req", 40), _call("gone", 3), _call("req", 41)], "configured")
    report = got["report"]
    assert (report.calls, report.replayed) == (3, 1)  # type: ignore[attr-defined]
    assert (report.without_record, report.past_record) == (1, 1)  # type: ignore[attr-defined]


def test_a_budget_fits_prompts_and_counts_those_over_it() -> None:
    records = [_call("req", total, second=total) for total in (10, 25, 40)]
    unbudgeted = _run(records, "configured")["configured"]
    per_prompt = unbudgeted.prompt_tokens_estimate // 3  # type: ignore[attr-defined]
    got = _run(records, f"max_prompt_tokens:{per_prompt}", "max_prompt_tokens:50")
    fitted = got[f"max_prompt_tokens:{per_prompt}"]
    assert 1 <= fitted.budget_overflows <= 3  # type: ignore[attr-defined]
    assert fitted.prompt_tokens_estimate <= 3 * per_prompt  # type: ignore[attr-defined]
    assert fitted.too_large == 0  # type: ignore[attr-defined]
    tiny = got["max_prompt_tokens:50"]
    assert (tiny.too_large, tiny.budget_overflows) == (3, 3)  # type: ignore[attr-defined]
    assert tiny.prompt_tokens_estimate == 0  # type: ignore[attr-defined]
    assert unbudgeted.budget_overflows is None  # type: ignore[attr-defined]


# --- layouts ---------------------------------------------------------------------------------


def test_a_layout_keeps_each_policys_counts_and_sets_its_own_step() -> None:
    config = TeamConfig(prompt_context=PromptContextConfig(layout="shared_prefix", step=5))
    record = _call("req", 40)
    shared, upstream = Layout("shared_prefix"), Layout("upstream", 3)
    recent = parse_policy("recent_only").context_for(config, record)
    laid = shared.context(recent, config.prompt_context.step)
    assert (laid.recent_events, laid.max_events, laid.layout, laid.step) == (
        8,
        8,
        "shared_prefix",
        5,  # the config's step
    )
    assert Layout("shared_prefix", 12).context(recent, 5).step == 12  # --step
    assert upstream.context(config.prompt_context, 5).layout == "upstream"
    full = shared.context(parse_policy("full").context_for(config, record), 5)
    assert (full.enabled, full.layout) == (False, "shared_prefix")


def _laid_out(call: PromptRecord, layout: str | None, cached: int | None) -> PromptRecord:
    step = 8 if layout else None
    tokens = 400 if cached is not None else None
    return msgspec.structs.replace(
        call, layout=layout, step=step, prompt_tokens=tokens, cached_prompt_tokens=cached
    )


def test_recorded_replays_each_call_in_its_own_layout_beside_the_servers_cache() -> None:
    calls = [
        _laid_out(_call("req", 30, "qa", 0), None, None),
        _laid_out(_call("req", 31, "dev", 1), "shared_prefix", 0),
        _laid_out(_call("req", 33, "qa", 2), "shared_prefix", 300),
        _laid_out(_call("req", 35, "dev", 3), "shared_prefix", 100),
    ]
    data = {"req": encode_json(sample_record(40, "req"))}
    setup = ReplaySetup(TeamConfig(), {}, LearnedRatios())
    layouts = [Layout("upstream"), Layout("shared_prefix")]
    seen: list[tuple[str, str, str]] = []
    report = replay(
        calls,
        data.get,
        [parse_policy("recorded")],
        layouts,
        setup,
        lambda prompt: seen.append((prompt.record.role, prompt.layout, prompt.text)),
    )
    upstream, shared = report.rows
    assert (upstream.prompts, shared.prompts) == (1, 3)  # each call once, in its own layout
    assert upstream.measured_prompts == 0 and upstream.measured_cached_share is None
    assert shared.measured_prompts == 3
    assert shared.measured_cached_share == 400 / 1200
    # The replay's own share of the same prompts: here every shared_prefix call.
    assert shared.predicted_cached_share == (
        shared.cacheable_prompt_tokens / shared.prompt_tokens_estimate
    )
    assert [layout for _, layout, _ in seen] == ["upstream", *["shared_prefix"] * 3]
    assert seen[0][2].startswith("You are the qa role")
    assert all(text.startswith("You are a role of a team") for _, _, text in seen[1:])
    # Without shared_prefix asked for, its calls are said to be left out.
    only = replay(calls, data.get, [parse_policy("recorded")], layouts[:1], setup)
    assert (only.rows[0].prompts, only.other_layout) == (1, 3)


def test_a_repair_is_cacheable_only_up_to_the_answer_replay_does_not_have() -> None:
    # Two repairs of one role in a row: rebuilt, both repair an empty answer and would look
    # alike to the end; sent, each showed its own rejected answer, so a cache served the
    # second no further than that.
    repairs = [
        msgspec.structs.replace(_call("req", 40, "qa", second), purpose="contract_repair")
        for second in (0, 1)
    ]
    data = {"req": encode_json(sample_record(40, "req"))}
    setup = ReplaySetup(TeamConfig(), {}, LearnedRatios())
    seen: list[str] = []
    report = replay(
        repairs, data.get, [parse_policy("configured")], [Layout("upstream")], setup,
        observe=lambda prompt: seen.append(prompt.text),
    )  # fmt: skip
    (row,) = report.rows
    first, second = seen
    assert first == second  # what replay rebuilds
    head = first[: first.index("Previous invalid payload:\n") + len("Previous invalid payload:\n")]
    rate = LearnedRatios().rate("dry_run/dry_run")
    assert row.cacheable_prompt_tokens == rate.tokens(len(head))  # not the whole second prompt
