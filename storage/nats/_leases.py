"""Worker leases on NATS: the team's ``<prefix>_workers`` KV bucket holds one entry per worker
(who, where, when it last renewed, what it holds), written when it claims, finishes and renews,
removed when it retires. ``status`` reads every entry (docs/scaling.md, "The queue").

Each entry is written with a per-message TTL of the team's lease (``Nats-TTL``, nats-server
2.11 and later): the server itself removes the entry of a worker that stopped renewing (killed,
its host gone) once its lease has passed, when its claims go back to the queue too. A retiring
worker's purge marker expires as well, so nothing is left behind of a worker that is gone.
"""

from __future__ import annotations

import json
import math
import os
import platform
import time
from collections.abc import Callable

import msgspec
import nats.errors
import nats.js.errors
from nats.js.kv import KeyValue

from teams_runtime.storage.nats._names import id_of_token, token_of
from teams_runtime.storage.nats._server_errors import TTL_DISABLED
from teams_runtime.storage.nats.connection import NatsConnection
from teams_runtime.storage.protocols import Stray, WorkerLease

__all__ = ["LeaseBucket"]

_TTL_HEADER = "Nats-TTL"
_MARKER_TTL = "1s"  # a retired worker's purge marker: gone a second later


class _Lease(msgspec.Struct, frozen=True):
    """A lease entry as teams-runtime writes it (``host`` and ``pid`` are for people)."""

    worker: str
    renewed: float
    holds: list[str] = []


_LEASE_DECODER = msgspec.json.Decoder(_Lease)


class LeaseBucket:
    """The leases bucket as one worker sees it: its own entry, and everyone's.

    ``holds`` says what the worker holds now (``role:request id`` each): asked right before
    each entry is sent."""

    def __init__(
        self, connection: NatsConnection, worker_id: str, holds: Callable[[], list[str]]
    ) -> None:
        self.connection = connection
        self.names = connection.names
        self.worker_id = worker_id
        self._kv: KeyValue | None = None  # looked up at first use: opening a queue costs nothing
        self._holds = holds
        self._host = platform.node()
        self._subject = f"$KV.{self.names.workers}.{token_of(worker_id)}"
        self._with_ttl = True  # until the bucket says it keeps no per-message TTL

    async def _bucket(self) -> KeyValue:
        if self._kv is None:
            self._kv = await self.connection.js.key_value(self.names.workers)
        return self._kv

    def _entry(self) -> bytes:
        """This worker's entry in the leases bucket: who, where, when, and what it holds now."""
        lease = {
            "worker": self.worker_id,
            "host": self._host,
            "pid": os.getpid(),
            "renewed": time.time(),
            "holds": self._holds(),
        }
        return json.dumps(lease).encode()

    async def _publish(self, data: bytes, headers: dict[str, str], ttl: str) -> None:
        """Publish to this worker's key with ``ttl``, or without one on a bucket that keeps
        none (made by hand, or by an older client: ``ensure_layout`` turns it on)."""
        if self._with_ttl:
            try:
                await self.connection.js.publish(
                    self._subject, data, headers={**headers, _TTL_HEADER: ttl}
                )
                return
            except nats.js.errors.APIError as exc:
                if exc.err_code != TTL_DISABLED:
                    raise
                self._with_ttl = False  # the entry then stays until the worker retires
        await self.connection.js.publish(self._subject, data, headers=headers or None)

    async def write(self, *, must: bool) -> None:
        """Write this worker's entry, to expire one lease after (unless written again); a
        failure is raised only if ``must``."""
        # The entry is made here, on the connection's loop, right before it is sent: entries
        # reach the server in the order they were made, so the last one says what is held.
        ttl = str(max(math.ceil(self.connection.queue_ack_seconds), 1))
        try:
            await self._publish(self._entry(), {}, ttl)
        except (TimeoutError, nats.errors.Error):
            if must:
                raise
            # Only what `status` shows: the next renewal (a third of the lease) writes it.

    async def remove(self) -> None:
        """Remove this worker's entry (it retires): a purge, whose marker expires too."""
        purge = {"KV-Operation": "PURGE", "Nats-Rollup": "sub"}
        await self._publish(b"", purge, _MARKER_TTL)

    async def _entries(self) -> list[tuple[str, bytes | None]]:
        """Every key of the bucket and its value (``None``: removed meanwhile)."""
        bucket = await self._bucket()
        entries = []
        for key in sorted(await self.connection.bucket_keys(bucket, self.names.workers)):
            try:
                entries.append((key, (await bucket.get(key)).value))
            except nats.js.errors.KeyNotFoundError:
                entries.append((key, None))
        return entries

    async def every_lease(self, lease_seconds: float) -> list[WorkerLease]:
        """Every worker's entry, alive while renewed within ``lease_seconds``; an entry
        teams-runtime did not write is skipped (``strays`` names it)."""
        now = time.time()
        leases = []
        for key, value in await self._entries():
            lease = _lease_of(key, value)
            if lease is None:
                continue
            age = max(now - lease.renewed, 0.0)
            leases.append(
                WorkerLease(
                    worker=lease.worker,
                    alive=age <= lease_seconds,
                    lease_age=age,
                    holds=lease.holds,
                )
            )
        return leases

    async def strays(self) -> list[Stray]:
        """The bucket's keys and values that are no lease teams-runtime writes."""
        return [
            Stray(
                where=f"nats:{self.names.workers}/{key}",
                reason="not a worker's lease entry as teams-runtime writes it; skipped",
            )
            for key, value in await self._entries()
            if value is not None and _lease_of(key, value) is None
        ]


def _lease_of(key: str, value: bytes | None) -> _Lease | None:
    """The lease a key holds; ``None`` if it is gone, or not one teams-runtime wrote (a key no
    worker id reads back from, a value of another shape or for another worker)."""
    worker = id_of_token(key)
    if worker is None or value is None:
        return None
    try:
        lease = _LEASE_DECODER.decode(value)
    except (msgspec.DecodeError, RecursionError):
        return None
    return lease if lease.worker == worker and math.isfinite(lease.renewed) else None
