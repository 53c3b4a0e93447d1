"""Model processes for real: process groups ended on timeout, cancellation, answer and stop;
the working folder and environment a model gets; the attempts folder; progress lines."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from loguru import logger

from teams_runtime import PromptContextConfig, project_request
from teams_runtime.actors import model_backends, role_actor
from teams_runtime.actors.model_backends import STDERR_TAIL_BYTES, CommandBackend
from teams_runtime.actors.storage import FileWorkQueue, Workspace
from teams_runtime.codecs.config import ModelConfig
from teams_runtime.codecs.messages import MessageEnvelope
from teams_runtime.demo import sample_record
from teams_runtime.exceptions import ModelFailure
from teams_runtime.monitoring import configure_logging, stop_logging
from teams_runtime.prompts import PromptBundle, build_prompt

from .test_team import FAKE_MODEL, _run_once, _seed, _workspace

pytestmark = pytest.mark.anyio

# A model that starts a child (which starts a grandchild), says every pid, then hangs. With
# IGNORE_TERM its descendants ignore SIGTERM, so only SIGKILL ends them.
#     python -c FAMILY PIDS_FILE [IGNORE_TERM]
FAMILY = """
import os, signal, subprocess, sys, time
ignore = len(sys.argv) > 2
if ignore:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # inherited by the children below
child = subprocess.Popen([sys.executable, "-c",
    "import subprocess, sys, time\\n"
    "grandchild = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\\n"
    "print(grandchild.pid, flush=True)\\n"
    "time.sleep(60)"], stdout=subprocess.PIPE, text=True)
grandchild = child.stdout.readline().strip()
with open(sys.argv[1] + ".tmp", "w") as out:
    out.write(f"{os.getpid()} {child.pid} {grandchild}")
os.replace(sys.argv[1] + ".tmp", sys.argv[1])
time.sleep(60)
"""

# Answers at once, leaving a background process that holds its stdout open for 30 s.
#     python -c ANSWER_AND_LINGER PID_FILE
ANSWER_AND_LINGER = """
import json, subprocess, sys
sys.stdin.read()
lingering = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
with open(sys.argv[1], "w") as out:
    out.write(str(lingering.pid))
print(json.dumps({"answer": "valid"}), flush=True)
"""

# Says where it runs and what TEAMS_RUNTIME_WORKSPACE says, then answers.
#     python -c WHERE OUT_FILE
WHERE = """
import json, os, sys
sys.stdin.read()
with open(sys.argv[1], "w") as out:
    json.dump({"cwd": os.getcwd(), "workspace": os.environ["TEAMS_RUNTIME_WORKSPACE"]}, out)
print("{}")
"""


def _bundle(request_id: str = "req-1", role: str = "qa") -> PromptBundle:
    projection = project_request(sample_record(5, request_id), PromptContextConfig())
    envelope = MessageEnvelope(request_id=request_id, sender="user", target=role, scope="do it")
    return build_prompt("task", role=role, projection=projection, envelope=envelope)


def _backend(root: Path, command: list[str], timeout: float = 20) -> CommandBackend:
    config = ModelConfig(backend="command", command=command, timeout_seconds=timeout)
    return CommandBackend(config, root)


def _running(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie, exited and not reaped yet, is not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        if Path("/proc/self/stat").exists():
            return False
        try:  # no /proc: ask the kernel (a zombie counts as running here)
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _group_alive(pgid: int) -> bool:
    """Whether any live process is in the process group ``pgid``."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    if not Path("/proc/self/stat").exists():
        return True
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # gone while we looked
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False


async def _eventually(condition: Callable[[], bool], seconds: float = 10) -> None:
    with anyio.fail_after(seconds):
        while not condition():  # noqa: ASYNC110 (another process's exit sets no event: poll)
            await anyio.sleep(0.02)


def _eventually_sync(condition: Callable[[], bool], seconds: float = 10) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.02)


async def _pids(path: Path) -> list[int]:
    await _eventually(path.exists)
    return [int(pid) for pid in path.read_text().split()]


@pytest.mark.parametrize(
    "command",
    [
        pytest.param(["sh", "-c", 'echo $$ > "$0"; sleep 1002 | cat'], id="shell-pipeline"),
        pytest.param([sys.executable, "-c", FAMILY], id="python-family"),
    ],
)
async def test_a_timeout_ends_the_whole_process_group(tmp_path: Path, command: list[str]) -> None:
    pid_file = tmp_path / "pids"
    backend = _backend(tmp_path, [*command, str(pid_file)], timeout=1)
    with anyio.fail_after(15):
        with pytest.raises(ModelFailure, match=r"^no answer within 1 s \(timeout_seconds\)"):
            await backend.complete(_bundle())
        pids = await _pids(pid_file)
        await _eventually(lambda: not _group_alive(pids[0]))
    assert not any(_running(pid) for pid in pids)


async def test_processes_that_ignore_sigterm_are_killed_after_the_grace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(model_backends, "GRACE_SECONDS", 0.5)
    pid_file = tmp_path / "pids"
    backend = _backend(tmp_path, [sys.executable, "-c", FAMILY, str(pid_file), "ignore"], 1)
    with anyio.fail_after(15):
        started = anyio.current_time()
        with pytest.raises(ModelFailure, match=r"^no answer within 1 s"):
            await backend.complete(_bundle())
        assert anyio.current_time() - started >= 1.5  # the timeout, then the whole grace
        pids = await _pids(pid_file)
        await _eventually(lambda: not _group_alive(pids[0]))


async def test_an_answer_is_taken_while_a_grandchild_holds_stdout(tmp_path: Path) -> None:
    pid_file = tmp_path / "lingering"
    backend = _backend(tmp_path, [sys.executable, "-c", ANSWER_AND_LINGER, str(pid_file)])
    with anyio.fail_after(15):
        started = anyio.current_time()
        reply = await backend.complete(_bundle())
        assert anyio.current_time() - started < 5  # well within the 20 s timeout
        assert json.loads(reply.text) == {"answer": "valid"}
        (lingering,) = await _pids(pid_file)
        await _eventually(lambda: not _running(lingering))


async def test_cancelling_a_call_ends_its_process_group(tmp_path: Path) -> None:
    pid_file = tmp_path / "pids"
    backend = _backend(tmp_path, [sys.executable, "-c", FAMILY, str(pid_file)])
    with anyio.fail_after(15):
        async with anyio.create_task_group() as group:
            group.start_soon(backend.complete, _bundle())
            pids = await _pids(pid_file)
            assert all(_running(pid) for pid in pids)
            group.cancel_scope.cancel()
        await _eventually(lambda: not _group_alive(pids[0]))
    assert not any(_running(pid) for pid in pids)


async def test_the_model_runs_in_the_workspace_with_its_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    out = tmp_path / "where.json"
    backend = _backend(Path("../ws"), [sys.executable, "-c", WHERE, str(out)])
    with anyio.fail_after(15):
        await backend.complete(_bundle())
    where = json.loads(out.read_text())
    assert where["workspace"] == str(workspace)  # absolute, whatever the run's folder
    assert os.path.samefile(where["cwd"], workspace)


async def test_a_failure_carries_what_the_model_printed_not_in_its_message(
    tmp_path: Path,
) -> None:
    script = (
        "import sys; sys.stdin.read(); print('partial answer');"
        "sys.stderr.write('noise ' * 5000 + 'LAST-WORDS'); sys.exit(3)"
    )
    backend = _backend(tmp_path, [sys.executable, "-c", script])
    with anyio.fail_after(15), pytest.raises(ModelFailure) as caught:
        await backend.complete(_bundle())
    failure = caught.value
    assert str(failure) == "the model command exited with status 3 (30010 bytes on stderr)"
    assert failure.exit_status == 3
    assert failure.output == "partial answer\n"
    assert len(failure.stderr_tail) == STDERR_TAIL_BYTES
    assert failure.stderr_tail.endswith("noise LAST-WORDS")


def _command_workspace(root: Path, command: list[str]) -> None:
    """A workspace made by `teams-runtime init`, its model section set to ``command``."""
    subprocess.run(
        [sys.executable, "-m", "teams_runtime", "init", str(root)],
        check=True,
        capture_output=True,
        cwd=root.parent,
    )
    config = root / "team_runtime.yaml"
    text = config.read_text()
    config.write_text(
        text[: text.index("\nmodel:")]
        + f"\nmodel:\n  backend: command\n  command: {json.dumps(command)}\n"
        "  timeout_seconds: 60\n  attempts: 1\n"
    )


def test_sigterm_stops_run_once_with_the_envelope_queued_and_no_model_left(
    tmp_path: Path,
) -> None:
    root = tmp_path / "ws"
    pid_file = tmp_path / "pids"
    _command_workspace(root, [sys.executable, "-c", FAMILY, str(pid_file)])
    _seed(Workspace(root), "req-1", "qa", events=5)
    runner = subprocess.Popen(
        [sys.executable, "-m", "teams_runtime", "run", "--once", "--workspace", str(root)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
    )
    try:
        _eventually_sync(lambda: pid_file.exists() or runner.poll() is not None, 30)
        assert runner.poll() is None, runner.communicate()
        pids = [int(pid) for pid in pid_file.read_text().split()]
        runner.send_signal(signal.SIGTERM)
        out, err = runner.communicate(timeout=30)
    finally:
        if runner.poll() is None:
            runner.kill()
    assert runner.returncode == 0, err
    assert "Handled 0 envelope(s)" in out
    assert "Stopped; 1 envelope(s) queued for the next run." in out
    assert "SIGTERM received: stopping the team" in err
    counts = FileWorkQueue(Workspace(root)).counts()
    assert (counts["qa"], sum(counts.values())) == (1, 1)  # still queued for the next run
    _eventually_sync(lambda: not _group_alive(pids[0]))
    assert not any(_running(pid) for pid in pids)


def test_a_relative_command_runs_from_the_workspace_whatever_the_folder(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    _command_workspace(root, ["./model.sh"])
    model = root / "model.sh"
    model.write_text(
        "#!/bin/sh\n"
        'pwd -P > where.txt\necho "$TEAMS_RUNTIME_WORKSPACE" >> where.txt\n'
        f'exec "{sys.executable}" "{FAKE_MODEL}" valid "{tmp_path / "state"}"\n'
    )
    model.chmod(0o755)
    _seed(Workspace(root), "req-1", "qa", events=5)
    (tmp_path / "elsewhere").mkdir()
    done = subprocess.run(
        [sys.executable, "-m", "teams_runtime", "run", "--once", "--workspace", "../ws"],
        capture_output=True,
        text=True,
        cwd=tmp_path / "elsewhere",
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "Handled 1 envelope(s): 0 failed" in done.stdout
    cwd, workspace = (root / "where.txt").read_text().splitlines()
    assert os.path.samefile(cwd, root)
    assert workspace == str(root)


def _attempts(root: Path, request_id: str) -> list[dict[str, Any]]:
    folder = root / ".teams_runtime" / "attempts" / request_id
    files = sorted(folder.iterdir())
    for path in files:
        assert re.fullmatch(r"\d{8}T\d{6}\.\d{6}Z-qa-role_task-\d\.json", path.name), path.name
    return [json.loads(path.read_text()) for path in files]


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        pytest.param(
            "exit_1",
            [
                {"call": 1, "exit_status": 1, "stderr_tail": "model exploded\n", "answer": ""},
                {"call": 2, "exit_status": 1, "stderr_tail": "model exploded\n", "answer": ""},
            ],
            id="exit-1",
        ),
        pytest.param("invalid_once", [{"call": 1, "exit_status": 0}], id="invalid-answer"),
    ],
)
async def test_failed_calls_and_rejected_answers_are_kept_out_of_the_logs(
    tmp_path: Path, mode: str, expected: list[dict[str, Any]]
) -> None:
    workspace = _workspace(tmp_path, mode)
    _seed(workspace, "req-1", "qa")
    configure_logging(workspace, console_level="ERROR")
    try:
        await _run_once(workspace)
    finally:
        stop_logging()
        logger.disable("teams_runtime")
    attempts = _attempts(tmp_path, "req-1")
    assert [{key: a[key] for key in e} for a, e in zip(attempts, expected, strict=True)] == expected
    for attempt in attempts:
        assert (attempt["request_id"], attempt["role"], attempt["purpose"]) == (
            "req-1",
            "qa",
            "role_task",
        )
    qa_log = (workspace.logs_dir / "qa.log").read_text()
    if mode == "exit_1":
        assert attempts[0]["reason"].startswith("the model command exited with status 1")
        assert "qa: model failed for request req-1: the model command exited" in qa_log
        secret = "model exploded"
    else:
        (attempt,) = attempts
        assert (
            attempt["reason"]
            == f"rejected by contract validation ({len(attempt['issues'])} issues)"
        )
        assert json.loads(attempt["answer"])["status"] == "done-ish"
        assert "qa: result for request req-1 rejected by contract validation" in qa_log
        secret = "done-ish"
    for log in workspace.logs_dir.iterdir():
        assert secret not in log.read_text(), log.name


async def test_verbose_progress_names_the_call_and_nothing_else(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(role_actor, "PROGRESS_SECONDS", 0.2)
    workspace = _workspace(tmp_path, "slow:0.9")
    _seed(workspace, "req-1", "qa")
    lines: list[str] = []
    logger.enable("teams_runtime")
    sink = logger.add(lambda message: lines.append(message.record["message"]), level="DEBUG")
    try:
        await _run_once(workspace)
    finally:
        logger.remove(sink)
        logger.disable("teams_runtime")
    assert "model call started: qa for req-1 (role_task)" in lines
    running = [line for line in lines if line.startswith("model call running:")]
    assert running and all(
        re.fullmatch(r"model call running: qa for req-1, \d+ s", line) for line in running
    )
