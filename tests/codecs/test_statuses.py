"""Request statuses: the named sets the runtime decides by, and an ended status read from any
value a record may hold."""

from __future__ import annotations

from typing import Any

import pytest

from teams_runtime.codecs.statuses import (
    ENDED,
    FINISHED,
    REQUEST_STATUSES,
    RESULT_STATUSES,
    ended_status,
)


def test_the_named_sets_are_request_statuses_and_ended_is_finished() -> None:
    assert ENDED < FINISHED <= set(REQUEST_STATUSES)
    assert set(RESULT_STATUSES) <= set(REQUEST_STATUSES)  # a request ends as its result did
    assert "completed" in FINISHED and "completed" not in ENDED  # over, not ended
    assert "blocked" not in FINISHED  # more work for a blocked one is what it waits for


@pytest.mark.parametrize(
    ("value", "ended"),
    [
        pytest.param("cancelled", "cancelled", id="cancelled"),
        pytest.param("failed", "failed", id="failed"),
        pytest.param("completed", None, id="completed"),
        pytest.param("Failed", None, id="case-matters"),
        pytest.param(["failed"], None, id="a-list"),
        pytest.param(None, None, id="absent"),
    ],
)
def test_an_ended_status_is_read_from_any_value(value: Any, ended: str | None) -> None:
    assert ended_status(value) == ended
