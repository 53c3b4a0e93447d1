"""What a worker knows about the model servers its roles call: which are away (a server
whole, or one model on it), which ``response_format`` form each takes, how many calls each
serves at once (``ServerPace``), and each one's window and tokenizer (``ServerFacts``).

A server is *away* when a call cannot reach it or it says it cannot serve now (see
``openai_backend``); a *model* on it is away when the server says that model's limits are
reached (a 429 naming it, or on a server whose limits are per model: docs/models.md), and the
server's other models are not held back. That is not the request's fault: the call is not an
attempt, its envelope stays this worker's, and the call waits here for the server (or model).
While one is away, one waiting call at a time probes it, by sending itself again after a
backoff (1 s doubling to 60 s, each wait cut by a random part of up to half, so workers that
lost it together come back apart); the others wait for its outcome. The first answer of any
kind means the server is back; the first that is not that 429 means the model is. The Team
claims no new work for a role whose server or model is away (``is_away``).

One log line when a server (or model) goes away, one when it is back. A call reports its
outcome with the *period* it was sent in (each away and each back starts a new one): an
answer to a call sent before the server went away says nothing about it now, nor does a call
sent before it came back that finds it gone, so neither ends nor starts an away period (calls
in flight when a server dies would otherwise log it back, then away again, for one outage).

The away state is also a file,
``.teams_runtime/servers/<key>.json`` (``codecs.server_records``), one per worker waiting,
removed when the server is back or the worker stops: ``status`` runs in another process and
reads them (``storage.server_files.servers_away``), dropping those of workers no longer
running on this host.
"""

from __future__ import annotations

import contextlib
import os
import platform
from pathlib import Path

import anyio

from teams_runtime._logs import logger
from teams_runtime.actors.models._pace import ServerPace
from teams_runtime.actors.models.windows import ServerFacts
from teams_runtime.codecs.formats import now_iso
from teams_runtime.codecs.model import ResponseFormat
from teams_runtime.codecs.server_records import (
    SERVERS_FOLDER,
    ServerAway,
    encode_server_away,
    file_key,
)
from teams_runtime.exceptions import TeamsRuntimeError
from teams_runtime.policy.backoff import backoff_delay
from teams_runtime.storage.local_files import write_atomic
from teams_runtime.storage.workspace import Workspace

__all__ = [
    "PROBE_FIRST_SECONDS",
    "PROBE_MAX_SECONDS",
    "Availability",
    "ModelServer",
    "ModelServers",
    "Sending",
]

PROBE_FIRST_SECONDS = 1.0
PROBE_MAX_SECONDS = 60.0


class Availability:
    """Whether calls to one server (``model`` None), or to one model on it, go now or wait:
    away (they wait, one of them probing) or there."""

    def __init__(self, base_url: str, model: str | None, files: AwayFiles | None) -> None:
        self.base_url = base_url
        self.model = model
        self._files = files
        self._away_since: str | None = None
        self._away_at = 0.0
        self._probes = 0  # probes sent since it went away: the backoff's exponent
        self._probing = False
        self._period = 0  # one more at each away and each back: see the module's docstring
        self._changed: anyio.Event | None = None  # made on first wait: inside the event loop

    def is_away(self) -> bool:
        """Whether calls to it wait (no new work should be claimed for it)."""
        return self._away_since is not None

    @property
    def away_since(self) -> str | None:
        return self._away_since

    @property
    def period(self) -> int:
        """The away or there period now: a call takes it when it is sent (after ``turn``) and
        reports its outcome with it."""
        return self._period

    def _subject(self) -> str:
        """What the log lines name: the server, or the model on it."""
        server = f"model server {self.base_url}"
        return server if self.model is None else f"model {self.model} on {server}"

    def _stale(self, probing: bool, period: int) -> bool:
        # A probe is sent while away and nothing else changes the period meanwhile (other
        # calls wait for it), so only calls that are not probes can be from before.
        return not probing and period != self._period

    def _notify(self) -> None:
        if self._changed is not None:
            self._changed.set()
            self._changed = None

    async def turn(self) -> bool:
        """Wait while it is away, until it is back (``False``) or until it is this call's
        turn to probe it, after the backoff (``True``): the call then sends itself and
        reports with ``away`` or ``answered``, which it must do (or ``gave_up`` when it is
        cancelled). Returns at once (``False``) when it is not away."""
        while self.is_away():
            if self._probing:
                if self._changed is None:
                    self._changed = anyio.Event()
                await self._changed.wait()
                continue
            self._probing = True
            try:
                await anyio.sleep(self._backoff())
            except BaseException:
                self.gave_up(True)
                raise
            return True
        return False

    def _backoff(self) -> float:
        wait = backoff_delay(
            self._probes, first=PROBE_FIRST_SECONDS, cap=PROBE_MAX_SECONDS, jitter=0.5
        )
        self._probes += 1
        return wait

    async def away(self, reason: str, probing: bool, period: int) -> None:
        """A call sent in ``period`` found the server (or model) away (``reason``:
        content-free). The first such call of an away period logs it and writes the file; one
        sent before it came back changes nothing (it is sent again and finds out afresh)."""
        if probing:
            self._probing = False
        if self._stale(probing, period):
            return
        if self._away_since is None:
            self._period += 1
            self._away_since = now_iso()
            self._away_at = anyio.current_time()
            self._probes = 0
            logger.warning(
                "{} is away ({}); its roles wait for it and take no new work",
                self._subject(),
                reason,
            )
            if self._files is not None:
                record = ServerAway(
                    base_url=self.base_url,
                    model=self.model,
                    away_since=self._away_since,
                    host=self._files.host,
                    pid=os.getpid(),
                    reason=reason,
                )
                await anyio.to_thread.run_sync(self._files.write, record)
        self._notify()

    async def answered(self, probing: bool, period: int) -> None:
        """A call sent in ``period`` got an answer (of any kind; for a model, one that is not
        its 429): it is there, unless the call was sent before it went away (its answer is
        from before)."""
        if probing:
            self._probing = False
        if self._stale(probing, period):
            return
        if self._away_since is not None:
            self._period += 1
            seconds = anyio.current_time() - self._away_at
            self._away_since = None
            logger.info("{} is back after {:.0f} s", self._subject(), seconds)
            if self._files is not None:
                await anyio.to_thread.run_sync(self._files.remove, self.base_url, self.model)
        self._notify()

    def gave_up(self, probing: bool) -> None:
        """A call stopped (cancelled) without an outcome: another waiting call probes."""
        if probing:
            self._probing = False
            self._notify()


class ModelServer(Availability):
    """One server (one ``base_url``) as this worker sees it: away or there as a whole, each
    model on it away or there (``for_model``), the ``response_format`` form it takes, and the
    calls running there (``pace``)."""

    def __init__(self, base_url: str, files: AwayFiles | None) -> None:
        super().__init__(base_url, None, files)
        self.pace = ServerPace(base_url)
        self.form: ResponseFormat | None = None  # the response_format form it took
        self.refused: set[ResponseFormat] = set()  # forms it refused (each logged once)
        self.tools_refused = False  # it refused a request that offered tools (logged once)
        self._models: dict[str, Availability] = {}

    def for_model(self, name: str) -> Availability:
        """The one ``Availability`` of the model ``name`` on this server."""
        found = self._models.get(name)
        if found is None:
            found = self._models[name] = Availability(self.base_url, name, self._files)
        return found

    def models(self) -> list[Availability]:
        """The models on this server that calls were sent for."""
        return list(self._models.values())

    async def turn_for(self, model: Availability) -> Sending:
        """Wait while the server or ``model`` is away, until both are there or it is this
        call's turn to probe the one that is away (the server first: nothing of a model is
        known while its server is away). The call then sends itself and reports its outcome
        through what this returns, which it must do."""
        while True:
            if await self.turn():
                return Sending(self, model, self)
            if await model.turn():
                if self.is_away():  # gone while this call waited for the model: wait for it
                    model.gave_up(True)
                    continue
                return Sending(self, model, model)
            if not self.is_away():  # the model is there (or back), and so is its server
                return Sending(self, model, None)


class Sending:
    """One call as it was sent to a server for a model: which of the two it probes (``None``:
    neither was away), and the period of each then. It reports the call's outcome to both."""

    def __init__(
        self, server: ModelServer, model: Availability, probing: Availability | None
    ) -> None:
        self.server = server
        self.model = model
        self.probing = probing
        self._server_period = server.period
        self._model_period = model.period

    async def away(self, reason: str, *, whole: bool) -> None:
        """The call found the server away (``whole``), or only its model (the server
        answered: it is there)."""
        server, model = self.server, self.model
        if whole:
            await server.away(reason, self.probing is server, self._server_period)
            model.gave_up(self.probing is model)  # nothing known of the model
            return
        await server.answered(self.probing is server, self._server_period)
        await model.away(reason, self.probing is model, self._model_period)

    async def answered(self) -> None:
        """The call got an answer (of any kind): the server and its model are there."""
        await self.server.answered(self.probing is self.server, self._server_period)
        await self.model.answered(self.probing is self.model, self._model_period)

    def gave_up(self) -> None:
        """The call stopped (cancelled) without an outcome."""
        self.server.gave_up(self.probing is self.server)
        self.model.gave_up(self.probing is self.model)


class ModelServers:
    """The model servers of one worker (a Team), by ``base_url``: shared by every role's
    backend, so a server that one role found away is away for all of them. ``workspace``:
    where the away files go (``None``: none are written). ``facts``: the servers' windows and
    tokenizers, asked once for the worker."""

    def __init__(self, workspace: Workspace | None = None) -> None:
        self._files = AwayFiles(workspace) if workspace is not None else None
        self._servers: dict[str, ModelServer] = {}
        # Their look-ups (a window, a token count) are requests beside the calls: paced.
        self.facts = ServerFacts(aside=lambda base_url: self.server(base_url).pace.aside)

    def server(self, base_url: str) -> ModelServer:
        """The one ``ModelServer`` of ``base_url``."""
        found = self._servers.get(base_url)
        if found is None:
            found = self._servers[base_url] = ModelServer(base_url, self._files)
        return found

    def close(self) -> None:
        """The worker stops: its away files go (blocking; nothing waits for the servers)."""
        if self._files is not None:
            for server in self._servers.values():
                for away in (server, *server.models()):
                    if away.is_away():
                        self._files.remove(away.base_url, away.model)


class AwayFiles:
    """This worker's away files in one workspace (blocking: called from worker threads)."""

    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace
        self.host = platform.node()
        self.folder = workspace.runtime_dir / SERVERS_FOLDER

    def _path(self, base_url: str, model: str | None) -> Path:
        return self.folder / f"{file_key(base_url, self.host, os.getpid(), model)}.json"

    def write(self, record: ServerAway) -> None:
        try:
            path = self._path(record.base_url, record.model)
            write_atomic(path, encode_server_away(record), runtime=self.workspace.runtime_dir)
        except (TeamsRuntimeError, OSError) as exc:  # status shows less; the calls still wait
            logger.warning("the away state of model server {} not kept: {}", record.base_url, exc)

    def remove(self, base_url: str, model: str | None = None) -> None:
        with contextlib.suppress(OSError):
            self._path(base_url, model).unlink()
