"""The tool loop of one model call: the prompt sent with the tools, each round's calls run
and their results sent back, until the model answers or ``max_rounds`` rounds were run.

Tools and structured output: a round that offers tools sends no ``response_format``
(a grammar-constrained server, llama.cpp or vLLM, holds the model to the schema and it
cannot emit a tool call then; the contract's validation and repair still read the answer).
Once ``max_rounds`` rounds were run, one closing request keeps the tools listed (the history
names them) with ``tool_choice: none`` and sends the schema again: the model must answer.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import msgspec

from teams_runtime.actors.models.tools._session import ToolSession
from teams_runtime.codecs.formats import JsonObject
from teams_runtime.codecs.model import (
    REQUEST_TAIL,
    ModelReply,
    TokenUsage,
    assistant_message,
    request_tail,
    tool_message,
)
from teams_runtime.exceptions import ModelFailure

__all__ = ["PLAIN", "Turn", "run_rounds"]


@dataclass(frozen=True)
class Turn:
    """What one request of a call adds to the prompt: the tools offered, the rounds so far
    (messages after the prompt), and whether it is the closing request."""

    tools: list[JsonObject] = field(default_factory=list)
    messages: list[JsonObject] = field(default_factory=list)
    closing: bool = False

    def offers_tools(self, refused: bool) -> bool:
        """Whether this request lets the model call a tool (a server that refused tools is
        sent none): then no ``response_format`` goes with it."""
        return bool(self.tools) and not refused and not self.closing

    def fields(self, refused: bool) -> JsonObject:
        """The body's fields for the tools (none for a server that refused them)."""
        if not self.tools or refused:
            return {}
        return {"tools": self.tools} | ({"tool_choice": "none"} if self.closing else {})

    def tail(self) -> bytes:
        """The end of the body: the rounds so far after the prompt."""
        return request_tail(self.messages) if self.messages else REQUEST_TAIL


PLAIN = Turn()  # a call without tools: the body as it always was


async def run_rounds(
    send: Callable[[Turn], Awaitable[ModelReply]], session: ToolSession
) -> ModelReply:
    """Send the prompt with the session's tools, run the calls the model asks for and send
    their results, round after round; the model's answer. Raises what ``send`` raises, and
    ``ModelFailure`` when the closing request is answered with tool calls and no text."""
    specs = session.toolbox.specs()
    messages: list[JsonObject] = []
    used: TokenUsage | None = None
    while True:
        closing = session.rounds >= session.max_rounds
        reply = await send(Turn(tools=specs, messages=list(messages), closing=closing))
        used = _added(used, reply.usage) if session.rounds else reply.usage
        if not reply.tool_calls or (closing and reply.text.strip()):
            return msgspec.structs.replace(reply, usage=used)
        if closing:
            raise ModelFailure(
                f"the model asked for tools again after model.tools.max_rounds "
                f"({session.max_rounds}) rounds instead of answering"
            )
        session.rounds += 1
        messages.append(assistant_message(reply.text, reply.tool_calls))
        for call in reply.tool_calls:
            messages.append(tool_message(call.id, await session.run(call)))


def _added(used: TokenUsage | None, more: TokenUsage | None) -> TokenUsage | None:
    """The usage of a call's requests so far: none unless every request reported one."""
    if used is None or more is None:
        return None
    cached = (
        used.cached_prompt_tokens + more.cached_prompt_tokens
        if used.cached_prompt_tokens is not None and more.cached_prompt_tokens is not None
        else None
    )
    return TokenUsage(
        prompt_tokens=used.prompt_tokens + more.prompt_tokens,
        completion_tokens=used.completion_tokens + more.completion_tokens,
        cached_prompt_tokens=cached,
    )
