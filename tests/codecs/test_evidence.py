"""Classifying a whole history in one pass (``history_evidence``): equal to the plain reading of
spec section 4 on every history, including evidence named only by its actor (a second pass)."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings

from teams_runtime.codecs.evidence import history_evidence

from ..support.reference import reference_role
from ..support.strategies import events


def _reference(history: list[Any]) -> tuple[int, dict[str, int]]:
    newest: dict[str, int] = {}
    for position, item in enumerate(history):
        if (role := reference_role(item)) is not None:
            newest[role] = position
    return len(history), newest


def _has_huge_int(value: Any) -> bool:
    if isinstance(value, dict):
        return any(_has_huge_int(item) for item in value.values())
    if isinstance(value, list):
        return any(_has_huge_int(item) for item in value)
    return type(value) is int and not -(2**63) <= value < 2**64


@settings(max_examples=300, deadline=None)
@given(history=events)
def test_history_evidence_equals_the_reference(history: list[Any]) -> None:
    data = json.dumps(history, indent=2).encode()
    try:
        found = history_evidence(data)
    except msgspec.DecodeError:  # an integer msgspec does not hold: callers go event by event
        assert _has_huge_int(history)
        return
    assert (found.count, found.newest) == _reference(history)


@pytest.mark.parametrize(
    ("history", "expected"),
    [
        # Reports naming no role in their payload: the identity is the actor (second pass).
        (
            [
                {"type": "role_report", "actor": "QA ", "payload": {"status": "done"}},
                {"type": "delegated", "actor": "planner"},
                {"type": "role_report", "actor": "planner"},
            ],
            {"qa": 0, "planner": 2},
        ),
        # Mixed: one payload names its role, a later report only its actor.
        (
            [
                {"type": "note", "payload": {"role": "Developer", "status": "ok"}},
                {"type": "role_report", "actor": "developer", "payload": {"role": " "}},
                {"type": "role_report", "actor": ""},  # no identity: not counted
            ],
            {"developer": 1},
        ),
        # A payload holding a list is not hashable: classified one event at a time.
        (
            [
                {"type": "role_report", "actor": "qa", "payload": [1, 2]},
                {"type": "role_report", "payload": {"role": "qa", "status": "x"}},
                {"event_type": "ROLE_REPORT", "actor": "designer", "payload": [3]},
            ],
            {"qa": 1, "designer": 2},
        ),
        ([], {}),
        ([1, "x", None, [2]], {}),
    ],
)
def test_history_evidence_names_each_roles_newest(
    history: list[Any], expected: dict[str, int]
) -> None:
    found = history_evidence(json.dumps(history).encode())
    assert (found.count, found.newest) == (len(history), expected)
