"""The one actor style: a bounded inbox served by one task, with ``ask`` and ``tell``.

Tell and ask differ only in whether an envelope has a reply slot (as in pykka). A reply is the
handler's return value; an exception the handler raises goes back to the asker and is raised
there (a told message's error is logged). Nothing here assumes more than "send a message,
await one reply", so a network transport can replace it.

The serving loop takes envelopes already queued without a scheduling round trip each, and
waits only when the inbox is empty. It stays because it is what lets one ContextActor answer
tens of thousands of warm asks a second (profiling found a round trip per ask to be one of the
two costs that held it near 11,000/s, docs/performance.md); it cannot starve other tasks for
long, since the inbox is bounded and asks arrive from tasks that must run to send more.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import anyio
from anyio.abc import TaskStatus
from anyio.lowlevel import checkpoint_if_cancelled
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from loguru import logger

from teams_runtime.exceptions import ActorStopped, AskTimeout

__all__ = ["Mailbox", "MailboxStatistics"]

M = TypeVar("M")


@dataclass(frozen=True, slots=True)
class MailboxStatistics:
    """A mailbox at one moment (as trio's and anyio's ``statistics()``)."""

    queued: int  # envelopes waiting in the inbox
    served: int  # envelopes handled since the mailbox was made
    in_flight: int  # envelopes being handled now (0 or 1: one serving task)


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


class _Raised:
    """A handler's exception on its way back to the asker."""

    __slots__ = ("error",)

    def __init__(self, error: BaseException) -> None:
        self.error = error


class Mailbox(Generic[M]):
    """The inbox of one actor: bounded, served by one task, closed on shutdown."""

    def __init__(self, name: str, size: int = 64) -> None:
        self.name = name
        self._send: MemoryObjectSendStream[_Envelope[M]]
        self._receive: MemoryObjectReceiveStream[_Envelope[M]]
        self._send, self._receive = anyio.create_memory_object_stream[_Envelope[M]](size)
        self._stopping = False
        self._serving = False
        self._served = 0
        self._in_flight = 0

    # A timeout parameter on purpose (ASYNC109): every ask needs a deadline, and making each
    # caller wrap it in fail_after is how one gets forgotten.
    async def ask(self, message: M, *, timeout: float | None = None) -> Any:  # noqa: ASYNC109
        """Send ``message`` and wait for the reply.

        Waits for room in the inbox and then for the reply, together at most ``timeout``
        seconds (``None``: no limit). Raises ``AskTimeout``, ``ActorStopped``, or the error the
        handler raised.
        """
        reply_send, reply_receive = anyio.create_memory_object_stream[Any](1)
        with reply_receive:
            try:
                with anyio.fail_after(timeout):
                    await self._put(_Envelope(message, reply_send))
                    try:
                        result = await reply_receive.receive()
                    except anyio.EndOfStream:
                        raise ActorStopped(
                            f"the {self.name} actor stopped before answering."
                        ) from None
            except TimeoutError:
                raise AskTimeout(
                    f"the {self.name} actor did not answer {type(message).__name__} "
                    f"within {timeout} s."
                ) from None
        if isinstance(result, _Raised):
            raise result.error
        return result

    async def tell(self, message: M) -> None:
        """Send ``message`` without waiting for it to be handled; waits while the inbox is
        full. Raises ``ActorStopped`` if the actor is not running."""
        await self._put(_Envelope(message, None))

    async def _put(self, envelope: _Envelope[M]) -> None:
        try:
            # Not `send` at once: its checkpoint would cost every ask a scheduling round of its
            # own (a third of an ask's round trip); only an asker cancelled already stops here.
            await checkpoint_if_cancelled()
            try:
                self._send.send_nowait(envelope)
            except anyio.WouldBlock:  # a full inbox: wait for room
                await self._send.send(envelope)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            if envelope.reply is not None:
                envelope.reply.close()
            raise ActorStopped(f"the {self.name} actor is not running.") from None
        except BaseException:  # cancelled or timed out before it was queued
            if envelope.reply is not None:
                envelope.reply.close()
            raise

    @property
    def accepting(self) -> bool:
        """Whether messages are still taken (``stop`` not called)."""
        return not self._stopping

    def statistics(self) -> MailboxStatistics:
        """How many envelopes wait, have been served, and are being served."""
        return MailboxStatistics(
            queued=self._receive.statistics().current_buffer_used,
            served=self._served,
            in_flight=self._in_flight,
        )

    async def serve(
        self,
        handle: Callable[[M], Awaitable[Any]],
        *,
        task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        """Handle envelopes one at a time until ``stop``; then answer the queued asks with
        ``ActorStopped``. A handler's error goes back to its asker; the actor keeps serving."""
        self._serving = True
        task_status.started()
        try:
            while True:
                try:
                    envelope = self._receive.receive_nowait()  # see the module docstring
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
            _answer(envelope, _Raised(ActorStopped(f"the {self.name} actor is shutting down.")))
            return
        self._in_flight += 1
        try:
            result = await handle(envelope.message)
        except Exception as exc:
            if envelope.reply is None:  # nobody to tell: a told message's error is logged
                logger.opt(exception=exc).error("{} actor failed on a message", self.name)
            result = _Raised(exc)
        except BaseException:  # cancelled while handling it: the asker hears, never silence
            _answer(envelope, _Raised(ActorStopped(f"the {self.name} actor stopped.")))
            raise
        finally:
            self._in_flight -= 1
            self._served += 1
        _answer(envelope, result)

    def _drain(self) -> None:
        # Whatever is still queued (e.g. after cancellation) gets an answer, never silence.
        while True:
            try:
                envelope = self._receive.receive_nowait()
            except (anyio.WouldBlock, anyio.EndOfStream, anyio.ClosedResourceError):
                return
            _answer(envelope, _Raised(ActorStopped(f"the {self.name} actor stopped.")))

    def stop(self) -> None:
        """Stop taking messages; queued asks are answered with ``ActorStopped``."""
        self._stopping = True
        self._send.close()
        if not self._serving:  # nobody will read the inbox again: answer what is queued now
            self._drain()
            self._receive.close()
