"""What the ``openai`` backend says of a call that went wrong: a prompt beyond the server's
context (``too_large``), an answer the server stopped at its token limit (``say_cut``)."""

from __future__ import annotations

from teams_runtime._logs import logger
from teams_runtime.actors.models._openai_reading import ContextExceeded
from teams_runtime.exceptions import PromptTooLarge
from teams_runtime.policy.budget import exceeded_advice
from teams_runtime.policy.prompts import PromptBundle

__all__ = ["say_cut", "too_large"]


def say_cut(bundle: PromptBundle, size: int, limit: int | None) -> None:
    """Warn that the server stopped an answer at its token limit: the answer is most
    likely incomplete (an object the contract rejects, or nothing at all)."""
    logger.bind(role=bundle.role, request_id=bundle.request_id, purpose=bundle.purpose).warning(
        "model server stopped the answer for {} on request {} at its token limit "
        "(finish_reason length, {} bytes of answer; model.openai.max_tokens {})",
        bundle.role,
        bundle.request_id,
        size,
        limit if limit is not None else "not set: the server's own limit",
    )


def too_large(bundle: PromptBundle, exceeded: ContextExceeded) -> PromptTooLarge:
    """The failure of a prompt beyond the server's context, naming its size and what bounds
    it, so a person knows what to change (``max_events`` only when it bounded the events); it
    is not sent again unchanged."""
    projection = bundle.projection
    return PromptTooLarge(
        f"the prompt does not fit the model server's context: {exceeded.how}. The prompt has "
        f"{bundle.chars()} characters ({projection.included_events} of "
        f"{projection.total_events} events; prompt_context.max_events "
        f"{projection.config.max_events}); {exceeded_advice(projection)}",
        output=exceeded.said,
    )
