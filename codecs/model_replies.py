"""What a model backend hands back: the answer text, and what the call reported about itself."""

from __future__ import annotations

import msgspec

__all__ = ["ModelReply", "TokenUsage"]


class TokenUsage(msgspec.Struct, frozen=True, kw_only=True):
    """Tokens a model server says one call used (counts only)."""

    prompt_tokens: int
    completion_tokens: int
    # Of the prompt tokens, those the server served from its prompt cache
    # (``usage.prompt_tokens_details.cached_tokens``); None when it did not say.
    cached_prompt_tokens: int | None = None


class ModelReply(msgspec.Struct, frozen=True, kw_only=True):
    """A model's answer: its text, for a command the end of its stderr and its exit status,
    and the token usage when the backend reports one (the ``openai`` backend does)."""

    text: str
    stderr_tail: str = ""
    exit_status: int | None = None
    usage: TokenUsage | None = None
    # When the answer's first text arrived (``anyio.current_time()``); None when the backend
    # cannot tell (a command, the dry run).
    first_token_at: float | None = None
