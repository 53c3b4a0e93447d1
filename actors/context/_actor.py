"""The ContextActor: the one owner of a workspace's request store.

Roles never touch records; they ask this actor (``codecs.context_asks``: values, in this
process) through a ``ContextHandle``. It answers projections from a per-request digest (read
once per record version) and publishes each answer it gives (``actors.context._published``),
which handles serve while the record keeps that version. It is the single writer of records in
its process (appends go through the ``RecordStore``'s locked, atomic path). It never asks
anyone, so no cycle of asks can deadlock.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Hashable
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import msgspec
from anyio.abc import TaskStatus

from teams_runtime._logs import logger
from teams_runtime.actors._mailbox import LATER, Lanes, Later, Mailbox, MailboxStatistics
from teams_runtime.actors.context._handle import ContextHandle
from teams_runtime.actors.context._published import PublishedProjections, Snapshot
from teams_runtime.codecs.config import DEFAULT_REQUESTS_IN_FLIGHT, PromptContextConfig
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
from teams_runtime.codecs.evidence import append_key_of
from teams_runtime.codecs.projection_reply import Projection
from teams_runtime.codecs.request_records import EVENTS_KEY
from teams_runtime.exceptions import TeamsRuntimeError, UnknownRequestError
from teams_runtime.policy.digest import (
    RequestDigest,
    digest_from_fields,
    digest_from_parts,
)
from teams_runtime.policy.projection import tail_window
from teams_runtime.storage import (
    IDEMPOTENCY_WINDOW,
    AppendOutcome,
    IndexedParts,
    RecordRead,
    RecordStore,
    Workspace,
)
from teams_runtime.storage.opening import open_storage

__all__ = ["DEFAULT_ASK_TIMEOUT", "ContextActor", "ContextHandle", "open_context"]

DEFAULT_ASK_TIMEOUT = 30.0


def _request_of(message: ContextAsk) -> str | None:
    """The lane of an ask: its request (an unknown message has none, and a lane of its own)."""
    request_id: str | None = getattr(message, "request_id", None)
    return request_id


class _Cached(msgspec.Struct):
    version: Hashable
    digest: RequestDigest


def _digest_of(read: RecordRead, config: PromptContextConfig) -> _Cached:
    if isinstance(read, IndexedParts):
        return _Cached(read.version, digest_from_parts(read, config))
    return _Cached(read.version, digest_from_fields(read.fields, config))


class ContextActor:
    """Owns the request store of one workspace; answers ``ContextAsk`` messages.

    Each request's asks are answered in a lane of their own (``actors._mailbox.Lanes``): in
    order for one request, never waiting for another's. Its state (the digests, the published
    answers) changes only in its own tasks (the serving task and the lanes), on the event
    loop, where it awaits the store (the file store runs its blocking work in worker threads
    of its own, NATS answers on the loop).
    """

    def __init__(
        self,
        store: RecordStore,
        config: PromptContextConfig,
        *,
        inbox_size: int = 64,
        max_cached: int = 1024,
        requests_in_flight: int = DEFAULT_REQUESTS_IN_FLIGHT,
    ) -> None:
        self.store = store
        self.config = config
        self._mailbox: Mailbox[ContextAsk] = Mailbox("context", inbox_size)
        # One lane per request: asks about different requests never wait for each other, those
        # about one request are answered in order (its writes stay ordered).
        self._lanes: Lanes[ContextAsk] = Lanes(
            key=_request_of,
            most=requests_in_flight,
            noun="requests",
            limit="team.requests_in_flight in team_runtime.yaml",
            at_once=self._respond_at_once,
        )
        self._cache: dict[str, _Cached] = {}
        self._max_cached = max_cached
        self._published = PublishedProjections(store.version, max_cached)
        # An index keeps a bounded tail; compaction off needs every event (None).
        self._tail: int | None = tail_window(config) if config.enabled else None

    async def serve(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Answer asks until ``stop``; start it with ``task_group.start``."""
        await self._mailbox.serve(self._respond, lanes=self._lanes, task_status=task_status)

    def stop(self) -> None:
        """Stop taking asks; queued asks are answered with ``ActorStopped``."""
        self._mailbox.stop()

    def statistics(self) -> MailboxStatistics:
        """The mailbox's counts: what waits, what was served (asks served from a published
        projection never reach the mailbox and are not among them)."""
        return self._mailbox.statistics()

    def handle(self, ask_timeout: float = DEFAULT_ASK_TIMEOUT) -> ContextHandle:
        """A handle for roles to ask this actor, each ask under ``ask_timeout`` seconds; a
        write (append, create) under that plus what the store may spend retrying one
        (``RecordStore.append_seconds``), so the store's own error comes first."""
        write_timeout = ask_timeout + self.store.append_seconds
        return ContextHandle(
            self._mailbox, self._published, ask_timeout=ask_timeout, write_timeout=write_timeout
        )

    # An error raised here reaches the asker as it is (the mailbox raises it in the asker's
    # task): the same object, attributes and all. The actor keeps serving.
    async def _respond(self, message: ContextAsk) -> ContextReply:
        try:
            return await self._dispatch(message)
        except TeamsRuntimeError:
            raise
        except Exception as exc:  # a bug: logged here too, the asker hears of it
            logger.opt(exception=exc).error("context actor failed on {}", type(message).__name__)
            raise

    def _respond_at_once(self, message: ContextAsk) -> ContextReply | Later:
        """The answer to a projection ask that needs no waiting (the digest is current, or the
        record is small), in the serving task: no lane, no task of its own; else ``LATER``."""
        if not isinstance(message, Project):
            return LATER
        try:
            answer = self._project_nowait(message.request_id)
        except TeamsRuntimeError:
            raise
        except Exception as exc:  # a bug: logged here too, the asker hears of it
            logger.opt(exception=exc).error("context actor failed on Project")
            raise
        return LATER if answer is None else answer

    async def _dispatch(self, message: ContextAsk) -> ContextReply:
        match message:
            case Project(request_id=request_id):
                return await self._project(request_id)
            case Append(
                request_id=request_id,
                events=events,
                updates=updates,
                key=key,
                unless=unless,
                expect=expect,
            ):
                return await self._append(request_id, events, updates, key, unless, expect)
            case Load(request_id=request_id):
                return Loaded(record=await self.store.load(request_id))
            case Recall(request_id=request_id, key=key):
                return Recalled(events=await self._recall(request_id, key))
            case Create(request_id=request_id, record=record):
                return Created(created=await self.store.create(request_id, record))
            case _:
                raise TypeError(f"the context actor does not understand {message!r}")

    async def _recall(self, request_id: str, key: str) -> list[bytes]:
        read = await self.store.read(request_id, tail=IDEMPOTENCY_WINDOW)
        if isinstance(read, IndexedParts):
            last = read.tail
        else:
            events = read.fields.get(EVENTS_KEY)
            last = events[-IDEMPOTENCY_WINDOW:] if isinstance(events, list) else []
        return [bytes(raw) for raw in last if append_key_of(raw) == key]

    def _remember(self, request_id: str, cached: _Cached) -> None:
        self._cache.pop(request_id, None)
        self._cache[request_id] = cached  # most recently loaded last: the oldest goes first
        while len(self._cache) > self._max_cached:
            oldest = next(iter(self._cache))
            del self._cache[oldest]

    def _forget(self, request_id: str) -> None:
        self._cache.pop(request_id, None)
        self._published.retract(request_id)

    async def _project(self, request_id: str) -> Projection:
        # Asked when the handle found no published projection for the record's version now.
        answer = self._project_nowait(request_id)
        if answer is not None:
            return answer
        try:  # a read that waits (a large record, a server)
            current = await self._read(request_id)
        except UnknownRequestError:
            self._forget(request_id)  # removed: no answer for it stays published
            raise
        return self._publish(request_id, current)

    def _project_nowait(self, request_id: str) -> Projection | None:
        """The answer if it needs no waiting (see ``_current_nowait``), published; else None."""
        try:
            current = self._current_nowait(request_id, self._cache.get(request_id))
        except UnknownRequestError:
            self._forget(request_id)
            raise
        return None if current is None else self._publish(request_id, current)

    def _publish(self, request_id: str, current: _Cached) -> Projection:
        if self._cache.get(request_id) is not current:
            self._remember(request_id, current)
        answer = current.digest.project()  # computed once per version, then shared
        self._published.publish(request_id, Snapshot(current.version, answer))
        return answer

    def _current_nowait(self, request_id: str, cached: _Cached | None) -> _Cached | None:
        """``cached`` while the record keeps its version, else the record if the store reads
        it without waiting (a small file: cheaper here than a worker thread's round trip);
        ``None``: it needs ``_read``, awaited."""
        if cached is not None and self.store.version(request_id) == cached.version:
            return cached
        read = self.store.read_nowait(request_id, tail=self._tail)
        if read is None:
            return None
        current = self._digest(request_id, read)
        return current if current.digest.complete else None

    async def _read(self, request_id: str) -> _Cached:
        """Read and summarise the record (changes nothing shared: the caller files it); the
        whole record when its index's tail does not reach a stepped backfill."""
        cached = self._digest(request_id, await self.store.read(request_id, tail=self._tail))
        if cached.digest.complete:
            return cached
        return self._digest(request_id, await self.store.read(request_id, tail=None))

    def _digest(self, request_id: str, read: RecordRead) -> _Cached:
        cached = _digest_of(read, self.config)
        logger.debug("read {} ({} events)", request_id, cached.digest.count)
        return cached

    async def _append(
        self,
        request_id: str,
        raw_events: list[msgspec.Raw],
        raw_updates: dict[str, msgspec.Raw],
        key: str,
        refuse_if: dict[str, Any],
        expected: dict[str, Any],
    ) -> Appended:
        cached = self._cache.get(request_id)
        config = self.config

        async def write() -> tuple[AppendOutcome, _Cached | None, bool]:
            """The store's write and, when it takes a build or a read, the new digest; True
            when the cached digest is to be updated in place instead."""
            appended = await self.store.append(
                request_id, raw_events, raw_updates, key=key, unless=refuse_if, expect=expected
            )
            parts = appended.parts
            if parts is None:  # done before, or refused: nothing changed, the cache stays
                return appended, None, False
            if self._tail is not None and parts.covers(self._tail):
                # What was just written, as written: exact whoever wrote before us.
                digest = digest_from_parts(parts, config)
                if digest.complete:
                    return appended, _Cached(parts.version, digest), False
                # A stepped backfill older than the index's tail: the whole record says it.
                whole = await self.store.read(request_id, tail=None)
                return appended, _digest_of(whole, config), False
            if (
                cached is not None
                and cached.version == appended.read_version
                and not appended.relaid
            ):
                # Every event kept (compaction off): nobody else wrote since we summarised and
                # the old events kept their bytes, so update in place, no re-read.
                return appended, None, True
            read = await self.store.read(request_id, tail=self._tail)
            return appended, _digest_of(read, config), False

        try:
            stored, fresh, in_place = await write()
        except BaseException:
            self._published.retract(request_id)  # it may have changed: the next ask reads
            raise
        if stored.parts is not None:
            # Withdrawn only now: until the write was done the old answer was the truth, and
            # handles asking meanwhile were served it without waiting for the write.
            self._published.retract(request_id)
        if in_place and cached is not None and stored.parts is not None:
            # Only once the write is done: the digest is the actor's, changed in its task.
            cached.digest.append(raw_events, raw_updates)
            fresh = _Cached(stored.parts.version, cached.digest)
        if fresh is not None:
            self._remember(request_id, fresh)
        return Appended(
            count=stored.count, applied=stored.applied, refused=stored.refused, fields=stored.fields
        )


@asynccontextmanager
async def open_context(
    workspace: str | Path,
    config: PromptContextConfig | None = None,
    *,
    ask_timeout: float = DEFAULT_ASK_TIMEOUT,
    inbox_size: int = 64,
    store: RecordStore | None = None,
    requests_in_flight: int = DEFAULT_REQUESTS_IN_FLIGHT,
) -> AsyncIterator[ContextHandle]:
    """Start a ContextActor for ``workspace`` and yield a handle to it.

    Without ``config`` the defaults apply (compaction on); without ``store``, the workspace's
    storage, opened here and closed on exit (on NATS, a connection of this scope's own). It
    answers asks about up to ``requests_in_flight`` requests at once (more: ``ActorBusy``).
    On exit the actor stops: asks still queued are answered with ``ActorStopped``.
    """
    async with AsyncExitStack() as owned:
        if store is None:  # the workspace's storage, open while the actor runs (NATS connects)
            storage = await owned.enter_async_context(open_storage(Workspace(workspace)))
            store = storage.store
        actor = ContextActor(
            store,
            config or PromptContextConfig(),
            inbox_size=inbox_size,
            requests_in_flight=requests_in_flight,
        )
        failure: Exception | None = None
        async with anyio.create_task_group() as group:
            # Not `start`: asks wait in the mailbox until it serves, and that saves the round trip.
            group.start_soon(actor.serve)
            try:
                yield actor.handle(ask_timeout)
            except Exception as exc:
                # Re-raised below, outside the task group, so callers get the error itself
                # rather than an ExceptionGroup. Cancellation (BaseException) still goes
                # through the group.
                failure = exc
            finally:
                actor.stop()
        if failure is not None:
            raise failure
