"""The model starter: a small process of the worker's that starts its model commands (so the
worker never forks), each in a session of its own, dying with the starter, which dies with
the worker. Real processes throughout."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest
from anyio.abc import Process

from teams_runtime.actors.models.spawn import _starter as model_starter
from teams_runtime.actors.models.spawn._processes import end_group, start_model
from teams_runtime.actors.models.spawn._starter import ModelStarter, StartedModel

from ....support.processes import running
from ....support.waiting import eventually

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a Linux parent-death signal"),
]

# What the model process was given: its open file descriptors, ignored signals, session, cwd.
WHAT_IT_GOT = (
    "import os, sys\n"
    "fds = sorted(int(fd) for fd in os.listdir('/proc/self/fd'))\n"
    "ignored = [l for l in open('/proc/self/status') if l.startswith('SigIgn')][0].split()[1]\n"
    "print(fds, ignored, os.getsid(0) == os.getpid(), os.getcwd())\n"
)


@pytest.fixture
async def starter() -> AsyncIterator[ModelStarter]:
    made = ModelStarter()
    try:
        yield made
    finally:
        await made.aclose()


async def _start(starter: ModelStarter | None, command: list[str], cwd: Path) -> Process:
    return await start_model(command, cwd=cwd, env=dict(os.environ), starter=starter)


async def _talk(process: Process, stdin: bytes = b"") -> tuple[bytes, bytes, int]:
    assert process.stdin is not None and process.stdout is not None
    assert process.stderr is not None
    if stdin:
        await process.stdin.send(stdin)
    await process.stdin.aclose()
    out = b"".join([chunk async for chunk in process.stdout])
    err = b"".join([chunk async for chunk in process.stderr])
    code = await process.wait()
    await end_group(process)
    return out, err, code


async def test_a_started_model_reads_prints_and_exits_as_a_popen_one(
    starter: ModelStarter, tmp_path: Path
) -> None:
    script = "import sys; d = sys.stdin.read(); print(d.upper()); print('e', file=sys.stderr)"
    command = [sys.executable, "-c", script + "; sys.exit(3)"]
    process = await _start(starter, command, tmp_path)
    assert isinstance(process, StartedModel)
    assert await _talk(process, b"prompt" * 20_000) == (b"PROMPT" * 20_000 + b"\n", b"e\n", 3)
    direct = await _start(None, command, tmp_path)
    assert not isinstance(direct, StartedModel)
    assert await _talk(direct, b"x") == (b"X\n", b"e\n", 3)


async def test_a_model_gets_only_its_own_pipes_its_session_and_default_signals(
    starter: ModelStarter, tmp_path: Path
) -> None:
    # Another model runs meanwhile: none of its pipes (nor the starter's socket) may leak in,
    # or the first one's stdout would not end while the second runs.
    other = await _start(starter, ["sleep", "30"], tmp_path)
    try:
        command = [sys.executable, "-c", WHAT_IT_GOT]
        through_starter = await _talk(await _start(starter, command, tmp_path))
        direct = await _talk(await _start(None, command, tmp_path))
    finally:
        await end_group(other)
    assert through_starter == direct
    fds, _, rest = through_starter[0].partition(b"]")
    assert fds == b"[0, 1, 2, 3"  # 3: the folder listdir reads
    assert rest.endswith(f" True {tmp_path}\n".encode())
    assert other.returncode == -signal.SIGTERM


async def test_a_command_that_cannot_start_fails_as_popen_would(
    starter: ModelStarter, tmp_path: Path
) -> None:
    not_executable = tmp_path / "model.txt"
    not_executable.write_text("echo hi\n")
    for command, cwd, error in [
        (["no-such-model-command"], tmp_path, FileNotFoundError),
        (["sh", "-c", "true"], tmp_path / "gone", FileNotFoundError),
        ([str(not_executable)], tmp_path, PermissionError),
    ]:
        with pytest.raises(error) as raised:
            await _start(starter, command, cwd)
        with pytest.raises(error) as direct:
            await _start(None, command, cwd)
        assert raised.value.strerror == direct.value.strerror
    first = starter.pid
    assert await _talk(await _start(starter, ["echo", "ok"], tmp_path)) == (b"ok\n", b"", 0)
    assert starter.pid == first  # still the same starter


async def test_when_the_starter_dies_its_models_die_and_a_new_one_takes_over(
    starter: ModelStarter, tmp_path: Path
) -> None:
    model = await _start(starter, ["sleep", "30"], tmp_path)
    first = starter.pid
    assert first is not None and running(model.pid)
    os.kill(first, signal.SIGKILL)
    with anyio.fail_after(10):
        assert await model.wait() == -signal.SIGKILL
    await eventually(lambda: not running(model.pid), "the killed model to be gone")
    await end_group(model)
    assert await _talk(await _start(starter, ["echo", "again"], tmp_path)) == (b"again\n", b"", 0)
    assert starter.pid not in (None, first)


async def test_a_start_too_large_for_the_starter_is_made_by_the_worker(
    starter: ModelStarter, tmp_path: Path
) -> None:
    env = {**os.environ, **{f"BIG{n}": "x" * 100_000 for n in range(3)}}  # 128 KiB each at most
    assert await starter.start(["true"], cwd=tmp_path, env=env) is None
    process = await start_model(
        ["sh", "-c", 'echo "${#BIG2}"'], cwd=tmp_path, env=env, starter=starter
    )
    assert not isinstance(process, StartedModel)
    assert await _talk(process) == (b"100000\n", b"", 0)


async def test_closing_the_starter_ends_its_process(tmp_path: Path) -> None:
    starter = ModelStarter()
    assert starter.pid is None
    await _talk(await _start(starter, ["true"], tmp_path))
    pid = starter.pid
    assert pid is not None and running(pid)
    await starter.aclose()
    assert starter.pid is None and not running(pid)


async def test_a_stuck_starter_is_killed_with_its_models_and_the_worker_starts_the_next(
    starter: ModelStarter, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(model_starter, "START_SECONDS", 0.5)
    model = await _start(starter, ["sleep", "30"], tmp_path)
    stuck = starter.pid
    assert stuck is not None
    os.kill(stuck, signal.SIGSTOP)
    with anyio.fail_after(10):  # not waiting for the stopped starter
        process = await _start(starter, ["echo", "direct"], tmp_path)
        assert not isinstance(process, StartedModel)
        assert await _talk(process) == (b"direct\n", b"", 0)
        assert await model.wait() == -signal.SIGKILL
    assert not running(stuck) and starter.pid is None
    await end_group(model)


async def test_the_starter_leaves_stop_signals_to_its_worker(
    starter: ModelStarter, tmp_path: Path
) -> None:
    # A terminal's Ctrl-C or a service manager's stop reaches every process of the worker's
    # group: a starter dying of it would kill the models before their grace.
    model = await _start(starter, ["sleep", "30"], tmp_path)
    pid = starter.pid
    assert pid is not None and os.getsid(pid) == pid  # a session of its own
    for signum in (signal.SIGINT, signal.SIGTERM):
        os.kill(pid, signum)
    # It answers after the signals: a signal that killed it would have before it could (the
    # kernel acts on a pending signal before the process runs on).
    assert await _talk(await _start(starter, ["echo", "after"], tmp_path)) == (b"after\n", b"", 0)
    assert starter.pid == pid and running(pid) and running(model.pid)
    await end_group(model)
    assert model.returncode == -signal.SIGTERM  # the model itself still takes SIGTERM
