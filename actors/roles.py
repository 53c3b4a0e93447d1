"""Role actors: one anyio task per role, turning envelopes into persisted role results.

For each envelope a role asks the ContextActor for the projection, streams its prompt to the
model backend, checks the answer against the contract (at most two repair prompts, each
re-projected), and persists the outcome in one write: the role's report event plus ``result``,
``status`` and ``current_role``. A result naming ``next_role`` queues an envelope for it. The
envelope leaves the queue only after all of that, so a crash means it is handled again.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

import anyio
import msgspec
from anyio.abc import TaskStatus
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from loguru import logger

from teams_runtime.actors.backends import ModelBackend
from teams_runtime.actors.context import ContextHandle, open_context
from teams_runtime.codecs.config import PromptContextConfig, TeamConfig
from teams_runtime.codecs.messages import MessageEnvelope
from teams_runtime.codecs.prompt_records import PromptRecord
from teams_runtime.contract import validate_answer
from teams_runtime.exceptions import EnvelopeError, ModelFailure, TeamsRuntimeError
from teams_runtime.logs import log_prompt
from teams_runtime.projection import Projection
from teams_runtime.prompts import (
    PURPOSES,
    PromptBundle,
    PromptKind,
    answer_kind_of,
    build_prompt,
    kind_for_role,
)
from teams_runtime.work_queue import WorkQueue
from teams_runtime.workspace import Workspace

__all__ = ["MAX_REPAIRS", "Outcome", "RequestLocks", "RoleActor", "WorkItem", "preview_prompt"]

MAX_REPAIRS = 2
Outcome = Literal["done", "failed", "deferred", "rejected"]
_FINISH_STATUS = {"completed": "completed", "failed": "failed", "blocked": "blocked"}


class _NotSaved(Exception):
    """The outcome could not be persisted: the envelope stays queued for another try."""


class WorkItem(msgspec.Struct, frozen=True):
    """An envelope file waiting for a role."""

    path: str
    role: str


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


def _now() -> str:
    return datetime.now().astimezone().isoformat()


class RoleActor:
    """Handles the envelopes of one role, several requests at a time."""

    def __init__(
        self,
        role: str,
        *,
        config: TeamConfig,
        context: ContextHandle,
        backend: ModelBackend,
        queue: WorkQueue,
        locks: RequestLocks,
        on_finished: Callable[[WorkItem, Outcome], None],
        on_prompt: Callable[[PromptRecord], None] | None = None,
        concurrency: int = 4,
        inbox_size: int = 256,
    ) -> None:
        self.role = role
        self.prompt_context = config.prompt_context  # the same config object for every role
        self._model = config.model
        self._context = context
        self._backend = backend
        self._queue = queue
        self._locks = locks
        self._on_finished = on_finished
        self._on_prompt = on_prompt
        self._limiter = anyio.CapacityLimiter(concurrency)
        self._send: MemoryObjectSendStream[WorkItem]
        self._receive: MemoryObjectReceiveStream[WorkItem]
        self._send, self._receive = anyio.create_memory_object_stream[WorkItem](inbox_size)
        self._log = logger.bind(role=role)

    async def give(self, item: WorkItem) -> None:
        """Hand an envelope to this role; waits while its inbox is full."""
        await self._send.send(item)

    def close(self) -> None:
        """Take no more envelopes; ``serve`` returns when the ones it has are handled."""
        self._send.close()

    async def serve(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Handle envelopes until ``close``; start it with ``task_group.start``."""
        task_status.started()
        async with self._receive, anyio.create_task_group() as group:
            async for item in self._receive:
                group.start_soon(self._work, item)

    async def _work(self, item: WorkItem) -> None:
        async with self._limiter:
            try:
                outcome = await self._work_on(item)
            except Exception as exc:  # a bug must not take the team down: keep the envelope
                self._log.opt(exception=exc).error("envelope {} left queued", Path(item.path).name)
                outcome = "deferred"
        self._on_finished(item, outcome)

    async def _work_on(self, item: WorkItem) -> Outcome:
        path = Path(item.path)
        try:
            envelope = await anyio.to_thread.run_sync(self._queue.load, path, self.role)
        except EnvelopeError as exc:
            self._log.error("rejected an envelope: {}", exc)
            await anyio.to_thread.run_sync(self._queue.reject, path, str(exc))
            return "rejected"
        log = self._log.bind(request_id=envelope.request_id)
        async with self._locks.hold(envelope.request_id):
            try:
                return await self._handle(envelope, path)
            except ModelFailure as exc:
                log.warning("model failed for request {}: {}", envelope.request_id, exc)
                if self._model.on_failure == "requeue":
                    log.warning("envelope left in the queue for the next run: {}", path.name)
                    return "deferred"
                try:
                    await self._persist_failure(envelope, path, str(exc))
                except _NotSaved:
                    return "deferred"
                return "failed"
            except _NotSaved:
                return "deferred"
            except TeamsRuntimeError as exc:  # the record is missing or cannot be read
                log.error("cannot handle request {}: {}", envelope.request_id, exc)
                await anyio.to_thread.run_sync(self._queue.reject, path, str(exc))
                return "rejected"

    @asynccontextmanager
    async def _saving(self, envelope: MessageEnvelope) -> AsyncIterator[None]:
        """Persist an outcome shielded from cancellation; on failure keep the envelope queued."""
        try:
            with anyio.CancelScope(shield=True):
                yield
        except (TeamsRuntimeError, OSError) as exc:  # e.g. disk full, stopping: nothing lost
            self._log.bind(request_id=envelope.request_id).error(
                "outcome for request {} not saved ({}); its envelope stays queued",
                envelope.request_id,
                exc,
            )
            raise _NotSaved from exc

    async def _send_prompt(self, bundle: PromptBundle) -> str:
        """Send a prompt (model.attempts tries); log each one sent."""
        for attempt in range(1, self._model.attempts + 1):
            try:
                return await self._backend.complete(bundle)
            except ModelFailure as exc:
                if attempt == self._model.attempts:
                    raise
                self._log.bind(request_id=bundle.request_id).warning(
                    "model attempt {} of {} failed: {}", attempt, self._model.attempts, exc
                )
            finally:
                record = log_prompt(bundle, bundle.chars())
                if self._on_prompt is not None:
                    self._on_prompt(record)
        raise AssertionError("unreachable")

    async def _project_and_prompt(
        self,
        kind: PromptKind,
        envelope: MessageEnvelope,
        *,
        repairing: PromptKind | None = None,
        errors: list[str] | None = None,
        previous: str = "",
    ) -> str:
        projection = await self._context.project(
            envelope.request_id, role=self.role, purpose=PURPOSES[kind]
        )
        bundle = build_prompt(
            kind,
            role=self.role,
            projection=projection,
            envelope=envelope,
            repairing=repairing,
            errors=errors,
            previous=previous,
        )
        return await self._send_prompt(bundle)

    async def _handle(self, envelope: MessageEnvelope, path: Path) -> Outcome:
        kind = kind_for_role(self.role)
        answer_kind = answer_kind_of(kind)
        text = await self._project_and_prompt(kind, envelope)
        answer, issues = validate_answer(
            text, kind=answer_kind, request_id=envelope.request_id, role=self.role
        )
        repairs = 0
        while answer is None and repairs < MAX_REPAIRS:
            repairs += 1
            self._log.bind(request_id=envelope.request_id).warning(
                "result rejected by contract validation ({} issues); repair {} of {}",
                len(issues),
                repairs,
                MAX_REPAIRS,
            )
            text = await self._project_and_prompt(
                "repair", envelope, repairing=kind, errors=issues, previous=text
            )
            answer, issues = validate_answer(
                text, kind=answer_kind, request_id=envelope.request_id, role=self.role
            )
        if answer is None:
            result = self._contract_failure(envelope, issues)
        elif kind == "research_decision":
            result = self._research_result(answer)
        else:
            result = answer
        await self._persist(envelope, path, result)
        return "failed" if result["status"] == "failed" and not result["next_role"] else "done"

    def _contract_failure(self, envelope: MessageEnvelope, issues: list[str]) -> dict[str, Any]:
        return {
            "request_id": envelope.request_id,
            "role": self.role,
            "status": "failed",
            "summary": f"The {self.role} result was rejected by contract validation "
            f"after {MAX_REPAIRS} repair attempts.",
            "insights": [],
            "proposals": {},
            "artifacts": [],
            "next_role": "",
            "error": "contract_validation_failed",
            "contract_issues": issues,
        }

    def _research_result(self, decision: dict[str, Any]) -> dict[str, Any]:
        keys = ("needed", "subject", "research_query", "reason_code")
        gate = {key: decision[key] for key in keys}
        return {
            "request_id": decision["request_id"],
            "role": self.role,
            "status": "completed",
            "summary": decision.get("summary") or f"Research gate: {decision['reason_code']}.",
            "insights": [],
            "proposals": {"research_decision": gate},
            "artifacts": [],
            "next_role": decision["next_role"],
            "error": "",
        }

    async def _persist(self, envelope: MessageEnvelope, path: Path, result: dict[str, Any]) -> None:
        """Record the outcome in one write, queue the next role, then dequeue (shielded)."""
        now = _now()
        report_type = (
            "version_control_completed" if self.role == "version_controller" else ("role_report")
        )
        events: list[dict[str, Any]] = [
            {
                "timestamp": now,
                "type": report_type,
                "actor": self.role,
                "summary": result["summary"],
                "payload": result,
            }
        ]
        next_role: str = result["next_role"]
        updates: dict[str, Any] = {"result": result, "updated_at": now}
        follow_up: MessageEnvelope | None = None
        if next_role:
            hand_off = (
                "version_control_requested" if next_role == "version_controller" else ("delegated")
            )
            events.append(
                {
                    "timestamp": now,
                    "type": hand_off,
                    "actor": self.role,
                    "summary": f"{self.role} handed the request to {next_role}",
                    "payload": {"from_role": self.role, "to_role": next_role},
                }
            )
            updates |= {"status": "in_progress", "current_role": next_role, "next_role": next_role}
            if next_role == "version_controller":
                updates["version_control"] = {
                    "mode": "commit",
                    "scope": envelope.scope,
                    "summary": result["summary"],
                    "paths": result.get("artifacts", []),
                    "requested_by": self.role,
                }
            follow_up = MessageEnvelope(
                request_id=envelope.request_id,
                sender=self.role,
                target=next_role,
                intent=envelope.intent,
                urgency=envelope.urgency,
                scope=envelope.scope,
                artifacts=[str(item) for item in result.get("artifacts", [])],
                params=envelope.params,
                body=result["summary"],
            )
        else:
            updates |= {
                "status": _FINISH_STATUS[result["status"]],
                "current_role": self.role,
                "next_role": "",
            }
        async with self._saving(envelope):
            await self._context.append_events(envelope.request_id, events, updates=updates)
            if follow_up is not None:
                await anyio.to_thread.run_sync(self._queue.put, follow_up)
            await anyio.to_thread.run_sync(self._queue.done, path)
        self._log.bind(request_id=envelope.request_id).info(
            "request {}: {} -> {}",
            envelope.request_id,
            result["status"],
            next_role or updates["status"],
        )

    async def _persist_failure(self, envelope: MessageEnvelope, path: Path, reason: str) -> None:
        now = _now()
        event = {
            "timestamp": now,
            "type": "model_failed",
            "actor": self.role,
            "summary": f"the model failed for the {self.role} role",
            "payload": {"from_role": self.role, "reason": reason},
        }
        updates = {"status": "failed", "current_role": self.role, "updated_at": now}
        async with self._saving(envelope):
            await self._context.append_events(envelope.request_id, [event], updates=updates)
            await anyio.to_thread.run_sync(self._queue.done, path)


def _envelope_from(projection: Projection, request_id: str, role: str) -> MessageEnvelope:
    """The envelope a role would most likely get, rebuilt from the record's own fields."""

    def field(key: str, kind: type, default: Any) -> Any:
        raw = projection.fields.get(key)
        value = msgspec.json.decode(raw) if raw is not None else default
        return value if isinstance(value, kind) else default

    return MessageEnvelope(
        request_id=request_id,
        sender=field("current_role", str, "orchestrator") or "orchestrator",
        target=role,
        intent=field("intent", str, ""),
        urgency=field("urgency", str, "normal"),
        scope=field("scope", str, ""),
        artifacts=[str(item) for item in field("artifacts", list, [])],
        params=field("params", dict, {}),
        body=field("body", str, ""),
    )


async def preview_prompt(
    workspace: Workspace,
    request_id: str,
    role: str,
    kind: PromptKind,
    config: PromptContextConfig,
) -> PromptBundle:
    """The prompt ``role`` would be sent for ``request_id`` (a repair shows the errors an empty
    answer would get). Reads through a ContextActor like the roles do; writes nothing."""
    async with open_context(workspace.root, config) as context:
        projection = await context.project(request_id, role=role, purpose=PURPOSES[kind])
    envelope = _envelope_from(projection, request_id, role)
    repairing = kind_for_role(role)
    errors: list[str] = []
    if kind == "repair":
        answer_kind = answer_kind_of(kind, repairing)
        errors = validate_answer("{}", kind=answer_kind, request_id=request_id, role=role)[1]
    return build_prompt(
        kind,
        role=role,
        projection=projection,
        envelope=envelope,
        repairing=repairing,
        errors=errors,
        previous="{}",
    )
