"""The one backoff every retry loop waits by (``policy.backoff``)."""

from __future__ import annotations

import random

import pytest

from teams_runtime.policy.backoff import backoff_delay


def test_each_wait_doubles_up_to_the_cap() -> None:
    waits = [backoff_delay(n, first=1.0, cap=30.0) for n in range(8)]
    assert waits == [1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0, 30.0]


def test_a_huge_attempt_number_stays_at_the_cap() -> None:
    assert backoff_delay(10**6, first=0.002, cap=0.5) == 0.5


@pytest.mark.parametrize("jitter", [0.25, 0.5])
def test_jitter_cuts_each_wait_by_at_most_its_part(jitter: float) -> None:
    rng = random.Random(7)
    waits = [backoff_delay(3, first=1.0, cap=60.0, jitter=jitter, rng=rng) for _ in range(500)]
    assert all(8.0 * (1 - jitter) < wait <= 8.0 for wait in waits)
    assert max(waits) - min(waits) > 8.0 * jitter * 0.9  # spread over the whole range
