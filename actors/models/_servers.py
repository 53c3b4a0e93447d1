"""What a worker knows about the model servers its roles call: which are away, and which
``response_format`` form each takes.

A server is *away* when a call cannot reach it or it says it cannot serve now (see
``openai_backend``). That is not the request's fault: the call is not an attempt, its envelope
stays this worker's, and the call waits here for the server. While a server is away, one
waiting call at a time probes it, by sending itself again after a backoff (1 s doubling to
60 s, each wait cut by a random part of up to half, so workers that lost it together come back
apart); the others wait for its outcome. The first answer of any kind means the server is back.
The Team claims no new work for a role whose server is away (``is_away``).

One log line when a server goes away, one when it is back. A call reports its outcome with
the *period* it was sent in (each away and each back starts a new one): an answer to a call
sent before the server went away says nothing about it now, nor does a call sent before it
came back that finds it gone, so neither ends nor starts an away period (calls in flight when
a server dies would otherwise log it back, then away again, for one outage).

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
    "ModelServer",
    "ModelServers",
]

PROBE_FIRST_SECONDS = 1.0
PROBE_MAX_SECONDS = 60.0


class ModelServer:
    """One server (one ``base_url``) as this worker sees it."""

    def __init__(self, base_url: str, files: AwayFiles | None) -> None:
        self.base_url = base_url
        self._files = files
        self.form: ResponseFormat | None = None  # the response_format form it took
        self.refused: set[ResponseFormat] = set()  # forms it refused (each logged once)
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

    def _stale(self, probing: bool, period: int) -> bool:
        # A probe is sent while away and nothing else changes the period meanwhile (other
        # calls wait for it), so only calls that are not probes can be from before.
        return not probing and period != self._period

    def _notify(self) -> None:
        if self._changed is not None:
            self._changed.set()
            self._changed = None

    async def turn(self) -> bool:
        """Wait while the server is away, until it is back (``False``) or until it is this
        call's turn to probe it, after the backoff (``True``): the call then sends itself and
        reports with ``away`` or ``answered``, which it must do (or ``gave_up`` when it is
        cancelled). Returns at once (``False``) when the server is not away."""
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
        """A call sent in ``period`` found the server away (``reason``: content-free). The
        first such call of an away period logs it and writes the file; one sent before the
        server came back changes nothing (it is sent again and finds out afresh)."""
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
                "model server {} is away ({}); its roles wait for it and take no new work",
                self.base_url,
                reason,
            )
            if self._files is not None:
                record = ServerAway(
                    base_url=self.base_url,
                    away_since=self._away_since,
                    host=self._files.host,
                    pid=os.getpid(),
                    reason=reason,
                )
                await anyio.to_thread.run_sync(self._files.write, record)
        self._notify()

    async def answered(self, probing: bool, period: int) -> None:
        """A call sent in ``period`` got an answer (of any kind): the server is there, unless
        the call was sent before it went away (its answer is from before)."""
        if probing:
            self._probing = False
        if self._stale(probing, period):
            return
        if self._away_since is not None:
            self._period += 1
            seconds = anyio.current_time() - self._away_at
            self._away_since = None
            logger.info("model server {} is back after {:.0f} s", self.base_url, seconds)
            if self._files is not None:
                await anyio.to_thread.run_sync(self._files.remove, self.base_url)
        self._notify()

    def gave_up(self, probing: bool) -> None:
        """A call stopped (cancelled) without an outcome: another waiting call probes."""
        if probing:
            self._probing = False
            self._notify()


class ModelServers:
    """The model servers of one worker (a Team), by ``base_url``: shared by every role's
    backend, so a server that one role found away is away for all of them. ``workspace``:
    where the away files go (``None``: none are written)."""

    def __init__(self, workspace: Workspace | None = None) -> None:
        self._files = AwayFiles(workspace) if workspace is not None else None
        self._servers: dict[str, ModelServer] = {}

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
                if server.is_away():
                    self._files.remove(server.base_url)


class AwayFiles:
    """This worker's away files in one workspace (blocking: called from worker threads)."""

    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace
        self.host = platform.node()
        self.folder = workspace.runtime_dir / SERVERS_FOLDER

    def _path(self, base_url: str) -> Path:
        return self.folder / f"{file_key(base_url, self.host, os.getpid())}.json"

    def write(self, record: ServerAway) -> None:
        try:
            path = self._path(record.base_url)
            write_atomic(path, encode_server_away(record), runtime=self.workspace.runtime_dir)
        except (TeamsRuntimeError, OSError) as exc:  # status shows less; the calls still wait
            logger.warning("the away state of model server {} not kept: {}", record.base_url, exc)

    def remove(self, base_url: str) -> None:
        with contextlib.suppress(OSError):
            self._path(base_url).unlink()
