"""Prompts laid out ``shared_prefix``: consecutive hops of a request share their prompt up to
the role's own part, two roles at one hop share everything before theirs, the envelope does not
repeat what the record holds, and a budget still binds (its parts add up to the prompt)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from teams_runtime.codecs.config import PromptContextConfig
from teams_runtime.codecs.envelopes import MessageEnvelope
from teams_runtime.codecs.request_records import EVENTS_CLOSE
from teams_runtime.exceptions import PromptTooLarge
from teams_runtime.policy.budget import Budget, fit_prompt, rate_tokens
from teams_runtime.policy.projection import project_fields, tail_start
from teams_runtime.policy.prompts import PromptBundle, build_prompt
from teams_runtime.policy.token_counts import DEFAULT_RATE

from ..support.strategies import event, events, record, stepped_configs

BODY = "Users want the quarterly report as CSV; keep the PDF export exactly as it is. " * 20


def _fields(history: list[Any], hop: int) -> dict[str, Any]:
    """A record at some hop: what the submitter wrote stays, what a hop sets changes."""
    return {
        **record(history),
        "scope": "CSV export",
        "body": BODY,
        "updated_at": f"T{hop:04d}",
        "result": {"summary": f"hop {hop}"},
        "hops": hop,
    }


def _envelope(target: str) -> MessageEnvelope:
    return MessageEnvelope(
        request_id="req-1", sender="planner", target=target, scope="CSV export", body=BODY
    )


def _prompt(fields: dict[str, Any], config: PromptContextConfig, role: str) -> PromptBundle:
    projection = project_fields(fields, config)
    return build_prompt("task", role=role, projection=projection, envelope=_envelope(role))


def _events_end(text: str) -> int:
    """Where the last event of the prompt's events array ends."""
    return text.index(EVENTS_CLOSE.decode() + "\n}")


@settings(max_examples=150, deadline=None)
@given(
    history=events.filter(bool),
    more=st.lists(event, min_size=1, max_size=10),
    config=stepped_configs(),
    role=st.sampled_from(["qa", "developer"]),
)
def test_consecutive_hops_share_the_prompt_up_to_the_new_events(
    history: list[Any], more: list[Any], config: PromptContextConfig, role: str
) -> None:
    longer = history + more
    total, after = len(history), len(longer)
    if total > config.max_events and tail_start(total, config) != tail_start(after, config):
        return  # a re-anchor: the tail moved on (the next hops share from it)
    if total <= config.max_events < after:
        return  # compaction began between them
    first = _prompt(_fields(history, 1), config, role).text()
    second = _prompt(_fields(longer, 2), config, role).text()
    shared = first[: _events_end(first)]
    assert second.startswith(shared)  # the preamble, the fields no hop sets, every event
    assert "hop 1" not in shared and "T0001" not in shared


@settings(max_examples=150, deadline=None)
@given(history=events, config=stepped_configs())
def test_two_roles_at_one_hop_share_everything_before_their_own_part(
    history: list[Any], config: PromptContextConfig
) -> None:
    fields = _fields(history, 3)
    qa = _prompt(fields, config, "qa").text()
    developer = _prompt(fields, config, "developer").text()
    own = qa.index("\n\nYou are the qa role")
    assert developer[:own] == qa[:own]
    assert "qa" not in qa.split('"events"')[0]  # the preamble and the fields name no role


def test_the_body_is_sent_once_and_the_envelope_names_what_it_left_out() -> None:
    fields = _fields([{"type": "created"}] * 20, 3)
    shared = _prompt(fields, PromptContextConfig(layout="shared_prefix"), "qa").text()
    upstream = _prompt(fields, PromptContextConfig(), "qa").text()
    assert upstream.count(BODY) == 2  # the record's and the envelope's copies
    assert shared.count(BODY) == 1
    assert (
        "Incoming envelope (request_id, intent, urgency, scope, artifacts, params, body: "
        "as in the request above):" not in shared
    )
    assert "Incoming envelope (request_id, scope, body: as in the request above):" in shared


def test_an_envelope_that_differs_from_the_record_is_shown() -> None:
    fields = _fields([], 1)
    projection = project_fields(fields, PromptContextConfig(layout="shared_prefix"))
    envelope = MessageEnvelope(
        request_id="req-1", sender="qa", target="developer", body="Fix the CSV header."
    )
    text = build_prompt("task", role="developer", projection=projection, envelope=envelope).text()
    assert '"body": "Fix the CSV header."' in text and text.count(BODY) == 1


@settings(max_examples=100, deadline=None)
@given(history=events, config=stepped_configs(), budget=st.integers(300, 6000))
def test_the_parts_add_up_to_the_prompt_and_a_budget_binds(
    history: list[Any], config: PromptContextConfig, budget: int
) -> None:
    bundle = _prompt(_fields(history, 2), config, "qa")
    text = bundle.text()
    assert "".join(bundle.iter_chunks()) == text
    sizes = bundle.sizes()
    parts = sizes.brief + sizes.record + sizes.envelope + sizes.notice + sum(sizes.events)
    size = len(text.encode("utf-8"))
    assert size <= parts <= size + 12 + len(sizes.events)  # never less, a few bytes more
    try:
        fitted = fit_prompt(bundle, Budget(tokens=budget), rate_tokens(bundle, DEFAULT_RATE))
    except PromptTooLarge:  # too large even without any event: said, never sent
        return
    assert fitted.estimate <= budget
    assert DEFAULT_RATE.tokens(len(fitted.bundle.text().encode("utf-8"))) <= budget
    assert fitted.bundle.layout == "shared_prefix"
