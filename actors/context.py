"""The ContextActor: the one owner of a workspace's request store.

Roles never touch records; they ask this actor (``codecs.context_protocol``). It answers
projections from a per-request digest (read once per record version), and it is the single
writer of records in its process (appends go through the ``RecordStore``'s locked, atomic
path). It never asks anyone, so no cycle of asks can deadlock.
"""

from __future__ import annotations

import warnings
from collections.abc import AsyncIterator, Callable, Hashable, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import msgspec
from anyio.abc import TaskStatus
from anyio.lowlevel import checkpoint
from loguru import logger

from teams_runtime.actors.mailbox import Mailbox, MailboxStatistics
from teams_runtime.codecs.config import PromptContextConfig
from teams_runtime.codecs.context_protocol import (
    Append,
    Appended,
    ContextAsk,
    ContextReply,
    Create,
    Created,
    Failed,
    Load,
    Loaded,
    Project,
    Recall,
    Recalled,
    failure_of,
    raise_failure,
)
from teams_runtime.codecs.evidence import append_key_of
from teams_runtime.codecs.projection_reply import Projection
from teams_runtime.codecs.request_ids import check_request_id, with_checked_request_id
from teams_runtime.codecs.request_records import (
    EVENTS_KEY,
    RecordFields,
    decode_record,
    encode_event,
    encode_json,
)
from teams_runtime.exceptions import TeamsRuntimeError
from teams_runtime.policy.digest import (
    RequestDigest,
    digest_from_fields,
    digest_from_parts,
)
from teams_runtime.storage import (
    IDEMPOTENCY_WINDOW,
    AppendOutcome,
    IndexedParts,
    RecordRead,
    RecordStore,
    Workspace,
)
from teams_runtime.storage.backends import open_backend

__all__ = ["DEFAULT_ASK_TIMEOUT", "ContextActor", "ContextHandle", "open_context"]

DEFAULT_ASK_TIMEOUT = 30.0


class _Cached(msgspec.Struct):
    version: Hashable
    digest: RequestDigest


def _digest_of(read: RecordRead, config: PromptContextConfig) -> _Cached:
    if isinstance(read, IndexedParts):
        return _Cached(read.version, digest_from_parts(read, config))
    return _Cached(read.version, digest_from_fields(read.fields, config))


class ContextActor:
    """Owns the request store of one workspace; answers ``ContextAsk`` messages."""

    def __init__(
        self,
        store: RecordStore,
        config: PromptContextConfig,
        *,
        inbox_size: int = 64,
        max_cached: int = 1024,
    ) -> None:
        self.store = store
        self.config = config
        self._mailbox: Mailbox[ContextAsk] = Mailbox("context", inbox_size)
        self._cache: dict[str, _Cached] = {}
        self._max_cached = max_cached
        # An index keeps a bounded tail; compaction off needs every event (None).
        self._tail: int | None = config.max_events if config.enabled else None

    async def serve(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Answer asks until ``stop``; start it with ``task_group.start``."""
        await self._mailbox.serve(self._answer, task_status=task_status)

    def stop(self) -> None:
        """Stop taking asks; queued asks are answered with ``ActorStopped``."""
        self._mailbox.stop()

    def statistics(self) -> MailboxStatistics:
        """The inbox's counts: what waits, what was served (answers given without the inbox,
        from the cache or a small record read in place, are not among them)."""
        return self._mailbox.statistics()

    def handle(self, ask_timeout: float = DEFAULT_ASK_TIMEOUT) -> ContextHandle:
        """A handle for roles to ask this actor, each ask under ``ask_timeout`` seconds; a
        write (append, create) under that plus what the store may spend retrying one
        (``RecordStore.append_seconds``), so the store's own error comes first."""
        write_timeout = ask_timeout + self.store.append_seconds
        return ContextHandle(self._mailbox, ask_timeout, self.answer_now, write_timeout)

    async def _answer(self, message: ContextAsk) -> ContextReply:
        try:
            return await self._dispatch(message)
        except TeamsRuntimeError as exc:
            return failure_of(exc)
        except Exception as exc:  # a bug: the asker hears of it, the actor keeps serving
            logger.opt(exception=exc).error("context actor failed on {}", type(message).__name__)
            return failure_of(exc)

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
                record = await anyio.to_thread.run_sync(self.store.load, request_id)
                return Loaded(record=record)
            case Recall(request_id=request_id, key=key):
                events = await anyio.to_thread.run_sync(self._recall, request_id, key)
                return Recalled(events=events)
            case Create(request_id=request_id, record=record):
                fields = msgspec.json.decode(record)
                created = await anyio.to_thread.run_sync(self.store.create, request_id, fields)
                return Created(created=created)
            case _:
                raise TypeError(f"the context actor does not understand {message!r}")

    def _recall(self, request_id: str, key: str) -> list[bytes]:
        read = self.store.read(request_id, tail=IDEMPOTENCY_WINDOW)
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

    def answer_now(self, request_id: str) -> Projection | None:
        """The projection, if it needs no more than a small file read: the cached answer while
        the record is at the version it answers (one ``stat``), or a small record read in place.
        ``None``: ask, the read needs a worker thread (or the record is gone: the ask says so).

        Synchronous, with no await, so on the event loop nothing interleaves with it (worker
        threads change neither the cache nor a digest: their results are filed on the loop):
        handles call it themselves and skip the inbox's scheduling round trip. Writes still go
        through the inbox; a write that lands meanwhile changes the version, so the next call
        re-reads.
        """
        version = self.store.version(request_id)
        if version is None:
            self._cache.pop(request_id, None)
            return None
        cached = self._cache.get(request_id)
        if cached is None or cached.version != version:
            if not self.store.reads_quickly(version):
                return None
            cached = self._read(request_id)
            self._remember(request_id, cached)
        return cached.digest.project()  # computed once per version, then shared (immutable)

    async def _project(self, request_id: str) -> Projection:
        # One version check per ask, on the event loop on purpose: for files it is one stat
        # answered from the inode cache in about a microsecond, and it is what makes another
        # process's edit visible to the very next ask. A worker thread would cost 50x more.
        answer = self.answer_now(request_id)
        if answer is None:
            # A large record (or none: the read raises the store's own error). The thread only
            # reads; the cache changes here on the loop, where answer_now reads and changes it.
            cached = await anyio.to_thread.run_sync(self._read, request_id)
            self._remember(request_id, cached)
            answer = cached.digest.project()
        return answer

    def _read(self, request_id: str) -> _Cached:
        """Read and summarise the record (blocking: a worker thread's job unless it is small).

        Changes nothing shared: the caller remembers the result, on the event loop.
        """
        cached = _digest_of(self.store.read(request_id, tail=self._tail), self.config)
        logger.debug("read {} ({} events)", request_id, cached.digest.count)
        return cached

    async def _append(
        self,
        request_id: str,
        events: list[bytes],
        updates: dict[str, bytes],
        key: str,
        unless: dict[str, bytes],
        expect: dict[str, bytes],
    ) -> Appended:
        raw_events = [msgspec.Raw(event) for event in events]
        raw_updates = {name: msgspec.Raw(value) for name, value in updates.items()}
        refuse_if = {name: msgspec.json.decode(value) for name, value in unless.items()}
        expected = {name: msgspec.json.decode(value) for name, value in expect.items()}
        cached = self._cache.get(request_id)
        config = self.config

        def write() -> tuple[AppendOutcome, _Cached | None, bool]:
            """The store's write and, when it takes a build or a read, the new digest (the
            worker thread's part); True when the loop is to update the cached digest instead."""
            appended = self.store.append(
                request_id, raw_events, raw_updates, key=key, unless=refuse_if, expect=expected
            )
            parts = appended.parts
            if parts is None:  # done before, or refused: nothing changed, the cache stays
                return appended, None, False
            if self._tail is not None and parts.covers(self._tail):
                # What was just written, as written: exact whoever wrote before us.
                return appended, _Cached(parts.version, digest_from_parts(parts, config)), False
            if (
                cached is not None
                and cached.version == appended.read_version
                and not appended.relaid
            ):
                # Every event kept (compaction off): nobody else wrote since we summarised and
                # the old events kept their bytes, so update in place, no re-read.
                return appended, None, True
            read = self.store.read(request_id, tail=self._tail)
            return appended, _digest_of(read, config), False

        stored, fresh, in_place = await anyio.to_thread.run_sync(write)
        if in_place and cached is not None and stored.parts is not None:
            # On the loop, not in the thread: answer_now may be projecting this very digest.
            cached.digest.append(raw_events, raw_updates)
            fresh = _Cached(stored.parts.version, cached.digest)
        if fresh is not None:
            self._remember(request_id, fresh)
        held = {name: encode_json(value) for name, value in stored.fields.items()}
        return Appended(
            count=stored.count, applied=stored.applied, refused=stored.refused, fields=held
        )


class ContextHandle:
    """What roles hold to ask the ContextActor. Every ask runs under a deadline."""

    def __init__(
        self,
        mailbox: Mailbox[ContextAsk],
        ask_timeout: float,
        answer_now: Callable[[str], Projection | None],
        write_timeout: float,
    ) -> None:
        self._mailbox = mailbox
        self.ask_timeout = ask_timeout
        # Appends and creates: a store may retry one for a while (NATS: other writers holding
        # the request, the server away) and then says why better than a timeout would.
        self.write_timeout = write_timeout
        self._answer_now = answer_now  # the actor's answer when it costs no worker thread

    async def _ask(self, message: ContextAsk) -> ContextReply:
        message = with_checked_request_id(message)  # an unsafe id never reaches the actor
        writes = isinstance(message, Append | Create)
        timeout = self.write_timeout if writes else self.ask_timeout
        reply: ContextReply = await self._mailbox.ask(message, timeout=timeout)
        if isinstance(reply, Failed):
            raise_failure(reply)
        return reply

    async def project(
        self, request_id: str, *, role: str | None = None, purpose: str | None = None
    ) -> Projection:
        """The projection of the request's record (the same value as ``project_request``).

        Waits for the actor (a read only if the record changed). Raises
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
            request_id = check_request_id(request_id)  # one NFC key per record in the cache
            answer = self._answer_now(request_id)
            if answer is not None:
                # Cached, or a small record read in place: no need to wait for the actor.
                # Writes and everything else still go through its inbox.
                await checkpoint()
                return answer
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
        message = Append(
            request_id=request_id,
            events=[bytes(encode_event(event)) for event in stamped],
            updates={name: encode_json(value) for name, value in (updates or {}).items()},
            key=key or "",
            unless={name: encode_json(value) for name, value in (unless or {}).items()},
            expect={name: encode_json(value) for name, value in (expect or {}).items()},
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

    async def recall(self, request_id: str, key: str) -> list[dict[str, Any]]:
        """The events an append with ``key`` stored (``[]`` if none), among the last 256."""
        reply = await self._ask(Recall(request_id=request_id, key=key))
        assert isinstance(reply, Recalled)
        return [msgspec.json.decode(event) for event in reply.events]

    async def create(self, request_id: str, record: Mapping[str, Any]) -> bool:
        """Create the record unless it exists; returns whether it was created."""
        reply = await self._ask(Create(request_id=request_id, record=encode_json(record)))
        assert isinstance(reply, Created)
        return reply.created


@asynccontextmanager
async def open_context(
    workspace: str | Path,
    config: PromptContextConfig | None = None,
    *,
    ask_timeout: float = DEFAULT_ASK_TIMEOUT,
    inbox_size: int = 64,
    store: RecordStore | None = None,
) -> AsyncIterator[ContextHandle]:
    """Start a ContextActor for ``workspace`` and yield a handle to it.

    Without ``config`` the defaults apply (compaction on); without ``store``, the workspace's
    backend, opened here and closed on exit (on NATS, a connection of this scope's own). On
    exit the actor stops: asks still queued are answered with ``ActorStopped``.
    """
    async with AsyncExitStack() as owned:
        if store is None:  # the workspace's backend, open while the actor runs (NATS connects)
            backend = await owned.enter_async_context(open_backend(Workspace(workspace)))
            store = backend.store
        actor = ContextActor(store, config or PromptContextConfig(), inbox_size=inbox_size)
        failure: Exception | None = None
        async with anyio.create_task_group() as group:
            # Not `start`: asks wait in the inbox until it serves, and that saves the round trip.
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
