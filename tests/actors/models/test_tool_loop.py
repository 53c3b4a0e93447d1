"""The tool loop of one model call, without a server: a tool that hangs is bounded by the
call's timeout, a tool that raises is answered with its type alone, and the rounds stop at
``max_rounds`` with a closing request."""

from __future__ import annotations

import anyio
import pytest

from teams_runtime.actors.models.tools import ToolSession, Turn, run_rounds
from teams_runtime.codecs.formats import JsonObject
from teams_runtime.codecs.model import ModelReply, TokenUsage, ToolCall, tool_spec

pytestmark = pytest.mark.anyio


class _Box:
    def specs(self) -> list[JsonObject]:
        return [tool_spec(name, "", {"type": "object"}) for name in ("hang", "boom")]

    async def call(self, name: str, arguments: JsonObject) -> str:
        if name == "hang":
            await anyio.sleep_forever()
        raise RuntimeError("a secret the model must not see")


async def test_a_hanging_tool_and_a_failing_one_are_results() -> None:
    session = ToolSession(_Box(), max_rounds=3, timeout_seconds=0.2)
    with anyio.fail_after(5):
        hung = await session.run(ToolCall(id="a", name="hang", arguments="{}"))
        failed = await session.run(ToolCall(id="b", name="boom", arguments="{}"))
    assert hung == "error: the tool did not answer within 0.2 s"
    assert failed == "error: the tool failed (RuntimeError)"
    assert [entry.failed for entry in session.entries] == [True, True]


async def test_rounds_stop_at_max_rounds_and_usage_adds_up() -> None:
    turns: list[Turn] = []

    async def send(turn: Turn) -> ModelReply:
        turns.append(turn)
        calls = (ToolCall(id=f"c{len(turns)}", name="boom", arguments="{}"),)
        usage = TokenUsage(prompt_tokens=10, completion_tokens=1)
        return ModelReply(text="{}" if turn.closing else "", usage=usage, tool_calls=calls)

    session = ToolSession(_Box(), max_rounds=2, timeout_seconds=1)
    reply = await run_rounds(send, session)
    assert [turn.closing for turn in turns] == [False, False, True]
    assert [len(turn.messages) for turn in turns] == [0, 2, 4]  # each round: a turn, a result
    assert turns[2].fields(refused=False)["tool_choice"] == "none"
    assert turns[0].offers_tools(refused=False) and not turns[2].offers_tools(refused=False)
    assert (session.rounds, session.calls) == (2, 2)
    assert reply.text == "{}"
    assert reply.usage == TokenUsage(prompt_tokens=30, completion_tokens=3)
