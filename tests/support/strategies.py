"""Hypothesis strategies for request histories, shared by the property tests."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from teams_runtime import PromptContextConfig

ROLE_NAMES = ["planner", "Designer ", "qa", "developer", "", "  ", "version_controller", "ünï"]
TYPES = ["role_report", " ROLE_REPORT", "delegated", "created", "retried", "", None, 7]

_payload = st.one_of(
    st.none(),
    st.text(max_size=3),
    st.integers(),
    st.lists(st.integers(), max_size=2),
    st.fixed_dictionaries(
        {},
        optional={
            "role": st.sampled_from([*ROLE_NAMES, None, 3]),
            "status": st.sampled_from(["completed", "", " ", "failed", None, 0]),
            "note": st.text(max_size=5),
        },
    ),
)
_object_event = st.fixed_dictionaries(
    {},
    optional={
        "timestamp": st.text(max_size=4),
        "type": st.sampled_from(TYPES),
        "event_type": st.sampled_from(TYPES),
        "actor": st.sampled_from([*ROLE_NAMES, None, 1]),
        "summary": st.text(max_size=6),
        "payload": _payload,
    },
)
event = st.one_of(
    _object_event,
    _object_event,
    _object_event,
    st.text(max_size=4),
    st.integers(),
    st.none(),
    st.lists(st.integers(), max_size=2),
)
events = st.lists(event, max_size=60)


@st.composite
def configs(draw: st.DrawFn) -> PromptContextConfig:
    recent = draw(st.integers(min_value=1, max_value=12))
    maximum = draw(st.integers(min_value=recent, max_value=recent + 12))
    return PromptContextConfig(
        enabled=draw(st.booleans()), recent_events=recent, max_events=maximum
    )


@st.composite
def stepped_configs(draw: st.DrawFn) -> PromptContextConfig:
    """Configs of the shared_prefix layout (compaction on): the tail moves in steps."""
    recent = draw(st.integers(min_value=1, max_value=10))
    maximum = draw(st.integers(min_value=recent, max_value=recent + 10))
    step = draw(st.integers(min_value=1, max_value=12))
    return PromptContextConfig(
        recent_events=recent, max_events=maximum, layout="shared_prefix", step=step
    )


def record(history: Any, request_id: str = "req-1") -> dict[str, Any]:
    return {
        "request_id": request_id,
        "status": "in_progress",
        "result": {"k": "v"},
        "events": history,
    }
