"""The rejected envelopes of a team on NATS: messages of the ``<prefix>_rejected`` stream, on
``<prefix>.rejected.<role>.<request token>`` with their reason in a header (as
``NatsWorkQueue.reject`` sets them aside), listed by sequence and put back on their waiting
subject as they were."""

from __future__ import annotations

import nats.js.errors
from nats.js.api import RawStreamMsg

from teams_runtime.storage.nats._names import request_id_of_token
from teams_runtime.storage.nats.connection import NatsConnection
from teams_runtime.storage.rejected import RejectedEnvelope

__all__ = ["REASON_HEADER", "NatsRejectedShelf"]

REASON_HEADER = "Tr-Reason"  # a rejected envelope's reason (one content-free line)
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

    def _envelope(self, message: RawStreamMsg) -> RejectedEnvelope:
        # A stray set aside by `purge-strays` may have a subject of any shape: "" for both.
        role, token = self.names.place_of(message.subject or "") or ("", "")
        return RejectedEnvelope(
            role=role,
            request_id=request_id_of_token(token) or "",
            name=str(message.seq),
            reason=(message.headers or {}).get(REASON_HEADER, ""),
        )

    async def listing(self) -> list[RejectedEnvelope]:
        async def look() -> list[RejectedEnvelope]:
            return [self._envelope(message) for message in await self._messages()]

        found: list[RejectedEnvelope] = await self.connection.run(look, what="a rejected listing")
        return found

    async def requeue(self, request_id: str | None = None) -> int:
        names = self.names

        async def put_back() -> int:
            moved = 0
            for message in await self._messages():
                if request_id is not None and self._envelope(message).request_id != request_id:
                    continue
                place = names.place_of(message.subject or "")
                if place is None or request_id_of_token(place[1]) is None:
                    continue  # a stray set aside (`purge-strays`): no role's queue to go back to
                waiting = names.waiting_subject(*place)
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
