"""One model server's pace in a worker: how many calls go to it at once
(``model.openai.max_concurrent``), and which calls overlapped others there.

The limit is counted per ``base_url`` in one worker (a Team): the smallest ``max_concurrent``
its roles write for the server; where none writes one, what the server can serve: the slots
it reports (llama.cpp's ``/props`` ``total_slots``, its ``--parallel``), else one for a server
on this machine or a private network that reports none (llama-cpp-python's serves one request
and, by default, cuts the running stream when another arrives) unless it answered as vLLM,
Ollama or LM Studio (they queue requests themselves), else no limit (a hosted API,
which queues or rejects with a 429 itself). Across workers only the server's own slots decide.

A call that overlapped another to the same server (one was running when the other was sent)
and got a stream cut short (no finish_reason) or an empty one met a server busy with the other
call: it waits for a call there to end and is sent again (``BUSY_RESENDS`` times at most, then
its answer counts as it is), and it is not an attempt. The worker's own look-ups there (a
window asked again, a token count for a prompt: ``aside``) overlap the calls running as another
call does: llama-cpp-python cuts a running answer for any request that reads its model.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable

import anyio

from teams_runtime.actors.models._openai_reading import on_a_local_network
from teams_runtime.actors.models.windows import ServerFacts
from teams_runtime.codecs.config import OpenAIConfig
from teams_runtime.policy.backoff import backoff_delay

__all__ = ["BUSY_RESENDS", "LOCAL_DEFAULT", "Running", "ServerPace"]

LOCAL_DEFAULT = 1  # calls at once to a local server that reports no slots
_QUEUEING_SERVERS = ("vLLM", "Ollama", "LM Studio")  # how their windows' sources begin
# How often one call is sent again after a busy server cut its stream: past this, something
# else is wrong (a server that never sends a finish_reason), and the answer counts as it is.
BUSY_RESENDS = 8
_BUSY_FIRST_SECONDS = 0.2  # the wait after a busy answer, doubling, jittered
_BUSY_MAX_SECONDS = 5.0


class Running:
    """One call sent to the server and not ended yet; ``overlapped``: another call to the
    same server ran at some moment of it."""

    __slots__ = ("overlapped",)

    def __init__(self) -> None:
        self.overlapped = False

    def busy_check(self, resends: int) -> Callable[[], bool]:
        """Whether a stream cut short or empty is the server busy: the call overlapped others
        there, and it was not sent again for that ``BUSY_RESENDS`` times already."""
        return lambda: self.overlapped and resends < BUSY_RESENDS


class ServerPace:
    """The calls running at one server from this worker, at most its limit at once."""

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url
        self._written: int | None = None  # the smallest max_concurrent its roles write
        self._running: set[Running] = set()
        self._asides = 0  # look-ups at the server now, beside the calls
        self._changed: anyio.Event | None = None  # made on first wait: inside the event loop
        self.most_running = 0  # the most calls that ran at once (tests, docs' figures)

    def write(self, max_concurrent: int | None) -> None:
        """A role that calls this server writes ``max_concurrent`` (``None``: not written):
        the smallest written wins."""
        if max_concurrent is not None and (self._written is None or max_concurrent < self._written):
            self._written = max_concurrent

    async def limit(self, config: OpenAIConfig, facts: ServerFacts) -> int | None:
        """How many calls may run at once (``None``: no limit), as the module's docstring
        says; asks the server for its slots (through ``facts``, kept for the run) only when
        no role writes a limit and the server is local."""
        if self._written is not None:
            return self._written
        if not on_a_local_network(config.base_url):
            return None
        window = await facts.window(config)
        if window.slots is not None:
            return window.slots
        # vLLM, Ollama and LM Studio queue what they cannot serve at once: no limit of ours.
        return None if window.source.startswith(_QUEUEING_SERVERS) else LOCAL_DEFAULT

    def _notify(self) -> None:
        if self._changed is not None:
            self._changed.set()
            self._changed = None

    async def _a_call_ends(self) -> None:
        if self._changed is None:
            self._changed = anyio.Event()
        await self._changed.wait()

    @contextlib.asynccontextmanager
    async def turn(self, limit: int | None) -> AsyncIterator[Running]:
        """Wait until fewer than ``limit`` calls run here, then run this one for as long as
        the ``async with`` lasts."""
        while limit is not None and len(self._running) >= limit:
            await self._a_call_ends()
        running = Running()
        if self._running or self._asides:
            running.overlapped = True
            for other in self._running:
                other.overlapped = True
        self._running.add(running)
        self.most_running = max(self.most_running, len(self._running))
        try:
            yield running
        finally:
            self._running.discard(running)
            self._notify()

    @contextlib.asynccontextmanager
    async def aside(self) -> AsyncIterator[None]:
        """A look-up of this worker at the server (its window, a token count) for as long as
        the ``async with`` lasts: it overlaps every call running there meanwhile. Never waits:
        a prompt's count must not wait for the call it would be sent after."""
        self._asides += 1
        for running in self._running:
            running.overlapped = True
        try:
            yield
        finally:
            self._asides -= 1
            self._notify()

    async def after_busy(self, resends: int) -> None:
        """A call found the server busy with others (its ``resends``-th time): wait for a
        call or a look-up here to end (at once if none runs), then a short jittered backoff."""
        if self._running or self._asides:
            await self._a_call_ends()
        await anyio.sleep(
            backoff_delay(resends, first=_BUSY_FIRST_SECONDS, cap=_BUSY_MAX_SECONDS, jitter=0.5)
        )
