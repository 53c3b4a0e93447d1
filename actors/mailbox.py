"""Asks between actors: a bounded inbox of envelopes, each with a one-shot reply stream.

Tell and ask differ only in whether an envelope has a reply slot (as in pykka). A reply is a
result or an exception instance; the asker re-raises the exception. Nothing here assumes more
than "send a message, await one reply", so a network transport can replace it later.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import anyio
from anyio.abc import TaskStatus
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from loguru import logger

from teams_runtime.exceptions import ActorStopped, AskTimeout, TeamsRuntimeError

__all__ = ["Mailbox"]

M = TypeVar("M")


@dataclass(frozen=True, slots=True)
class _Envelope(Generic[M]):
    message: M
    reply: MemoryObjectSendStream[Any] | None


def _answer(envelope: _Envelope[Any], result: Any) -> None:
    if envelope.reply is None:
        return
    # Buffer 1 and one send: never blocks. The asker may have given up (cancelled, deadline).
    with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
        envelope.reply.send_nowait(result)
    envelope.reply.close()


class Mailbox(Generic[M]):
    """The inbox of one actor: bounded, served by one task, closed on shutdown."""

    def __init__(self, name: str, size: int = 64) -> None:
        self.name = name
        self._send: MemoryObjectSendStream[_Envelope[M]]
        self._receive: MemoryObjectReceiveStream[_Envelope[M]]
        self._send, self._receive = anyio.create_memory_object_stream[_Envelope[M]](size)
        self._stopping = False
        self._serving = False

    async def ask(self, message: M, deadline: float) -> Any:
        """Send ``message`` and wait for its reply.

        Waits for room in the inbox and then for the reply, together at most ``deadline``
        seconds. Raises ``AskTimeout``, ``ActorStopped``, or the error the actor replied with.
        """
        reply_send, reply_receive = anyio.create_memory_object_stream[Any](1)
        with reply_receive:
            try:
                with anyio.fail_after(deadline if deadline > 0 else math.inf):
                    try:
                        await self._send.send(_Envelope(message, reply_send))
                    except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                        reply_send.close()
                        raise ActorStopped(f"the {self.name} actor is not running.") from None
                    except BaseException:  # cancelled or timed out before it was queued
                        reply_send.close()
                        raise
                    try:
                        result = await reply_receive.receive()
                    except anyio.EndOfStream:
                        raise ActorStopped(
                            f"the {self.name} actor stopped before answering."
                        ) from None
            except TimeoutError:
                raise AskTimeout(
                    f"the {self.name} actor did not answer {type(message).__name__} "
                    f"within {deadline} s."
                ) from None
        if isinstance(result, BaseException):
            raise result
        return result

    async def serve(
        self,
        handle: Callable[[M], Awaitable[Any]],
        *,
        task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        """Answer envelopes one at a time until ``stop``; then answer the queued ones with
        ``ActorStopped``. Errors of a handler go back to the asker; the actor keeps serving."""
        self._serving = True
        task_status.started()
        try:
            while True:
                # Take what is already queued without a scheduling round trip per envelope;
                # wait only when the inbox is empty.
                try:
                    envelope = self._receive.receive_nowait()
                except anyio.WouldBlock:
                    try:
                        envelope = await self._receive.receive()
                    except anyio.EndOfStream:
                        return
                except anyio.EndOfStream:
                    return
                await self._serve_one(envelope, handle)
        except anyio.ClosedResourceError:  # stopped before it was ever served
            pass
        finally:
            self._serving = False
            self._drain()
            self._receive.close()

    async def _serve_one(
        self, envelope: _Envelope[M], handle: Callable[[M], Awaitable[Any]]
    ) -> None:
        if self._stopping:
            _answer(envelope, ActorStopped(f"the {self.name} actor is shutting down."))
            return
        try:
            result = await handle(envelope.message)
        except TeamsRuntimeError as exc:
            result = exc
        except Exception as exc:  # a bug: tell the asker, log it, keep serving
            logger.opt(exception=exc).error("{} actor failed on an ask", self.name)
            result = exc
        _answer(envelope, result)

    def _drain(self) -> None:
        # Whatever is still queued (e.g. after cancellation) gets an answer, never silence.
        while True:
            try:
                envelope = self._receive.receive_nowait()
            except (anyio.WouldBlock, anyio.EndOfStream, anyio.ClosedResourceError):
                return
            _answer(envelope, ActorStopped(f"the {self.name} actor stopped."))

    def stop(self) -> None:
        """Stop taking asks; queued asks are answered with ``ActorStopped``."""
        self._stopping = True
        self._send.close()
        if not self._serving:  # nobody will read the inbox again: answer what is queued now
            self._drain()
            self._receive.close()
