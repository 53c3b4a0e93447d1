"""The rejected envelopes of a team on NATS: messages of the ``<prefix>_rejected`` stream, on
``<prefix>.rejected.<role>.<request token>`` with their reason in a header (as
``NatsWorkQueue.reject`` sets them aside), listed by sequence and put back on their waiting
subject as they were.

One whose subject would put it back where no role consumer reads it as it is (a role no host
serves, a subject of another shape, a last token that is no request id: the strays
``purge-strays`` set aside, and a worker's reject of such a token) is listed as a stray and
never put back."""

from __future__ import annotations

from collections.abc import Collection

import nats.js.errors
from nats.js.api import RawStreamMsg

from teams_runtime.storage.nats._names import REASON_HEADER, request_id_of_token, token_of
from teams_runtime.storage.nats._stray_subjects import reading_roles
from teams_runtime.storage.nats.connection import NatsConnection
from teams_runtime.storage.rejected import RejectedEnvelope

__all__ = ["REASON_HEADER", "NatsRejectedShelf"]

_DELETE_FAILED = 10057  # JetStream: the message to delete is gone (put back meanwhile)


class NatsRejectedShelf:
    """The team's rejected stream, through one connection (async, like the queue)."""

    def __init__(self, connection: NatsConnection) -> None:
        self.connection = connection
        self.names = connection.names

    async def _messages(self) -> list[RawStreamMsg]:
        """Every rejected envelope, oldest first (read, not consumed)."""
        names, seq = self.names, 1
        messages: list[RawStreamMsg] = []
        while True:
            try:
                message = await self.connection.js.get_msg(
                    names.rejected, seq=seq, subject=names.every_rejected, next=True
                )
            except nats.js.errors.NotFoundError:
                return messages
            if message.seq is None:
                return messages
            messages.append(message)
            seq = message.seq + 1

    def _envelope(self, message: RawStreamMsg, roles: Collection[str]) -> RejectedEnvelope:
        # A stray set aside by `purge-strays` may have a subject of any shape.
        role, token = self.names.place_of(message.subject or "") or ("", "")
        request_id = request_id_of_token(token) or ""
        # Put back, it would wait where no role's consumer delivers it, or be rejected again
        # for its token: a stray, as on files, whose role is none of the team's.
        stray = role not in roles or not request_id
        return RejectedEnvelope(
            role="" if stray else role,
            request_id=request_id,
            name=str(message.seq),
            reason=(message.headers or {}).get(REASON_HEADER, ""),
            stray=stray,
        )

    async def _envelopes(self) -> list[tuple[RawStreamMsg, RejectedEnvelope]]:
        """Every rejected envelope, oldest first, with its message."""
        roles = await reading_roles(self.connection.js, self.names)
        return [(message, self._envelope(message, roles)) for message in await self._messages()]

    async def listing(self) -> list[RejectedEnvelope]:
        async def look() -> list[RejectedEnvelope]:
            return [envelope for _, envelope in await self._envelopes()]

        found: list[RejectedEnvelope] = await self.connection.run(look, what="a rejected listing")
        return found

    async def requeue(self, request_id: str | None = None) -> int:
        names = self.names

        async def put_back() -> int:
            moved = 0
            for message, envelope in await self._envelopes():
                if envelope.stray or (request_id is not None and envelope.request_id != request_id):
                    continue  # a stray stays: no role reads where it came from
                waiting = names.waiting_subject(envelope.role, token_of(envelope.request_id))
                # Once, should a retry after a lost answer publish it again.
                once = {"Nats-Msg-Id": f"requeued:{names.rejected}/{message.seq}"}
                await self.connection.js.publish(waiting, message.data or b"", headers=once)
                try:
                    await self.connection.api(
                        f"STREAM.MSG.DELETE.{names.rejected}", {"seq": message.seq}
                    )
                except nats.js.errors.APIError as exc:
                    if exc.err_code != _DELETE_FAILED:
                        raise
                    continue  # another `retry --rejected` put it back first
                moved += 1
            return moved

        # A refusal (the queue stream at its limit) is the connection's StorageError; a
        # retry after the server was away publishes each once (its message id).
        moved: int = await self.connection.run(put_back, what="a put-back of rejected envelopes")
        return moved
