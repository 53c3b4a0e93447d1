"""The ContextActor: the one owner of a workspace's request store.

Roles never touch record files; they ask this actor. It answers projections from a per-request
summary (parsed once per file version), and it is the single writer of record files in its
process (appends go through the locked, atomic path of ``actors.store``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import msgspec
from anyio.abc import TaskStatus
from loguru import logger

from teams_runtime.actors.mailbox import Mailbox
from teams_runtime.actors.store import (
    INDEX_TAIL,
    FileVersion,
    append_to_record,
    create_record,
    file_version,
    read_indexed_parts,
    read_record,
    unknown_request,
)
from teams_runtime.actors.summary import (
    NeedsFullHistory,
    RequestSummary,
    summary_from_fields,
    summary_from_parts,
)
from teams_runtime.codecs.config import PromptContextConfig
from teams_runtime.codecs.records import RecordFields, encode_event, encode_field
from teams_runtime.projection import Projection
from teams_runtime.workspace import RecordPaths, Workspace, check_request_id

__all__ = [
    "Append",
    "ContextActor",
    "ContextHandle",
    "ContextMessage",
    "Create",
    "Load",
    "Project",
    "open_context",
]

DEFAULT_ASK_TIMEOUT = 30.0


class Project(msgspec.Struct, tag=True, frozen=True, kw_only=True):
    """Ask for the projection of a request's record for a role's prompt."""

    request_id: str
    role: str
    purpose: str = "role_task"


class Append(msgspec.Struct, tag=True, frozen=True, kw_only=True):
    """Append events (JSON bytes) and set top-level fields (JSON bytes) in one write."""

    request_id: str
    events: list[msgspec.Raw]
    updates: dict[str, msgspec.Raw] = {}


class Load(msgspec.Struct, tag=True, frozen=True, kw_only=True):
    """Ask for the whole record as it is on disk now."""

    request_id: str


class Create(msgspec.Struct, tag=True, frozen=True, kw_only=True):
    """Create a record unless one exists (answers whether it was created)."""

    request_id: str
    record: msgspec.Raw


ContextMessage = Project | Append | Load | Create


class _Cached(msgspec.Struct):
    version: FileVersion
    summary: RequestSummary


def _indexable(config: PromptContextConfig) -> bool:
    # An index keeps the last INDEX_TAIL events; compaction off needs every event.
    return config.enabled and config.max_events <= INDEX_TAIL


def _summarise(paths: RecordPaths, config: PromptContextConfig, classify_all: bool) -> _Cached:
    """Read a record for a summary: through its index if it has a fresh one, else parse it."""
    if _indexable(config):
        parts = read_indexed_parts(paths)
        if parts is not None:
            return _Cached(parts.version, summary_from_parts(parts, config))
    fields, version = read_record(paths)
    return _Cached(version, summary_from_fields(fields, config, classify_all=classify_all))


class ContextActor:
    """Owns the request store of one workspace; answers ``ContextMessage`` asks."""

    def __init__(
        self,
        workspace: Workspace,
        config: PromptContextConfig,
        *,
        inbox_size: int = 64,
        max_cached: int = 1024,
    ) -> None:
        self.workspace = workspace
        self.config = config
        self._mailbox: Mailbox[ContextMessage] = Mailbox("context", inbox_size)
        self._cache: dict[str, _Cached] = {}
        self._max_cached = max_cached
        self._paths: dict[str, RecordPaths] = {}  # building paths costs more than a warm ask

    async def serve(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Answer asks until ``stop``; start it with ``task_group.start``."""
        await self._mailbox.serve(self._handle, task_status=task_status)

    def stop(self) -> None:
        """Stop taking asks; queued asks are answered with ``ActorStopped``."""
        self._mailbox.stop()

    def handle(self, ask_timeout: float = DEFAULT_ASK_TIMEOUT) -> ContextHandle:
        """A handle for roles to ask this actor, each ask under ``ask_timeout`` seconds."""
        return ContextHandle(self._mailbox, ask_timeout)

    async def _handle(self, message: ContextMessage) -> Any:
        match message:
            case Project(request_id=request_id):
                return await self._project(request_id)
            case Append(request_id=request_id, events=events, updates=updates):
                return await self._append(request_id, events, updates)
            case Load(request_id=request_id):
                paths = self._paths_of(request_id)
                fields, _ = await anyio.to_thread.run_sync(read_record, paths)
                return fields
            case Create(request_id=request_id, record=record):
                paths = self._paths_of(request_id)
                created = await anyio.to_thread.run_sync(
                    create_record, paths, msgspec.json.decode(record)
                )
                return created is not None
            case _:
                raise TypeError(f"the context actor does not understand {message!r}")

    def _paths_of(self, request_id: str) -> RecordPaths:
        paths = self._paths.get(request_id)
        if paths is None:
            if len(self._paths) >= self._max_cached:
                self._paths.clear()
            paths = self._paths[request_id] = self.workspace.record_paths(request_id)
        return paths

    def _remember(self, request_id: str, cached: _Cached) -> None:
        self._cache.pop(request_id, None)
        self._cache[request_id] = cached  # most recently loaded last: the oldest goes first
        while len(self._cache) > self._max_cached:
            self._cache.pop(next(iter(self._cache)))

    async def _project(self, request_id: str) -> Projection:
        paths = self._paths_of(request_id)
        # One stat per ask, on the event loop on purpose: it is a metadata call answered from
        # the inode cache in about a microsecond, and it is what makes another process's edit
        # visible to the very next ask. A worker thread would cost 50x more per warm ask.
        version = file_version(paths.record)
        if version is None:
            self._cache.pop(request_id, None)
            raise unknown_request(paths)
        cached = self._cache.get(request_id)
        if cached is None or cached.version != version:
            cached = await self._load(paths, classify_all=False)
        try:
            return cached.summary.project()
        except NeedsFullHistory:
            cached = await self._load(paths, classify_all=True)
            return cached.summary.project()

    async def _load(self, paths: RecordPaths, *, classify_all: bool) -> _Cached:
        cached = await anyio.to_thread.run_sync(_summarise, paths, self.config, classify_all)
        logger.debug(
            "read {} ({} bytes, {} events, full={})",
            paths.request_id,
            cached.version.size,
            cached.summary.count,
            classify_all,
        )
        self._remember(paths.request_id, cached)
        return cached

    async def _append(
        self, request_id: str, events: list[msgspec.Raw], updates: dict[str, msgspec.Raw]
    ) -> int:
        paths = self._paths_of(request_id)
        cached = self._cache.get(request_id)
        config = self.config

        def write() -> _Cached:
            appended = append_to_record(paths, events, updates)
            version = appended.parts.version
            if cached is not None and cached.version == appended.read_version:
                # Nobody else wrote since we summarised: update in place, no re-read.
                cached.summary.append(events, updates)
                return _Cached(version, cached.summary)
            if _indexable(config):
                return _Cached(version, summary_from_parts(appended.parts, config))
            return _summarise(paths, config, classify_all=False)

        fresh = await anyio.to_thread.run_sync(write)
        self._remember(request_id, fresh)
        return fresh.summary.count


class ContextHandle:
    """What roles hold to ask the ContextActor. Every ask runs under a deadline."""

    def __init__(self, mailbox: Mailbox[ContextMessage], ask_timeout: float) -> None:
        self._mailbox = mailbox
        self.ask_timeout = ask_timeout

    async def project(
        self, request_id: str, *, role: str, purpose: str = "role_task"
    ) -> Projection:
        """The projection of the request's record (the same value as ``project_request``).

        Waits for the actor (a file read only if the record changed). Raises
        ``UnknownRequestError``, ``RecordError``, ``UnsafeRequestIdError``, ``ActorStopped``,
        ``AskTimeout``.
        """
        check_request_id(request_id)
        result: Projection = await self._mailbox.ask(
            Project(request_id=request_id, role=role, purpose=purpose), self.ask_timeout
        )
        return result

    async def append_events(
        self,
        request_id: str,
        events: Sequence[Mapping[str, Any]],
        *,
        updates: Mapping[str, Any] | None = None,
    ) -> int:
        """Append events and set top-level fields (e.g. ``result``, ``status``) in one write.

        An event without ``timestamp`` gets the current time. Waits for the write to be on
        disk (fsynced); returns the new event count. Raises like ``project``.
        """
        check_request_id(request_id)
        message = Append(
            request_id=request_id,
            events=[encode_event(event) for event in events],
            updates={key: encode_field(value) for key, value in (updates or {}).items()},
        )
        count: int = await self._mailbox.ask(message, self.ask_timeout)
        return count

    async def append_event(
        self, request_id: str, event: Mapping[str, Any], *, updates: Mapping[str, Any] | None = None
    ) -> int:
        """Append one event (see ``append_events``); returns the new event count."""
        return await self.append_events(request_id, [event], updates=updates)

    async def load(self, request_id: str) -> RecordFields:
        """The whole record as on disk now (events as undecoded ``msgspec.Raw``)."""
        check_request_id(request_id)
        fields: RecordFields = await self._mailbox.ask(
            Load(request_id=request_id), self.ask_timeout
        )
        return fields

    async def create(self, request_id: str, record: Mapping[str, Any]) -> bool:
        """Create the record file unless it exists; returns whether it was created."""
        check_request_id(request_id)
        message = Create(request_id=request_id, record=encode_field(record))
        created: bool = await self._mailbox.ask(message, self.ask_timeout)
        return created


@asynccontextmanager
async def open_context(
    workspace: str | Path,
    config: PromptContextConfig | None = None,
    *,
    ask_timeout: float = DEFAULT_ASK_TIMEOUT,
    inbox_size: int = 64,
) -> AsyncIterator[ContextHandle]:
    """Start a ContextActor for ``workspace`` and yield a handle to it.

    Without ``config`` the defaults apply (compaction on). On exit the actor stops: asks still
    queued are answered with ``ActorStopped``.
    """
    actor = ContextActor(
        Workspace(workspace), config or PromptContextConfig(), inbox_size=inbox_size
    )
    failure: Exception | None = None
    async with anyio.create_task_group() as group:
        await group.start(actor.serve)
        try:
            yield actor.handle(ask_timeout)
        except Exception as exc:
            # Re-raised below, outside the task group, so callers get the error itself rather
            # than an ExceptionGroup. Cancellation (BaseException) still goes through the group.
            failure = exc
        finally:
            actor.stop()
    if failure is not None:
        raise failure
