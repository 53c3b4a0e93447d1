"""``ContextHandle``: what roles hold to ask the ContextActor (``actors.context._actor``).

Every ask goes through the actor's mailbox under a deadline, except a projection the actor has
published an answer for that is still current (``actors.context._published``). Asks and replies
are values (``codecs.context_asks``): the actor is in this process, so nothing is encoded for
it that the store does not write, and an error it raises is raised here as the same object.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec
from anyio.lowlevel import checkpoint

from teams_runtime.actors._mailbox import Mailbox
from teams_runtime.actors.context._published import PublishedProjections
from teams_runtime.codecs.context_asks import (
    Append,
    Appended,
    ContextAsk,
    ContextReply,
    Create,
    Created,
    Load,
    Loaded,
    Project,
    Recall,
    Recalled,
)
from teams_runtime.codecs.formats import JsonObject
from teams_runtime.codecs.projection_reply import Projection
from teams_runtime.codecs.request_ids import check_request_id, with_checked_request_id
from teams_runtime.codecs.request_records import (
    RecordFields,
    decode_record,
    encode_event,
    encode_json,
)

__all__ = ["ContextHandle"]


class ContextHandle:
    """What roles hold to ask the ContextActor. Every ask runs under a deadline."""

    def __init__(
        self,
        mailbox: Mailbox[ContextAsk],
        published: PublishedProjections,
        *,
        ask_timeout: float,
        write_timeout: float,
    ) -> None:
        self._mailbox = mailbox
        self._published = published  # what the actor published: read here, never changed
        self.ask_timeout = ask_timeout
        # Appends and creates: a store may retry one for a while (NATS: other writers holding
        # the request, the server away) and then says why better than a timeout would.
        self.write_timeout = write_timeout

    async def _ask(self, message: ContextAsk) -> ContextReply:
        message = with_checked_request_id(message)  # an unsafe id never reaches the actor
        writes = isinstance(message, Append | Create)
        timeout = self.write_timeout if writes else self.ask_timeout
        # An error the actor raised is raised by the mailbox here: the same exception object.
        reply: ContextReply = await self._mailbox.ask(message, timeout=timeout)
        return reply

    async def project(
        self, request_id: str, *, role: str | None = None, purpose: str | None = None
    ) -> Projection:
        """The projection of the request's record (the same value as ``project_request``).

        Served from the answer the actor published while the record keeps its version
        (``actors.context._published``), else waits for the actor (a read only if the record
        changed). Raises
        ``UnknownRequestError``, ``RecordError``, ``UnsafeRequestIdError``, ``ActorStopped``,
        ``AskTimeout``. ``role`` and ``purpose`` are deprecated: a projection does not depend
        on them.
        """
        if role is not None or purpose is not None:
            warnings.warn(
                "ContextHandle.project(): `role` and `purpose` are ignored and deprecated; "
                "a projection is the same for every role.",
                DeprecationWarning,
                stacklevel=2,
            )
        if self._mailbox.accepting:
            request_id = check_request_id(request_id)  # one NFC key per published projection
            published = self._published.projection(request_id)
            if published is not None:
                await checkpoint()  # an ask is a checkpoint, answered at once or not
                return published
        reply = await self._ask(Project(request_id=request_id))
        assert isinstance(reply, Projection)
        return reply

    async def append_events(
        self,
        request_id: str,
        events: Sequence[Mapping[str, Any]],
        *,
        updates: Mapping[str, Any] | None = None,
        key: str | None = None,
    ) -> int:
        """Append events and set top-level fields (e.g. ``result``, ``status``) in one write.

        An event without ``timestamp`` gets the current time. Waits for the write to be on
        disk (fsynced); returns the new event count. Raises like ``project``.

        With a ``key`` (any string naming this unit of work, e.g. an envelope id) the append is
        idempotent: every event carries it as ``append_key``, and asking again with the same key
        (after an ``AskTimeout``, say) writes nothing and returns the count the first append
        left. Keys are looked for among the record's last 256 events.
        """
        reply = await self.append_keyed(request_id, events, updates=updates, key=key)
        return reply.count

    async def append_keyed(
        self,
        request_id: str,
        events: Sequence[Mapping[str, Any]],
        *,
        updates: Mapping[str, Any] | None = None,
        key: str | None = None,
        unless: Mapping[str, Any] | None = None,
        expect: Mapping[str, Any] | None = None,
    ) -> Appended:
        """``append_events``, answering also whether this call wrote (``applied``) or found
        its key stored already. With ``unless`` (field -> value), nothing is written
        (``refused``) if the record holds one of those values when the write comes; with
        ``expect``, unless it holds exactly each of those (an absent field holds ``None``).
        A refusal's ``fields`` say what the record held instead."""
        check_request_id(request_id)
        stamped = [{**event, "append_key": key} for event in events] if key else events
        # Events and updates are encoded once, here: those bytes are what the store writes.
        message = Append(
            request_id=request_id,
            events=[encode_event(event) for event in stamped],
            updates={
                name: msgspec.Raw(encode_json(value)) for name, value in (updates or {}).items()
            },
            key=key or "",
            unless=dict(unless or {}),
            expect=dict(expect or {}),
        )
        reply = await self._ask(message)
        assert isinstance(reply, Appended)
        return reply

    async def append_event(
        self,
        request_id: str,
        event: Mapping[str, Any],
        *,
        updates: Mapping[str, Any] | None = None,
        key: str | None = None,
    ) -> int:
        """Append one event (see ``append_events``); returns the new event count."""
        return await self.append_events(request_id, [event], updates=updates, key=key)

    async def load(self, request_id: str) -> RecordFields:
        """The whole record as stored now (events as undecoded ``msgspec.Raw``)."""
        reply = await self._ask(Load(request_id=request_id))
        assert isinstance(reply, Loaded)
        return decode_record(reply.record, f"request {request_id}")

    async def recall(self, request_id: str, key: str) -> list[JsonObject]:
        """The events an append with ``key`` stored (``[]`` if none), among the last 256."""
        reply = await self._ask(Recall(request_id=request_id, key=key))
        assert isinstance(reply, Recalled)
        return [msgspec.json.decode(event) for event in reply.events]

    async def create(self, request_id: str, record: Mapping[str, Any]) -> bool:
        """Create the record unless it exists; returns whether it was created."""
        reply = await self._ask(Create(request_id=request_id, record=dict(record)))
        assert isinstance(reply, Created)
        return reply.created
