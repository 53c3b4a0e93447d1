"""The one actor style: ``Mailbox`` asks and tells, errors, statistics, shutdown, cancellation."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

import anyio
import pytest

from teams_runtime.actors._mailbox import LATER, Lanes, Mailbox, MailboxStatistics
from teams_runtime.exceptions import ActorBusy, ActorStopped, AskTimeout

pytestmark = pytest.mark.anyio


class Handler:
    """Answers ``"echo:<x>"`` with ``<x>``, raises for ``"boom"``, and waits on ``gate`` for
    ``"wait"``; keeps the messages it finished handling."""

    def __init__(self) -> None:
        self.gate = anyio.Event()
        self.handled: list[str] = []

    async def __call__(self, message: str) -> str:
        if message == "boom":
            raise ValueError("the handler failed on boom")
        if message.startswith("wait"):
            await self.gate.wait()
        self.handled.append(message)
        return message.removeprefix("echo:")


@asynccontextmanager
async def serving(
    mailbox: Mailbox[str], handle: Callable[[str], Awaitable[Any]]
) -> AsyncIterator[anyio.abc.TaskGroup]:
    """Serve ``mailbox`` for the block, under a deadline; stop it on the way out."""
    with anyio.fail_after(10):
        async with anyio.create_task_group() as group:
            await group.start(mailbox.serve, handle)
            try:
                yield group
            finally:
                mailbox.stop()


async def test_ask_returns_the_handlers_value() -> None:
    mailbox: Mailbox[str] = Mailbox("box")
    async with serving(mailbox, Handler()):
        assert await mailbox.ask("echo:one", timeout=5) == "one"
        assert await mailbox.ask("echo:two", timeout=5) == "two"


async def test_without_a_timeout_an_ask_waits_for_the_answer() -> None:
    mailbox: Mailbox[str] = Mailbox("box")
    handler = Handler()
    answers: list[str] = []

    async def ask() -> None:
        answers.append(await mailbox.ask("wait:slow", timeout=None))

    async with serving(mailbox, handler) as group:
        group.start_soon(ask)
        await anyio.wait_all_tasks_blocked()
        assert answers == []  # still waiting, no deadline of its own
        handler.gate.set()
        await anyio.wait_all_tasks_blocked()
        assert answers == ["wait:slow"]


@pytest.mark.parametrize("served", [pytest.param(True, id="busy"), pytest.param(False, id="idle")])
async def test_an_ask_past_its_deadline_raises_ask_timeout(served: bool) -> None:
    mailbox: Mailbox[str] = Mailbox("box")
    handler = Handler()
    with anyio.fail_after(10):
        async with anyio.create_task_group() as group:
            if served:  # a handler that does not finish in time; else nobody serves the mailbox
                await group.start(mailbox.serve, handler)
            with pytest.raises(
                AskTimeout, match=r"^the box actor did not answer str within 0\.05 s\.$"
            ):
                await mailbox.ask("wait", timeout=0.05)
            mailbox.stop()
            handler.gate.set()
    assert issubclass(AskTimeout, TimeoutError)


async def test_a_full_mailbox_counts_against_the_deadline() -> None:
    mailbox: Mailbox[str] = Mailbox("box", size=1)
    with anyio.fail_after(5):
        await mailbox.tell("queued")  # fills the mailbox; nobody serves it
        with pytest.raises(AskTimeout, match=r"^the box actor did not answer"):
            await mailbox.ask("echo:x", timeout=0.05)
    assert mailbox.statistics().queued == 1  # the ask never got in
    mailbox.stop()


async def test_a_handler_error_is_raised_in_the_asker_and_serving_goes_on() -> None:
    mailbox: Mailbox[str] = Mailbox("box")
    async with serving(mailbox, Handler()):
        with pytest.raises(ValueError, match=r"^the handler failed on boom$"):
            await mailbox.ask("boom", timeout=5)
        assert await mailbox.ask("echo:after", timeout=5) == "after"
        assert mailbox.statistics() == MailboxStatistics(queued=0, served=2, in_flight=0)


async def test_tell_does_not_wait_for_the_handling() -> None:
    mailbox: Mailbox[str] = Mailbox("box")
    handler = Handler()
    async with serving(mailbox, handler):
        with anyio.fail_after(1):
            await mailbox.tell("wait:told")
        await anyio.wait_all_tasks_blocked()
        assert handler.handled == []
        assert mailbox.statistics().in_flight == 1
        handler.gate.set()
        await anyio.wait_all_tasks_blocked()
        assert handler.handled == ["wait:told"]


async def test_a_told_message_that_fails_is_logged_and_serving_goes_on(
    log_messages: list[Any],
) -> None:
    mailbox: Mailbox[str] = Mailbox("box")
    async with serving(mailbox, Handler()):
        await mailbox.tell("boom")
        assert await mailbox.ask("echo:after", timeout=5) == "after"
    (record,) = [m.record for m in log_messages if m.record["level"].name == "ERROR"]
    assert record["message"] == "box actor failed on a message"
    assert isinstance(record["exception"].value, ValueError)


async def test_statistics_count_queued_served_and_in_flight() -> None:
    mailbox: Mailbox[str] = Mailbox("box")
    handler = Handler()
    assert mailbox.statistics() == MailboxStatistics(queued=0, served=0, in_flight=0)
    async with serving(mailbox, handler):
        await mailbox.tell("wait:first")
        await anyio.wait_all_tasks_blocked()  # the handler is on it, blocked
        for n in range(3):
            await mailbox.tell(f"echo:{n}")
        assert mailbox.statistics() == MailboxStatistics(queued=3, served=0, in_flight=1)
        handler.gate.set()
        assert await mailbox.ask("echo:last", timeout=5) == "last"
        assert mailbox.statistics() == MailboxStatistics(queued=0, served=5, in_flight=0)
    assert handler.handled == ["wait:first", "echo:0", "echo:1", "echo:2", "echo:last"]


async def test_stop_answers_queued_asks_with_actor_stopped() -> None:
    mailbox: Mailbox[str] = Mailbox("box")
    handler = Handler()
    outcomes: dict[str, str] = {}

    async def ask(message: str) -> None:
        try:
            outcomes[message] = await mailbox.ask(message, timeout=5)
        except ActorStopped as exc:
            outcomes[message] = str(exc)

    with anyio.fail_after(10):
        async with anyio.create_task_group() as group:
            await group.start(mailbox.serve, handler)
            group.start_soon(ask, "wait:being-handled")
            await anyio.wait_all_tasks_blocked()
            for n in range(3):
                group.start_soon(ask, f"echo:{n}")
            await anyio.wait_all_tasks_blocked()
            mailbox.stop()
            handler.gate.set()  # the one being handled finishes and is answered
    assert outcomes == {
        "wait:being-handled": "wait:being-handled",
        **dict.fromkeys([f"echo:{n}" for n in range(3)], "the box actor is shutting down."),
    }
    assert handler.handled == ["wait:being-handled"]


async def test_stop_before_serving_answers_queued_asks() -> None:
    mailbox: Mailbox[str] = Mailbox("box")
    errors: list[str] = []

    async def ask() -> None:
        with pytest.raises(ActorStopped, match=r"^the box actor stopped\.$") as caught:
            await mailbox.ask("echo:x", timeout=5)
        errors.append(str(caught.value))

    with anyio.fail_after(10):
        async with anyio.create_task_group() as group:
            for _ in range(3):
                group.start_soon(ask)
            await anyio.wait_all_tasks_blocked()
            assert mailbox.statistics().queued == 3
            mailbox.stop()
    assert len(errors) == 3


async def test_asks_and_tells_after_stop_fail_at_once() -> None:
    mailbox: Mailbox[str] = Mailbox("box")
    async with serving(mailbox, Handler()):
        pass
    with anyio.fail_after(1):
        with pytest.raises(ActorStopped, match=r"^the box actor is not running\.$"):
            await mailbox.ask("echo:late", timeout=None)
        with pytest.raises(ActorStopped, match=r"^the box actor is not running\.$"):
            await mailbox.tell("echo:late")


async def test_a_cancelled_asker_does_not_wedge_the_actor() -> None:
    mailbox: Mailbox[str] = Mailbox("box", size=1)
    handler = Handler()
    async with serving(mailbox, handler) as group:
        waiting = anyio.CancelScope()
        blocked = anyio.CancelScope()

        async def ask_in(scope: anyio.CancelScope, message: str) -> None:
            with scope:
                await mailbox.ask(message, timeout=None)

        group.start_soon(ask_in, waiting, "wait:abandoned")  # being handled
        await anyio.wait_all_tasks_blocked()
        await mailbox.tell("echo:queued")  # fills the mailbox
        group.start_soon(ask_in, blocked, "echo:never-queued")  # waits for room
        await anyio.wait_all_tasks_blocked()
        waiting.cancel()  # gave up on its answer
        blocked.cancel()  # gave up before it got in
        await anyio.wait_all_tasks_blocked()
        handler.gate.set()
        assert await mailbox.ask("echo:next", timeout=5) == "next"
    assert handler.handled == ["wait:abandoned", "echo:queued", "echo:next"]
    assert mailbox.statistics().served == 3


async def test_an_asker_cancelled_before_it_asks_sends_nothing() -> None:
    mailbox: Mailbox[str] = Mailbox("box")
    handler = Handler()
    async with serving(mailbox, handler):
        with anyio.CancelScope() as scope:
            scope.cancel()
            await mailbox.ask("echo:never", timeout=5)
        assert await mailbox.ask("echo:after", timeout=5) == "after"
    assert handler.handled == ["echo:after"]


async def test_an_ask_being_handled_when_serving_is_cancelled_hears_so() -> None:
    mailbox: Mailbox[str] = Mailbox("box")
    serving_scope = anyio.CancelScope()
    errors: list[str] = []

    async def serve() -> None:
        with serving_scope:
            await mailbox.serve(Handler())

    async def ask() -> None:
        with pytest.raises(ActorStopped) as caught:
            await mailbox.ask("wait:forever", timeout=None)  # no deadline: only an answer ends it
        errors.append(str(caught.value))

    with anyio.fail_after(10):
        async with anyio.create_task_group() as group:
            group.start_soon(serve)
            group.start_soon(ask)
            await anyio.wait_all_tasks_blocked()  # being handled, the handler waiting
            serving_scope.cancel()
    assert errors == ["the box actor stopped."]
    mailbox.stop()


class KeyedHandler:
    """Messages ``"<key>:<name>"``; a name starting ``wait`` waits for ``release(key)``. Keeps
    the order messages started and finished in."""

    def __init__(self) -> None:
        self.gates: dict[str, anyio.Event] = {}
        self.started: list[str] = []
        self.finished: list[str] = []

    def release(self, key: str) -> None:
        self.gates.setdefault(key, anyio.Event()).set()

    async def __call__(self, message: str) -> str:
        key, name = message.split(":")
        self.started.append(message)
        if name.startswith("wait"):
            await self.gates.setdefault(key, anyio.Event()).wait()
        self.finished.append(message)
        return name


def _by_key(most: int, at_once: Callable[[str], Any] | None = None) -> Lanes[str]:
    return Lanes(key=lambda message: message.split(":")[0], most=most, noun="things",
                 limit="the test's limit", at_once=at_once)  # fmt: skip


async def test_lanes_serve_keys_at_once_and_each_key_in_order() -> None:
    mailbox: Mailbox[str] = Mailbox("box")
    handler = KeyedHandler()
    answers: list[str] = []

    async def ask(message: str) -> None:
        answers.append(await mailbox.ask(message, timeout=5))

    with anyio.fail_after(10):
        async with anyio.create_task_group() as group:
            await group.start(partial(mailbox.serve, handler, lanes=_by_key(4)))
            for message in ("a:wait-1", "a:2", "b:wait-1", "b:2", "c:1"):
                group.start_soon(ask, message)
                await anyio.wait_all_tasks_blocked()
            assert answers == ["1"]  # c waited for neither a nor b
            assert mailbox.statistics() == MailboxStatistics(queued=2, served=1, in_flight=2)
            handler.release("b")
            await anyio.wait_all_tasks_blocked()
            assert answers == ["1", "wait-1", "2"]  # b's two, in order; a's still wait
            handler.release("a")
            await anyio.wait_all_tasks_blocked()
            mailbox.stop()
    assert handler.finished == ["c:1", "b:wait-1", "b:2", "a:wait-1", "a:2"]


async def test_a_key_past_the_lanes_limit_is_answered_busy_at_once() -> None:
    mailbox: Mailbox[str] = Mailbox("box")
    handler = KeyedHandler()
    with anyio.fail_after(10):
        async with anyio.create_task_group() as group:
            await group.start(partial(mailbox.serve, handler, lanes=_by_key(1)))
            await mailbox.tell("a:wait")
            await anyio.wait_all_tasks_blocked()
            with pytest.raises(
                ActorBusy,
                match=r"^the box actor is busy: asks about 1 things are in flight, its limit "
                r"\(the test's limit\); str about 'b' was not taken, ask again\.$",
            ):
                await mailbox.ask("b:1", timeout=5)
            handler.release("a")
            await anyio.wait_all_tasks_blocked()  # a's lane ended: room again
            assert await mailbox.ask("b:2", timeout=5) == "2"
            mailbox.stop()
    assert handler.started == ["a:wait", "b:2"]


async def test_at_once_answers_without_a_lane_unless_its_key_has_one() -> None:
    mailbox: Mailbox[str] = Mailbox("box")
    handler = KeyedHandler()

    def at_once(message: str) -> Any:
        return "now" if message.endswith(":quick") else LATER

    with anyio.fail_after(10):
        async with anyio.create_task_group() as group:
            await group.start(partial(mailbox.serve, handler, lanes=_by_key(1, at_once)))
            assert await mailbox.ask("a:quick", timeout=5) == "now"
            await mailbox.tell("a:wait")
            await anyio.wait_all_tasks_blocked()
            assert await mailbox.ask("b:quick", timeout=5) == "now"  # no lane needed
            answers: list[str] = []

            async def behind() -> None:  # a has work: its quick one waits its turn
                answers.append(await mailbox.ask("a:quick", timeout=5))

            group.start_soon(behind)
            await anyio.wait_all_tasks_blocked()
            assert answers == []
            handler.release("a")
            await anyio.wait_all_tasks_blocked()
            assert answers == ["quick"]  # handled in a's lane, after a:wait
            mailbox.stop()
    assert mailbox.statistics().served == 4


@pytest.mark.parametrize(
    "how", [pytest.param("stop", id="stop"), pytest.param("cancel", id="cancel")]
)
async def test_asks_waiting_in_a_lane_are_answered_when_serving_ends(how: str) -> None:
    mailbox: Mailbox[str] = Mailbox("box")
    handler = KeyedHandler()
    outcomes: dict[str, str] = {}
    serving = anyio.CancelScope()

    async def serve() -> None:
        with serving:
            await mailbox.serve(handler, lanes=_by_key(4))

    async def ask(message: str) -> None:
        try:
            outcomes[message] = await mailbox.ask(message, timeout=None)
        except ActorStopped as exc:
            outcomes[message] = str(exc)

    with anyio.fail_after(10):
        async with anyio.create_task_group() as group:
            group.start_soon(serve)
            for message in ("a:wait", "a:behind", "a:last"):
                group.start_soon(ask, message)
                await anyio.wait_all_tasks_blocked()
            if how == "stop":
                mailbox.stop()
                handler.release("a")  # the one being handled finishes and is answered
            else:
                serving.cancel()
    if how == "stop":
        assert outcomes == {"a:wait": "wait",
                            "a:behind": "the box actor is shutting down.",
                            "a:last": "the box actor is shutting down."}  # fmt: skip
    else:
        assert outcomes == dict.fromkeys(["a:wait", "a:behind", "a:last"], "the box actor stopped.")
        mailbox.stop()


@pytest.mark.parametrize("lanes", [None, Lanes(key=str, most=4)], ids=["one", "lanes"])
@pytest.mark.parametrize("seconds", [0, 1e-9, 1e-6])
async def test_an_ask_past_its_deadline_before_its_turn_is_never_handled(
    lanes: Lanes[str] | None, seconds: float
) -> None:
    # The first round of an ask has no deadline's scope (it is cheaper without): a deadline
    # that runs out meanwhile must still keep the ask from being handled (a write made after
    # its asker was told it failed).
    mailbox: Mailbox[str] = Mailbox("box")
    handler = Handler()
    with anyio.fail_after(10):
        async with anyio.create_task_group() as group:
            await group.start(partial(mailbox.serve, handler, lanes=lanes))
            with pytest.raises(AskTimeout):
                await mailbox.ask("echo:late", timeout=seconds)
            assert await mailbox.ask("echo:next", timeout=5) == "next"
            mailbox.stop()
    assert handler.handled == ["echo:next"]
    assert mailbox.statistics().dropped == (0 if seconds == 0 else 1)  # 0: never queued


async def test_a_lane_key_that_raises_answers_its_asker_and_the_actor_serves_on() -> None:
    def key(message: str) -> str:
        if message == "no key":
            raise LookupError("no key for it")
        return message

    mailbox: Mailbox[str] = Mailbox("box")
    with anyio.fail_after(10):
        async with anyio.create_task_group() as group:
            await group.start(partial(mailbox.serve, Handler(), lanes=Lanes(key=key, most=2)))
            with pytest.raises(LookupError, match="no key for it"):
                await mailbox.ask("no key")
            assert await mailbox.ask("echo:after", timeout=5) == "after"
            mailbox.stop()
