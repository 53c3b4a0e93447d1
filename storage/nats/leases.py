"""Worker leases on NATS: the team's ``<prefix>_workers`` KV bucket holds one entry per worker
(who, where, when it last renewed, what it holds), written when it claims, finishes and renews,
removed when it retires. ``status`` reads every entry (docs/scaling.md, "The queue")."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import time
from collections.abc import Callable
from typing import Any

import msgspec
import nats.errors
import nats.js.errors
from nats.js.kv import KeyValue

from teams_runtime.storage.nats.connection import NatsConnection
from teams_runtime.storage.nats.tokens import id_of_token, token_of
from teams_runtime.storage.protocols import WorkerLease

__all__ = ["LeaseBucket"]

_LEASE_DECODER = msgspec.json.Decoder(dict[str, Any])


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
        self._host = socket.gethostname()

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

    async def write(self, *, must: bool) -> None:
        """Write this worker's entry; a failure is raised only if ``must``."""
        # The entry is made here, on the connection's loop, right before it is sent: entries
        # reach the server in the order they were made, so the last one says what is held.
        try:
            await (await self._bucket()).put(token_of(self.worker_id), self._entry())
        except (TimeoutError, nats.errors.Error):
            if must:
                raise
            # Only what `status` shows: the next renewal (a third of the lease) writes it.

    async def remove(self) -> None:
        """Remove this worker's entry (it retires)."""
        with contextlib.suppress(nats.js.errors.KeyNotFoundError):
            await (await self._bucket()).delete(token_of(self.worker_id))

    async def every_lease(self, lease_seconds: float) -> list[WorkerLease]:
        """Every worker's entry, alive while renewed within ``lease_seconds``."""
        bucket = await self._bucket()
        keys = await self.connection.bucket_keys(bucket, self.names.workers)
        now = time.time()
        leases = []
        for key in sorted(keys):
            try:
                entry = await bucket.get(key)
                lease = _LEASE_DECODER.decode(entry.value or b"")
                age = max(now - float(lease.get("renewed", 0)), 0.0)
                holds = [str(item) for item in lease.get("holds", [])]
            except (nats.js.errors.KeyNotFoundError, msgspec.DecodeError, TypeError, ValueError):
                continue  # removed meanwhile, or not a lease teams-runtime wrote
            leases.append(
                WorkerLease(
                    worker=id_of_token(key),
                    alive=age <= lease_seconds,
                    lease_age=age,
                    holds=holds,
                )
            )
        return leases
