"""OpenTelemetry hooks of a team: a span per envelope a role handles, a child span per model
call, and the W3C trace context carried in the envelopes a role queues.

With ``telemetry.otel`` off (the default) every hook here is a no-op and ``opentelemetry`` is
never imported: the SDK lives in ``actors.telemetry._otel``, loaded only by
``tracing_setup.tracing_for`` when a team asks for it. The hooks find the team's ``Tracing``
in a context variable (``active``), which every task a ``Team.run`` starts inherits, so role
actors and the prompt log need no reference to it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from contextvars import ContextVar
from typing import Any, TypeVar

import msgspec

from teams_runtime.codecs.envelopes import MessageEnvelope
from teams_runtime.codecs.prompt_records import PromptRecord
from teams_runtime.storage import Claim, WorkQueue

__all__ = [
    "NO_TRACING",
    "Tracing",
    "active",
    "model_call",
    "stamping",
    "traced_envelope",
]

_T = TypeVar("_T")


class Tracing:
    """No tracing: what a team without ``telemetry.otel`` uses (``OtelTracing`` is the other)."""

    enabled = False

    def envelope_span(self, role: str, envelope: MessageEnvelope | None) -> Any:
        """A context manager around the handling of one envelope; it gives an object whose
        ``outcome(str)`` records how it ended."""
        return nullcontext(_NoSpan())

    def model_call(self, record: PromptRecord) -> None:
        """One model call was made and logged as ``record``."""

    def traceparent(self) -> str | None:
        """The W3C ``traceparent`` of the current span, to carry in a queued envelope."""
        return None

    def close(self) -> None:
        """Flush what is still buffered to the exporters (blocking: run it in a thread)."""


class _NoSpan:
    def outcome(self, outcome: str) -> None:
        pass


NO_TRACING = Tracing()
_ACTIVE: ContextVar[Tracing] = ContextVar("teams_runtime_tracing", default=NO_TRACING)


@contextmanager
def active(tracing: Tracing) -> Iterator[None]:
    """Make ``tracing`` the one the hooks use, in this context and the tasks started in it."""
    token = _ACTIVE.set(tracing)
    try:
        yield
    finally:
        _ACTIVE.reset(token)


async def traced_envelope(role: str, envelope: MessageEnvelope | None, work: Awaitable[_T]) -> _T:
    """Await ``work`` (the handling of ``envelope``) inside its envelope span, which records
    the outcome (the string ``work`` returns)."""
    tracing = _ACTIVE.get()
    if not tracing.enabled:
        return await work
    span_manager: AbstractContextManager[_NoSpan] = tracing.envelope_span(role, envelope)
    with span_manager as span:
        result = await work
        span.outcome(str(result))
        return result


def model_call(record: PromptRecord) -> None:
    """The prompt log's hook: one model call, logged as ``record``."""
    _ACTIVE.get().model_call(record)


def stamping(queue: WorkQueue) -> WorkQueue:
    """``queue`` as role actors use it: with tracing on, each envelope put gets the current
    span's ``traceparent`` (the next hop continues the trace); otherwise ``queue`` itself."""
    tracing = _ACTIVE.get()
    return _StampingQueue(queue, tracing) if tracing.enabled else queue


class _StampingQueue:
    """A ``WorkQueue`` that stamps the trace context on the envelopes put; the rest passes."""

    def __init__(self, queue: WorkQueue, tracing: Tracing) -> None:
        self._queue = queue
        self._tracing = tracing

    @property
    def lease_seconds(self) -> float:
        return self._queue.lease_seconds

    @property
    def renew_trouble(self) -> str:
        return self._queue.renew_trouble

    @property
    def worker_id(self) -> str:
        return str(getattr(self._queue, "worker_id", "-"))

    async def put(self, envelope: MessageEnvelope) -> str:
        traceparent = self._tracing.traceparent()
        if traceparent is not None:
            envelope = msgspec.structs.replace(envelope, traceparent=traceparent)
        return await self._queue.put(envelope)

    async def claim(self, role: str, limit: int) -> list[Claim]:
        return await self._queue.claim(role, limit)

    async def done(self, claim: Claim) -> None:
        await self._queue.done(claim)

    async def release(self, claim: Claim) -> float:
        return await self._queue.release(claim)

    async def reject(self, claim: Claim, reason: str) -> None:
        await self._queue.reject(claim, reason)

    async def drop(self, request_id: str) -> int:
        return await self._queue.drop(request_id)

    async def renew(self) -> bool:
        return await self._queue.renew()

    async def retire(self) -> None:
        await self._queue.retire()
