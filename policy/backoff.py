"""How long to wait before trying again: one jittered exponential backoff with a cap, for every
loop that retries (a model server's 5xx, an away server's probe, a NATS append that lost to
another writer, a deferred envelope, a NATS call while the server is away).

The ``attempt``-th wait (0 for the first) is ``first * 2**attempt``, at most ``cap``, cut by a
random part of up to ``jitter`` of it, so clients that failed together do not all come back at
once (``jitter=0``: no cut).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # random is imported when a wait is jittered: not at start-up
    import random

__all__ = ["backoff_delay"]

_MAX_EXPONENT = 60  # 2**60 times any first wait is past every cap: no overflow past it


def backoff_delay(
    attempt: int,
    *,
    first: float,
    cap: float,
    jitter: float = 0.0,
    rng: random.Random | None = None,
) -> float:
    """Seconds to wait before try number ``attempt + 1``: ``first`` doubled ``attempt`` times,
    at most ``cap``, times a random factor in ``(1 - jitter, 1]``."""
    base = min(cap, first * 2.0 ** min(max(attempt, 0), _MAX_EXPONENT))
    if not jitter:
        return base
    if rng is None:
        import random  # here, not at the top: `status` waits for nothing

        return base * (1.0 - jitter * random.random())
    return base * (1.0 - jitter * rng.random())
