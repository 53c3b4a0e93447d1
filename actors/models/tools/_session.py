"""One model call's tools: what offers them (a ``Toolbox``), and what they did in the call
(``ToolSession``: the counts for the prompt record, the calls and results for the attempts
folder)."""

from __future__ import annotations

from typing import Protocol

import anyio
import msgspec

from teams_runtime.codecs.attempt_records import ToolCallRecord
from teams_runtime.codecs.formats import JsonObject
from teams_runtime.codecs.model import ToolCall

__all__ = ["ToolSession", "Toolbox", "combined"]


class Toolbox(Protocol):
    """Tools a model may call: their specs (``codecs.model.tool_spec``) and the calls."""

    def specs(self) -> list[JsonObject]:
        """The tools offered, as a request's ``tools`` lists them."""
        ...

    async def call(self, name: str, arguments: JsonObject) -> str:
        """Run tool ``name``; its result, as text the model reads. A problem the model can
        act on (a bad argument, nothing at an index) is a result too; anything raised is
        answered with its type alone."""
        ...


class ToolSession:
    """The tools of one model call: the box, how many rounds the call may take
    (``model.tools.max_rounds``), how long one tool may take, and what happened."""

    def __init__(self, toolbox: Toolbox, *, max_rounds: int, timeout_seconds: float) -> None:
        self.toolbox = toolbox
        self.max_rounds = max_rounds
        self.timeout_seconds = timeout_seconds
        self.rounds = 0  # rounds of tool calls run
        self.entries: list[ToolCallRecord] = []

    @property
    def calls(self) -> int:
        """How many tool calls were run."""
        return len(self.entries)

    async def run(self, call: ToolCall) -> str:
        """Run one call of this round; its result (an error the model reads, never raised,
        for a tool unknown, bad arguments, a failure or a tool past ``timeout_seconds``)."""
        result, failed = await self._result(call)
        self.entries.append(
            ToolCallRecord(
                round=self.rounds,
                id=call.id,
                name=call.name,
                arguments=call.arguments,
                result=result,
                failed=failed,
            )
        )
        return result

    async def _result(self, call: ToolCall) -> tuple[str, bool]:
        offered = [spec["function"]["name"] for spec in self.toolbox.specs()]
        if call.name not in offered:
            return f"error: no tool named {call.name!r}; the tools are: {', '.join(offered)}", True
        try:
            arguments = msgspec.json.decode(call.arguments or "{}")
        except msgspec.DecodeError:
            return "error: the arguments are not JSON; send a JSON object", True
        if not isinstance(arguments, dict):
            return "error: the arguments must be a JSON object", True
        failure = ""
        with anyio.move_on_after(self.timeout_seconds) as scope:
            try:
                return await self.toolbox.call(call.name, arguments), False
            except Exception as exc:  # a tool's failure is the model's to read, not a crash
                failure = type(exc).__name__
        if scope.cancelled_caught:
            return f"error: the tool did not answer within {self.timeout_seconds:g} s", True
        return f"error: the tool failed ({failure})", True


class _Combined:
    """Several toolboxes as one: their specs in order, each call to the box that offers it."""

    def __init__(self, boxes: list[Toolbox]) -> None:
        self._boxes = boxes

    def specs(self) -> list[JsonObject]:
        return [spec for box in self._boxes for spec in box.specs()]

    async def call(self, name: str, arguments: JsonObject) -> str:
        for box in self._boxes:
            if any(spec["function"]["name"] == name for spec in box.specs()):
                return await box.call(name, arguments)
        return f"error: no tool named {name!r}"


def combined(boxes: list[Toolbox]) -> Toolbox:
    """``boxes`` as one toolbox (the one itself when there is one)."""
    return boxes[0] if len(boxes) == 1 else _Combined(boxes)
