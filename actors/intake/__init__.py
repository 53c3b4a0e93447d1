"""What users put in: new requests (``submit``) and failed steps tried again (``retry``)."""

from __future__ import annotations

from teams_runtime.actors.intake._retry import requeue_rejected, retry_failed
from teams_runtime.actors.intake._submit import cancel, check_new_work, submit, submit_with

__all__ = [
    "cancel",
    "check_new_work",
    "requeue_rejected",
    "retry_failed",
    "submit",
    "submit_with",
]
