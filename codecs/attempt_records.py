"""The file kept for a failed model call or a rejected reply (``.teams_runtime/attempts/``).

Unlike everything logged, it holds content: what the model printed on stdout and the end of its
stderr, which may quote the prompt. It is for a person reading why a call went wrong.
"""

from __future__ import annotations

from datetime import UTC, datetime

import msgspec

from teams_runtime.codecs.formats import pretty_json_bytes
from teams_runtime.codecs.model import ReplyRead

__all__ = ["AttemptRecord", "ToolCallRecord", "ToolCallsRecord", "encode_attempt"]


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


class ToolCallRecord(msgspec.Struct, frozen=True, kw_only=True):
    """One tool call a model made in a call, and what the tool answered."""

    round: int  # the round of tool calls it was in: 1 up to model.tools.max_rounds
    id: str
    name: str
    arguments: str  # as the model wrote them
    result: str  # what the model was sent back
    failed: bool = False  # the result is an error the model was told of


class ToolCallsRecord(msgspec.Struct, frozen=True, kw_only=True):
    """The tool calls of one model call (``openai`` backend, ``model.tools``), kept beside
    its attempts whether or not the call succeeded."""

    time: str = msgspec.field(default_factory=_utc_now)  # ISO-8601, UTC
    request_id: str
    role: str
    purpose: str
    call: int
    rounds: int
    tool_calls: list[ToolCallRecord]


def encode_attempt(attempt: AttemptRecord | ToolCallsRecord) -> bytes:
    """The attempt as a 2-space-indented JSON object with a final newline."""
    return pretty_json_bytes(attempt) + b"\n"
