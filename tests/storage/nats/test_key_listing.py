"""Listing a KV bucket's keys never waits for ever: nats-py's marker that the initial values
are in can be lost under load, and the listing then counts as empty (asked again)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest

from teams_runtime.storage.nats import connection

pytestmark = pytest.mark.anyio


class _Entry:
    def __init__(self, key: str) -> None:
        self.key = key


class _Watcher:
    """A watcher that yields its keys, then the marker, or (``lost``) waits after them."""

    def __init__(self, keys: list[str], *, lost: bool) -> None:
        self.keys, self.lost, self.stopped = keys, lost, False

    async def _entries(self) -> AsyncIterator[_Entry | None]:
        for key in self.keys:
            yield _Entry(key)
        if self.lost:
            await asyncio.Event().wait()  # the marker never comes
        yield None

    def __aiter__(self) -> AsyncIterator[_Entry | None]:
        return self._entries()

    async def stop(self) -> None:
        self.stopped = True


class _Bucket:
    def __init__(self, *watchers: _Watcher) -> None:
        self.watchers = list(watchers)

    async def watch(self, *_: Any, **__: Any) -> _Watcher:
        return self.watchers.pop(0)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # nats-py's own loop


async def test_a_listing_whose_marker_is_lost_ends_empty_and_stops_its_watcher(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(connection, "LISTING_SECONDS", 0.2)
    lost, found = _Watcher(["a"], lost=True), _Watcher(["a", "b"], lost=False)
    bucket = _Bucket(lost, found)
    with anyio.fail_after(5):  # before: it waited for ever
        assert await connection._listed_keys(bucket) == []  # type: ignore[arg-type]
        assert await connection._listed_keys(bucket) == ["a", "b"]  # type: ignore[arg-type]
    assert lost.stopped and found.stopped  # no consumer left behind either way
