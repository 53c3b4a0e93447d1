"""Waiting answers of people's roles on NATS: ``NatsAnswerInbox``, the ``AnswerInbox`` of the
``nats`` storage (docs/scaling.md).

One KV bucket per team (``<prefix>_inbox``), one entry per waiting answer, keyed
``<role token>.<name>`` (``name`` made from the envelope's id: one envelope waits once, on
every host). ``put`` is a create, which the server refuses when the key holds a value, so two
workers putting one envelope keep one; ``remove`` deletes at the revision it read, so of two
answers removing one entry, one did. A person on any host sees and answers what a worker on
another put here.
"""

from __future__ import annotations

import asyncio
import contextlib

import nats.js.errors
from nats.js.kv import KeyValue

from teams_runtime.codecs.waiting_answers import (
    WaitingAnswer,
    decode_waiting,
    encode_waiting,
    waiting_name,
)
from teams_runtime.storage.nats._names import id_of_token, token_of
from teams_runtime.storage.nats._server_errors import wrong_last_sequence
from teams_runtime.storage.nats.connection import NatsConnection

__all__ = ["NatsAnswerInbox"]


def _key(item: WaitingAnswer) -> str:
    return f"{token_of(item.role)}.{waiting_name(item.envelope_id)}"


class NatsAnswerInbox:
    """The team's inbox on a NATS server."""

    def __init__(self, connection: NatsConnection) -> None:
        self.connection = connection
        self.names = connection.names
        self._kv: KeyValue | None = None  # looked up at first use: opening costs nothing

    async def _bucket(self) -> KeyValue:
        if self._kv is None:
            self._kv = await self.connection.js.key_value(self.names.inbox)
        return self._kv

    async def put(self, item: WaitingAnswer) -> bool:
        async def put() -> bool:
            try:
                await (await self._bucket()).create(_key(item), encode_waiting(item))
            except nats.js.errors.KeyWrongLastSequenceError:
                return False  # it waits already (put again after a crash, or by another host)
            return True

        created: bool = await self.connection.run(put, what="an inbox put")
        return created

    async def renew(self, item: WaitingAnswer) -> None:
        async def renew() -> None:
            await (await self._bucket()).put(_key(item), encode_waiting(item))

        await self.connection.run(renew, what="an inbox renewal")

    async def remove(self, item: WaitingAnswer) -> bool:
        async def remove() -> bool:
            bucket = await self._bucket()
            try:
                entry = await bucket.get(_key(item))
                return await bucket.delete(_key(item), last=entry.revision)
            except nats.js.errors.KeyNotFoundError:
                return False  # removed by someone else
            except nats.js.errors.APIError as exc:
                if wrong_last_sequence(exc):
                    return False  # removed (or renewed) by someone else meanwhile
                raise

        removed: bool = await self.connection.run(remove, what="an inbox removal")
        return removed

    async def _keys(self) -> list[str]:
        return await self.connection.bucket_keys(await self._bucket(), self.names.inbox)

    async def items(self) -> list[WaitingAnswer]:
        async def look() -> list[WaitingAnswer]:
            bucket = await self._bucket()

            async def one(key: str) -> WaitingAnswer | None:
                with contextlib.suppress(nats.js.errors.KeyNotFoundError):
                    entry = await bucket.get(key)
                    item = decode_waiting(entry.value or b"")
                    if item is not None and _key(item) == key:
                        return item
                return None  # removed meanwhile, or not an entry teams-runtime wrote

            found = await asyncio.gather(*(one(key) for key in await self._keys()))
            return [item for item in found if item is not None]

        items: list[WaitingAnswer] = await self.connection.run(look, what="an inbox listing")
        return sorted(items, key=lambda item: (item.since, item.envelope_id))

    async def counts(self) -> dict[str, int]:
        async def look() -> dict[str, int]:
            counts: dict[str, int] = {}
            for key in await self._keys():
                role = id_of_token(key.split(".", 1)[0])
                if role is not None:  # a key no inbox put writes: not counted
                    counts[role] = counts.get(role, 0) + 1
            return counts

        counts: dict[str, int] = await self.connection.run(look, what="an inbox count")
        return counts
