"""Deferred envelopes, whatever queue keeps them: when one is tried again, how often it was.

An envelope whose handling met passing trouble (the store busy or away, an ask that timed out,
a failed model call with ``on_failure: requeue``) is released: it waits, deferred, until its
next attempt, then any worker takes it again. The first attempt comes after about
``FIRST_RETRY`` seconds and each later one waits twice as long, at most ``MAX_RETRY``, each
jittered down by up to a quarter so envelopes deferred together do not all come back at once.

How many times an envelope was deferred travels in its own bytes (``"deferrals": n``, a key
the envelope decoder ignores), so the wait grows whichever worker defers it next; when it is
due is the queue's to keep (the file's mtime, a header on NATS).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec

from teams_runtime.codecs.formats import JsonObject, pretty_json_bytes
from teams_runtime.policy.backoff import backoff_delay

if TYPE_CHECKING:  # random is imported when a wait is jittered: not at start-up
    import random

__all__ = [
    "FIRST_RETRY",
    "MAX_RETRY",
    "RetrySchedule",
    "deferral_view",
    "with_deferrals",
]

FIRST_RETRY = 3.0
MAX_RETRY = 300.0


class RetrySchedule(msgspec.Struct, frozen=True, kw_only=True):
    """When a deferred envelope is tried again: ``first`` seconds after its first deferral,
    doubling with each further one up to ``cap``, jittered down by up to ``jitter``."""

    first: float = FIRST_RETRY
    cap: float = MAX_RETRY
    jitter: float = 0.25

    def delay(self, deferrals: int, rng: random.Random | None = None) -> float:
        """Seconds until the next attempt of an envelope deferred ``deferrals`` times (this
        deferral included)."""
        attempt = max(deferrals, 1) - 1
        return backoff_delay(attempt, first=self.first, cap=self.cap, jitter=self.jitter, rng=rng)


class _Deferral(msgspec.Struct):
    """What a deferred envelope's bytes say about it (other keys ignored)."""

    envelope_id: str = ""
    deferrals: int = 0


_VIEW = msgspec.json.Decoder(_Deferral)
_OBJECT = msgspec.json.Decoder(JsonObject)


def deferral_view(data: bytes) -> tuple[str, int]:
    """The envelope id and deferral count in an envelope's bytes (``""``, 0 if unreadable:
    such an envelope is set aside when claimed, never deferred)."""
    try:
        view = _VIEW.decode(data)
    except (msgspec.DecodeError, RecursionError):
        return "", 0
    return view.envelope_id, max(view.deferrals, 0)


def with_deferrals(data: bytes, deferrals: int) -> bytes:
    """The envelope's bytes saying it was deferred ``deferrals`` times (every other key kept);
    the bytes unchanged if they are not a JSON object."""
    try:
        envelope = _OBJECT.decode(data)
    except (msgspec.DecodeError, RecursionError):
        return data
    envelope["deferrals"] = deferrals
    return pretty_json_bytes(envelope) + b"\n"
