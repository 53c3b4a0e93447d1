"""The file kept for a failed model call or a rejected reply (``.teams_runtime/attempts/``).

Unlike everything logged, it holds content: what the model printed on stdout and the end of its
stderr, which may quote the prompt. It is for a person reading why a call went wrong.
"""

from __future__ import annotations

from datetime import UTC, datetime

import msgspec

from teams_runtime.codecs.formats import pretty_json_bytes
from teams_runtime.codecs.model import ReplyRead

__all__ = ["AttemptRecord", "encode_attempt"]


def _utc_now() -> str:
    return datetime.now(UTC).isoformat()


class AttemptRecord(msgspec.Struct, frozen=True, kw_only=True):
    """One failed model call, or one answer the contract rejected."""

    time: str = msgspec.field(default_factory=_utc_now)  # ISO-8601, UTC
    request_id: str
    role: str
    purpose: str  # role_task | contract_repair | research_decision | version_control
    call: int  # the call's number for its prompt: 1 up to model.attempts
    reason: str  # why the call failed, or why its answer was rejected
    exit_status: int | None = None  # the model's, when it exited by itself
    issues: list[str] = msgspec.field(default_factory=list)  # contract issues, if rejected
    stderr_tail: str = ""  # the last 8 KiB the model printed on stderr
    answer: str = ""  # what it printed on stdout
    # For a rejected reply: how its JSON object was read (as_is, extracted, repaired,
    # extracted_repaired), None when none could be read; None for a failed call.
    answer_read: ReplyRead | None = None


def encode_attempt(attempt: AttemptRecord) -> bytes:
    """The attempt as a 2-space-indented JSON object with a final newline."""
    return pretty_json_bytes(attempt) + b"\n"
