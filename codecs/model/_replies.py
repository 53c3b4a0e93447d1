"""What a model backend hands back: the reply text, and what the call reported about itself."""

from __future__ import annotations

from typing import Literal

import msgspec

from teams_runtime.codecs.model._tool_wire import ToolCall

__all__ = ["FINISH_REASONS", "FinishReason", "ModelReply", "TokenUsage", "finish_reason_of"]

# Why a model server says the answer ended (``finish_reason``): a natural stop, its token
# limit (``max_tokens``, or the server's own), its content filter, a tool or function call.
# Any other name a server sends is "other": the reason is logged and recorded, so it holds
# nothing the server chose beyond these fixed names.
FinishReason = Literal["stop", "length", "content_filter", "tool_calls", "function_call", "other"]
FINISH_REASONS: tuple[FinishReason, ...] = (
    "stop",
    "length",
    "content_filter",
    "tool_calls",
    "function_call",
    "other",
)


def finish_reason_of(value: object) -> FinishReason | None:
    """The ``FinishReason`` a server's ``finish_reason`` names; ``None`` for none (absent,
    null, empty or not a string)."""
    if not isinstance(value, str) or not value:
        return None
    name = value.lower()
    for reason in FINISH_REASONS:
        if name == reason:
            return reason
    return "other"


class TokenUsage(msgspec.Struct, frozen=True, kw_only=True):
    """Tokens a model server says one call used (counts only)."""

    prompt_tokens: int
    completion_tokens: int
    # Of the prompt tokens, those the server served from its prompt cache
    # (``usage.prompt_tokens_details.cached_tokens``); None when it did not say.
    cached_prompt_tokens: int | None = None


class ModelReply(msgspec.Struct, frozen=True, kw_only=True):
    """A model's reply: its text, for a command the end of its stderr and its exit status,
    and the token usage when the backend reports one (the ``openai`` backend does)."""

    text: str
    stderr_tail: str = ""
    exit_status: int | None = None
    usage: TokenUsage | None = None
    # When the answer's first text arrived (``anyio.current_time()``); None when the backend
    # cannot tell (a command, the dry run).
    first_token_at: float | None = None
    # Why the server says the answer ended; None when it did not say (a command, the dry run,
    # a stream that ended with [DONE] alone).
    finish_reason: FinishReason | None = None
    # The tools the model asked to call instead of answering (``openai`` backend, tools on).
    tool_calls: tuple[ToolCall, ...] = ()
