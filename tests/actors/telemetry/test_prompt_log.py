"""What role actors log for every prompt: one content-free record, and the spec's compaction
line when events were left out."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec
import pytest

from teams_runtime.actors.telemetry._prompt_log import RECORD_KEY, log_prompt, prompt_record
from teams_runtime.codecs.config import PromptContextConfig
from teams_runtime.codecs.envelopes import MessageEnvelope
from teams_runtime.codecs.prompt_records import decode_prompt_record
from teams_runtime.policy.projection import project_request
from teams_runtime.policy.prompts import PromptBundle, build_prompt

MakeBundle = Callable[..., PromptBundle]
ENVELOPE = MessageEnvelope(request_id="req-1", sender="planner", target="qa", scope="Ünï scope")
SMALL = PromptContextConfig(recent_events=4, max_events=7)


def test_full_history_size_is_estimated_from_byte_sizes(large_history: dict[str, Any]) -> None:
    data = msgspec.json.format(msgspec.json.encode(large_history), indent=2)
    compacted = build_prompt("task", role="qa", projection=project_request(data), envelope=ENVELOPE)
    full = build_prompt(
        "task",
        role="qa",
        projection=project_request(data, PromptContextConfig(enabled=False)),
        envelope=ENVELOPE,
    )
    record_of = prompt_record(compacted, compacted.chars())
    assert record_of.full_history_chars == full.chars()
    assert record_of.prompt_chars == compacted.chars()


@pytest.mark.parametrize(
    ("config", "counts"),
    [
        pytest.param(SMALL, (True, 40, 7, 33, True), id="compacted"),
        pytest.param(
            PromptContextConfig(enabled=False, recent_events=4, max_events=7),
            (False, 40, 40, 0, True),
            id="disabled-but-eligible",
        ),
    ],
)
def test_the_record_counts_the_prompt(
    prompt_bundle: MakeBundle,
    config: PromptContextConfig,
    counts: tuple[bool, int, int, int, bool],
) -> None:
    bundle = prompt_bundle("research_decision", role="research", events=40, config=config)
    record = prompt_record(bundle, bundle.chars())
    assert (record.role, record.purpose, record.request_id) == (
        "research",
        "research_decision",
        "req-1",
    )
    assert (record.enabled, record.recent_events, record.max_events) == (
        config.enabled,
        config.recent_events,
        config.max_events,
    )
    assert (
        record.compacted,
        record.total_events,
        record.included_events,
        record.omitted_events,
        record.eligible,
    ) == counts
    assert record.backfilled_roles == [item.role for item in bundle.projection.backfilled]
    assert record.prompt_chars == len(bundle.text())


def test_a_compacted_prompt_logs_the_spec_line_and_its_record(
    prompt_bundle: MakeBundle, log_messages: list[Any]
) -> None:
    bundle = prompt_bundle("task", role="qa", events=40, config=SMALL)
    returned = log_prompt(bundle, bundle.chars())
    line, structured = (message.record for message in log_messages)
    assert line["message"] == (
        "[qa] prompt_context_compacted request_id=req-1 purpose=role_task total_events=40 "
        "included_events=7 omitted_events=33 recent_events=4 max_events=7"
    )
    assert {key: line["extra"][key] for key in ("role", "request_id", "purpose")} == {
        "role": "qa",
        "request_id": "req-1",
        "purpose": "role_task",
    }
    assert structured["message"] == RECORD_KEY
    assert decode_prompt_record(structured["extra"][RECORD_KEY].encode()) == returned


def test_a_prompt_with_every_event_logs_only_its_record(
    prompt_bundle: MakeBundle, log_messages: list[Any]
) -> None:
    bundle = prompt_bundle("task", events=5, config=SMALL)
    returned = log_prompt(bundle, bundle.chars())
    (only,) = (message.record for message in log_messages)
    assert not returned.compacted
    assert decode_prompt_record(only["extra"][RECORD_KEY].encode()) == returned


def test_logs_hold_no_prompt_text(prompt_bundle: MakeBundle, log_messages: list[Any]) -> None:
    bundle = prompt_bundle("task", events=40, config=SMALL)
    log_prompt(bundle, bundle.chars())
    logged = "".join(f"{m.record['message']} {m.record['extra']}" for m in log_messages)
    assert "Current request" not in logged and "step 39" not in logged
    assert "You are the" not in logged


def test_a_prompt_the_budget_decided_says_so_at_the_end_of_the_line(
    prompt_bundle: MakeBundle, log_messages: list[Any]
) -> None:
    from teams_runtime.actors.telemetry._prompt_log import CallFacts
    from teams_runtime.policy.budget import Budget, fit_prompt, rate_tokens
    from teams_runtime.policy.token_counts import DEFAULT_RATE

    bundle = prompt_bundle("task", role="qa", events=40, config=SMALL)
    fitted = fit_prompt(bundle, Budget(tokens=3_000), rate_tokens(bundle, DEFAULT_RATE))
    decided = fitted.bundle.projection.budget
    assert decided is not None
    facts = CallFacts(max_prompt_tokens=3_000, prompt_tokens_estimate=fitted.estimate,
                      token_count_method="default")  # fmt: skip
    record = log_prompt(fitted.bundle, fitted.bundle.chars(), facts)
    line = log_messages[0].record["message"]
    assert line.startswith("[qa] prompt_context_compacted request_id=req-1 purpose=role_task ")
    assert line.endswith(
        f"max_events=7 max_prompt_tokens=3000 prompt_tokens_estimate={fitted.estimate}"
    )
    assert (record.max_prompt_tokens, record.token_count_method) == (3_000, "default")


def test_a_shared_prefix_prompt_says_its_layout_and_the_default_line_stays_as_it_was(
    prompt_bundle: MakeBundle,
) -> None:
    from teams_runtime.codecs.prompt_records import encode_prompt_record

    stepped = PromptContextConfig(recent_events=4, max_events=7, layout="shared_prefix", step=3)
    shared = prompt_record(bundle := prompt_bundle("task", role="qa", events=40, config=stepped),
                           bundle.chars())  # fmt: skip
    line = encode_prompt_record(shared)
    assert line.endswith(',"layout":"shared_prefix","step":3}')
    assert decode_prompt_record(line.encode()) == shared
    default = prompt_record(bundle := prompt_bundle("task", role="qa", events=40, config=SMALL),
                            bundle.chars())  # fmt: skip
    plain = encode_prompt_record(default)
    assert '"layout"' not in plain and '"step"' not in plain
    assert decode_prompt_record(plain.encode()).layout is None  # read as upstream
