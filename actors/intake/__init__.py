"""What users put in: new requests (``submit``) and failed steps tried again (``retry``); and
what they get back: a request waited for until it settles (``wait_for_request``)."""

from __future__ import annotations

from teams_runtime.actors.intake._retry import requeue_rejected, retry_failed
from teams_runtime.actors.intake._submit import cancel, check_new_work, submit, submit_with
from teams_runtime.actors.intake._waiting import (
    SETTLED,
    RequestOutcome,
    wait_for_request,
    wait_with,
)

__all__ = [
    "SETTLED",
    "RequestOutcome",
    "cancel",
    "check_new_work",
    "requeue_rejected",
    "retry_failed",
    "submit",
    "submit_with",
    "wait_for_request",
    "wait_with",
]
