"""Benchmark helpers: asks about 12 requests while another request is stuck in the store.

A request is stuck as a long-running service meets it: on files, another process holds its
record's lock (a Ctrl-Z'd `append`, a hung disk); on NATS, another writer published part of an
append and has not committed it, so its appends wait. The row compares the seconds the other
requests' asks take with it stuck and without: one ContextActor, asks at once from 12 tasks.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

import anyio

from teams_runtime import PromptContextConfig, open_context
from teams_runtime.actors.context._actor import ContextHandle
from teams_runtime.storage import RecordStore
from teams_runtime.storage.nats import _append_writer as append_writer

__all__ = [
    "held_lock",
    "lock_held",
    "nats_kept_busy",
    "publish_uncommitted",
    "seconds_beside",
]

Stall = Callable[[], AbstractContextManager[Callable[[], None]]]

ROUNDS = 10  # appends (each followed by a projection) per other request
_NOTE = {"type": "note", "actor": "qa", "summary": "benchmark append"}

# Another process holding a record's lock as a stalled writer would (a Ctrl-Z'd `append`):
# an exclusive flock on `<id>.json.lock`, held until its stdin closes.
_HOLD_LOCK = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)
fcntl.flock(fd, fcntl.LOCK_EX)
print("locked", flush=True)
sys.stdin.read()
"""

# Another host's writer that published a message of its append and has not committed it: the
# request's appends wait for it (until its window, ABANDONED_SECONDS, passes).
_PUBLISH_UNCOMMITTED = """
import asyncio, sys
import nats

async def main() -> None:
    client = await nats.connect(sys.argv[1])
    try:
        await client.jetstream().publish(
            sys.argv[2], b'{"type": "pending"}', headers={"Tr-Append": "outside"}
        )
    finally:
        await client.close()

asyncio.run(main())
"""


@contextmanager
def held_lock(lock: Path) -> Iterator[Callable[[], None]]:
    """Another process holds ``lock`` (a record's ``<id>.json.lock``) for the block;
    ``release()`` lets it go earlier."""
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLD_LOCK, str(lock)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None

    def release() -> None:
        if holder.poll() is None:
            holder.communicate(timeout=30)  # closes its stdin: it exits, the lock goes

    try:
        assert holder.stdout.readline() == "locked\n"
        yield release
    finally:
        release()


def lock_held(lock: Path) -> Stall:
    """A stall: another process holds ``lock`` until released (``held_lock``)."""
    return lambda: held_lock(lock)


def publish_uncommitted(url: str, subject: str) -> None:
    """Publish, from another process, one message of an append that is never committed."""
    subprocess.run(
        [sys.executable, "-c", _PUBLISH_UNCOMMITTED, url, subject], check=True, timeout=60
    )


def nats_kept_busy(url: str, subject: str) -> Stall:
    """A stall: another writer's uncommitted message on the request's ``subject``; released by
    letting this process deem it abandoned at once (it waits ``ABANDONED_SECONDS`` else)."""

    @contextmanager
    def stall() -> Iterator[Callable[[], None]]:
        # The window lives in append_writer, where the append reads it.
        window = append_writer.ABANDONED_SECONDS
        append_writer.ABANDONED_SECONDS = 3600.0
        publish_uncommitted(url, subject)

        def release() -> None:
            append_writer.ABANDONED_SECONDS = 0.0

        try:
            yield release
        finally:
            release()  # the stuck append then goes through at its next retry
            append_writer.ABANDONED_SECONDS = window

    return stall


async def _asks(ctx: ContextHandle, ids: list[str]) -> float:
    async def one(request_id: str) -> None:
        for _ in range(ROUNDS):
            await ctx.append_event(request_id, dict(_NOTE))
            await ctx.project(request_id)

    start = time.perf_counter()
    async with anyio.create_task_group() as group:
        for request_id in ids:
            group.start_soon(one, request_id)
    return time.perf_counter() - start


async def seconds_beside(
    store: RecordStore,
    config: PromptContextConfig,
    ids: list[str],
    stuck: str,
    stall: Stall | None,
) -> float:
    """Seconds for ``ROUNDS`` appends and projections of each of ``ids`` at once, made while an
    append to ``stuck`` waits in the store (``stall``) or right after one that did not."""
    async with open_context("unused", config, store=store) as ctx:
        await ctx.project(stuck)
        if stall is None:
            await ctx.append_event(stuck, dict(_NOTE))
            return await _asks(ctx, ids)
        with stall() as release:
            async with anyio.create_task_group() as group:
                try:
                    group.start_soon(ctx.append_event, stuck, dict(_NOTE))
                    await anyio.wait_all_tasks_blocked()  # its write waits in the store
                    took = await _asks(ctx, ids)
                    statistics = ctx._mailbox.statistics()
                    assert statistics.in_flight == 1, "the stuck append finished: no stall"
                finally:
                    release()
        return took
