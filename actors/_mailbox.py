"""The one actor style: a bounded mailbox served by one task, with ``ask`` and ``tell``.

Tell and ask differ only in whether a delivery has a response slot (as in pykka). A response is the
handler's return value; an exception the handler raises goes back to the asker and is raised
there (a told message's error is logged). Nothing here assumes more than "send a message,
await one response", so a network transport can replace it.

The serving loop takes deliveries already queued without a scheduling round trip each, and
waits only when the mailbox is empty. It stays because it is what lets one ContextActor answer
tens of thousands of asks a second (profiling found a round trip per ask to be one of the
two costs that held it near 11,000/s, docs/performance.md); it cannot starve other tasks for
long, since the mailbox is bounded and asks arrive from tasks that must run to send more.

A mailbox served with ``Lanes`` handles deliveries of different keys (the ContextActor: request
ids) at once and those of one key one at a time, in the order they came: one task per key with
work, in a task group the serving task owns, at most ``Lanes.most`` of them. A delivery that
finds every lane taken, or its own lane's backlog full, is answered ``ActorBusy`` at once.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass
from typing import Any, Final, Generic, TypeVar, final

import anyio
from anyio.abc import TaskGroup, TaskStatus
from anyio.lowlevel import checkpoint, checkpoint_if_cancelled
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from teams_runtime._logs import logger
from teams_runtime.actors._responses import NOTHING, Response
from teams_runtime.exceptions import ActorBusy, ActorStopped, AskTimeout

__all__ = ["LATER", "Lanes", "Later", "Mailbox", "MailboxStatistics"]

M = TypeVar("M")


@dataclass(frozen=True, slots=True)
class MailboxStatistics:
    """A mailbox at one moment (as trio's and anyio's ``statistics()``)."""

    queued: int  # deliveries waiting: in the mailbox, and (with lanes) behind another of their key
    served: int  # deliveries handled since the mailbox was made
    in_flight: int  # deliveries being handled now (one serving task: 0 or 1)
    dropped: int = 0  # asks not handled: their asker had given up (a deadline, a cancel)


@final
class Later:
    """The type of ``LATER``: what ``Lanes.at_once`` returns when its message needs waiting
    for (a lane's job)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "LATER"


LATER: Final = Later()


@dataclass(frozen=True, slots=True)
class Lanes(Generic[M]):
    """How to serve a mailbox concurrently: one lane per ``key`` of a message, at most
    ``most`` lanes with work at once, each holding at most the mailbox's size waiting.
    ``noun`` names the keys and ``limit`` says where ``most`` is set, for ``ActorBusy``.

    ``at_once``, if given, answers a message without any await when it can (else ``LATER``);
    the serving task calls it for a message whose key has no lane, and so saves the lane's
    task and a scheduling round (an ask costs about half as much)."""

    key: Callable[[M], Hashable]
    most: int
    noun: str = "keys"
    limit: str = ""
    at_once: Callable[[M], Any] | None = None


@dataclass(frozen=True, slots=True)
class _Delivery(Generic[M]):
    message: M
    response: Response | None


def _respond(delivery: _Delivery[Any], result: Any) -> None:
    if delivery.response is not None:  # never blocks; the asker may have given up meanwhile
        delivery.response.give(result)


class _Raised:
    """A handler's exception on its way back to the asker."""

    __slots__ = ("error",)

    def __init__(self, error: BaseException) -> None:
        self.error = error


class Mailbox(Generic[M]):
    """The mailbox of one actor: bounded, served by one task, closed on shutdown."""

    def __init__(self, name: str, size: int = 64) -> None:
        self.name = name
        self._send: MemoryObjectSendStream[_Delivery[M]]
        self._receive: MemoryObjectReceiveStream[_Delivery[M]]
        self._send, self._receive = anyio.create_memory_object_stream[_Delivery[M]](size)
        self._size = size
        self._stopping = False
        self._serving = False
        self._served = 0
        self._in_flight = 0
        self._dropped = 0
        self._lanes: dict[Hashable, deque[_Delivery[M]]] = {}  # waiting, per key with work

    # A timeout parameter on purpose (ASYNC109): every ask needs a deadline, and making each
    # caller wrap it in fail_after is how one gets forgotten.
    async def ask(self, message: M, *, timeout: float | None = None) -> Any:  # noqa: ASYNC109
        """Send ``message`` and wait for the response.

        Waits for room in the mailbox and then for the response, together at most ``timeout``
        seconds (``None``: no limit). Raises ``AskTimeout``, ``ActorStopped``, or the error the
        handler raised.
        """
        began = anyio.current_time()
        response = Response() if timeout is None else Response(began + timeout)
        delivery = _Delivery(message, response)
        try:
            # First without a deadline's cancel scope, which would cost an ask a third of its
            # round trip: queued at once, an ask the serving task answers itself has its response
            # after one round. The deadline still holds: the response slot carries it.
            queued = (timeout is None or timeout > 0) and await self._put(delivery, wait=False)
            if queued:
                await checkpoint()  # the serving task takes it, and may answer it, this round
            if not response.closed:
                left = None if timeout is None else timeout - (anyio.current_time() - began)
                with anyio.fail_after(left):
                    if not queued:
                        await self._put(delivery)
                    await response.wait()
            result = self._given(response)
        except TimeoutError:
            raise AskTimeout(
                f"the {self.name} actor did not answer {type(message).__name__} within {timeout} s."
            ) from None
        finally:
            response.abandon()
        if isinstance(result, _Raised):
            raise result.error
        return result

    def _given(self, response: Response) -> Any:
        if response.value is NOTHING:
            if anyio.current_time() >= response.deadline:  # dropped: it was taken too late
                raise TimeoutError
            raise ActorStopped(f"the {self.name} actor stopped before answering.")
        return response.value

    async def tell(self, message: M) -> None:
        """Send ``message`` without waiting for it to be handled; waits while the mailbox is
        full. Raises ``ActorStopped`` if the actor is not running."""
        await self._put(_Delivery(message, None))

    async def _put(self, delivery: _Delivery[M], *, wait: bool = True) -> bool:
        """Queue ``delivery``, waiting for room in a full mailbox unless ``wait`` is false;
        whether it was queued."""
        try:
            # Not `send` at once: its checkpoint would cost every ask a scheduling round of its
            # own (a third of an ask's round trip); only an asker cancelled already stops here.
            await checkpoint_if_cancelled()
            try:
                self._send.send_nowait(delivery)
            except anyio.WouldBlock:  # a full mailbox: wait for room
                if not wait:
                    return False
                await self._send.send(delivery)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            if delivery.response is not None:
                delivery.response.close()
            raise ActorStopped(f"the {self.name} actor is not running.") from None
        except BaseException:  # cancelled or timed out before it was queued
            if delivery.response is not None:
                delivery.response.close()
            raise
        return True

    @property
    def accepting(self) -> bool:
        """Whether messages are still taken (``stop`` not called)."""
        return not self._stopping

    def statistics(self) -> MailboxStatistics:
        """How many deliveries wait, have been served, and are being served."""
        behind = sum(len(backlog) for backlog in self._lanes.values())
        return MailboxStatistics(
            queued=self._receive.statistics().current_buffer_used + behind,
            served=self._served,
            in_flight=self._in_flight,
            dropped=self._dropped,
        )

    async def serve(
        self,
        handle: Callable[[M], Awaitable[Any]],
        *,
        lanes: Lanes[M] | None = None,
        task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        """Handle deliveries until ``stop``, one at a time (or by ``lanes``); then answer the
        queued asks with ``ActorStopped``. A handler's error goes back to its asker; the actor
        keeps serving. Returns once every delivery taken has been answered."""
        self._serving = True
        task_status.started()
        try:
            if lanes is None:
                while (delivery := await self._next()) is not None:
                    await self._serve_one(delivery, handle)
            else:
                async with anyio.create_task_group() as group:
                    while (delivery := await self._next()) is not None:
                        try:
                            self._route(delivery, handle, lanes, group)
                        except Exception as exc:  # its key or at_once raised: as a handler's
                            self._failed(delivery, exc)
        finally:
            self._serving = False
            self._drain()
            self._receive.close()

    async def _next(self) -> _Delivery[M] | None:
        """The next delivery, without a scheduling round while some are queued (see the module
        docstring); ``None`` once the mailbox is closed and empty (or was closed before serving
        began)."""
        try:
            return self._receive.receive_nowait()
        except anyio.WouldBlock:
            try:
                return await self._receive.receive()
            except (anyio.EndOfStream, anyio.ClosedResourceError):
                return None
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            return None

    def _route(
        self,
        delivery: _Delivery[M],
        handle: Callable[[M], Awaitable[Any]],
        lanes: Lanes[M],
        group: TaskGroup,
    ) -> None:
        """Answer ``delivery`` at once if it can be, else put it in the lane of its key,
        starting one if its key has none."""
        key = lanes.key(delivery.message)
        backlog = self._lanes.get(key)
        if backlog is None and lanes.at_once is not None:
            if self._refused(delivery):
                return
            given = lanes.at_once(delivery.message)
            if given is not LATER:
                self._served += 1
                _respond(delivery, given)
                return
        if backlog is None and len(self._lanes) < lanes.most:
            backlog = self._lanes[key] = deque([delivery])
            group.start_soon(self._serve_lane, key, backlog, handle, name=f"{self.name} {key!r}")
        elif backlog is not None and len(backlog) < self._size:
            backlog.append(delivery)
        else:
            _respond(delivery, _Raised(self._busy(delivery.message, key, lanes, backlog)))

    def _refused(self, delivery: _Delivery[M]) -> bool:
        """Answer ``delivery`` here if it is not to be handled: the actor is stopping, or its
        asker gave up while it waited (its deadline, a cancel: nobody wants the answer, and a
        write done now would land after its asker was told it failed)."""
        if self._stopping:
            _respond(delivery, _Raised(ActorStopped(f"the {self.name} actor is shutting down.")))
            return True
        response = delivery.response
        if response is not None and not response.is_wanted():
            response.close()
            self._dropped += 1
            return True
        return False

    def _busy(
        self, message: M, key: Hashable, lanes: Lanes[M], backlog: deque[_Delivery[M]] | None
    ) -> ActorBusy:
        what = type(message).__name__
        if backlog is None:
            limit = f" ({lanes.limit})" if lanes.limit else ""
            return ActorBusy(
                f"the {self.name} actor is busy: asks about {lanes.most} {lanes.noun} are in "
                f"flight, its limit{limit}; {what} about {key!r} was not taken, ask again."
            )
        return ActorBusy(
            f"the {self.name} actor is busy: {len(backlog)} asks about {key!r} wait already; "
            f"{what} was not taken, ask again."
        )

    async def _serve_lane(
        self, key: Hashable, backlog: deque[_Delivery[M]], handle: Callable[[M], Awaitable[Any]]
    ) -> None:
        """Handle the deliveries of one key in order, until none waits (the lane then ends)."""
        try:
            while backlog:
                await self._serve_one(backlog.popleft(), handle)
        finally:
            del self._lanes[key]
            while backlog:  # cancelled: what waited behind gets a response, never silence
                _respond(
                    backlog.popleft(), _Raised(ActorStopped(f"the {self.name} actor stopped."))
                )

    async def _serve_one(
        self, delivery: _Delivery[M], handle: Callable[[M], Awaitable[Any]]
    ) -> None:
        if self._refused(delivery):
            return
        self._in_flight += 1
        try:
            result = await handle(delivery.message)
        except Exception as exc:
            self._failed(delivery, exc)
            return
        except BaseException:  # cancelled while handling it: the asker hears, never silence
            _respond(delivery, _Raised(ActorStopped(f"the {self.name} actor stopped.")))
            raise
        finally:
            self._in_flight -= 1
            self._served += 1
        _respond(delivery, result)

    def _failed(self, delivery: _Delivery[M], exc: Exception) -> None:
        """A message's handling raised: its asker gets the error; a told one's is logged."""
        if delivery.response is None:  # nobody to tell
            logger.opt(exception=exc).error("{} actor failed on a message", self.name)
        _respond(delivery, _Raised(exc))

    def _drain(self) -> None:
        # Whatever is still queued (e.g. after cancellation) gets a response, never silence.
        while True:
            try:
                delivery = self._receive.receive_nowait()
            except (anyio.WouldBlock, anyio.EndOfStream, anyio.ClosedResourceError):
                return
            _respond(delivery, _Raised(ActorStopped(f"the {self.name} actor stopped.")))

    def stop(self) -> None:
        """Stop taking messages; queued asks are answered with ``ActorStopped``."""
        self._stopping = True
        self._send.close()
        if not self._serving:  # nobody will read the mailbox again: answer what is queued now
            self._drain()
            self._receive.close()
