"""The built-in tools over a request's canonical record (``model.tools.read_events``):
``read_events`` (events verbatim, by index or range: the ones a compacted prompt left out)
and ``read_record`` (the record's other fields). Reads go through the role's ContextHandle.

What they return goes into the next request of the call, so it is held to the role's token
budget where one is set: the room left is the budget less the prompt's estimate and what the
tools already returned in the call. An event too large for it is answered with a
content-free "too large: N tokens, budget M".
"""

from __future__ import annotations

import msgspec

from teams_runtime.actors.context import ContextHandle
from teams_runtime.codecs.formats import JsonObject
from teams_runtime.codecs.model import tool_spec
from teams_runtime.codecs.projection_reply import Projection
from teams_runtime.codecs.request_records import EVENTS_KEY
from teams_runtime.policy.token_counts import TokenRate

__all__ = ["RecordTools"]

_MOST_EVENTS = 50  # events one read returns at most: a model asks again for more
_RANGE = {"type": "integer", "minimum": 0}


def _spans(indices: list[int]) -> str:
    """``[0, 1, 2, 5]`` as ``0-2, 5``."""
    spans: list[str] = []
    for index in indices:
        if spans and spans[-1].rsplit("-", 1)[-1] == str(index - 1):
            spans[-1] = f"{spans[-1].split('-', 1)[0]}-{index}"
        else:
            spans.append(str(index))
    return ", ".join(spans)


class RecordTools:
    """``read_events`` and ``read_record`` for one call's request (a ``Toolbox``)."""

    def __init__(
        self,
        context: ContextHandle,
        projection: Projection,
        *,
        rate: TokenRate,
        room: int | None = None,
    ) -> None:
        """``room``: the tokens the tools may return in the call (``None``: no budget)."""
        self._context = context
        self._projection = projection
        self._rate = rate
        self._room = room

    def specs(self) -> list[JsonObject]:
        """The two tools, their descriptions naming the events the prompt left out."""
        projection = self._projection
        shown = set(projection.selected_indices)
        omitted = [i for i in range(projection.total_events) if i not in shown]
        left_out = f"; the prompt left out events {_spans(omitted)}" if omitted else ""
        events = tool_spec(
            "read_events",
            "Read events of the current request's canonical record, verbatim, by index "
            f"(numbered from 0; it has {projection.total_events} events{left_out}). Give "
            "`index` for one event, or `start` and `end` (inclusive) for a range.",
            {
                "type": "object",
                "properties": {"index": _RANGE, "start": _RANGE, "end": _RANGE},
                "additionalProperties": False,
            },
        )
        record = tool_spec(
            "read_record",
            "Read the current request's record: every field but its events (read them with "
            "read_events).",
            {"type": "object", "properties": {}, "additionalProperties": False},
        )
        return [events, record]

    async def call(self, name: str, arguments: JsonObject) -> str:
        """Run ``read_events`` or ``read_record`` (``RecordError`` and the ContextActor's
        errors propagate: the tool loop answers them with their type)."""
        fields = await self._context.load(self._projection.request_id)
        raw_events = fields.get(EVENTS_KEY)
        events: list[msgspec.Raw] = raw_events if isinstance(raw_events, list) else []
        if name == "read_record":
            rest = {key: value for key, value in fields.items() if key != EVENTS_KEY}
            rest[EVENTS_KEY] = f"{len(events)} events: read them with read_events"
            return self._fitted([msgspec.json.encode(rest).decode()], ["the record"])
        chosen = self._chosen(arguments, len(events))
        if isinstance(chosen, str):
            return chosen
        texts = [bytes(events[i]).decode() for i in chosen]
        return self._fitted(
            [f"event {i} of {len(events)}:\n{text}" for i, text in zip(chosen, texts, strict=True)],
            [f"event {i}" for i in chosen],
        )

    def _chosen(self, arguments: JsonObject, total: int) -> range | str:
        """The indices asked for, or what is wrong with the arguments (for the model)."""
        index, start, end = (arguments.get(key) for key in ("index", "start", "end"))
        if index is not None:
            start = end = index
        if start is None:
            return "error: give `index`, or `start` and `end`"
        end = start if end is None else end
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in (start, end)):
            return "error: `index`, `start` and `end` must be whole numbers"
        if not 0 <= start <= end or start >= total:
            return f"error: the record has events 0 to {total - 1}; no event {start}-{end}"
        return range(start, min(end, total - 1, start + _MOST_EVENTS - 1) + 1)

    def _fitted(self, parts: list[str], names: list[str]) -> str:
        """``parts`` joined, as many as the room left takes, in order; an event too large is
        answered content-free, and what was left out is named."""
        kept: list[str] = []
        for part, what in zip(parts, names, strict=True):
            tokens = self._rate.tokens(len(part.encode("utf-8")))
            if self._room is not None and tokens > self._room:
                kept.append(f"{what}: too large: {tokens} tokens, budget {self._room}")
                continue
            if self._room is not None:
                self._room -= tokens
            kept.append(part)
        return "\n\n".join(kept)
