"""One role at a time per request: the lock every role actor of a worker takes per request."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio

__all__ = ["RequestLocks"]


class RequestLocks:
    """One role at a time per request, across all roles of the team."""

    def __init__(self) -> None:
        self._locks: dict[str, anyio.Lock] = {}
        self._users: dict[str, int] = {}

    @asynccontextmanager
    async def hold(self, request_id: str) -> AsyncIterator[None]:
        """Wait for the request's lock; held for the whole handling of one envelope."""
        lock = self._locks.setdefault(request_id, anyio.Lock())
        self._users[request_id] = self._users.get(request_id, 0) + 1
        try:
            async with lock:
                yield
        finally:
            self._users[request_id] -= 1
            if not self._users[request_id]:  # forget idle requests: no growth over time
                del self._users[request_id], self._locks[request_id]
