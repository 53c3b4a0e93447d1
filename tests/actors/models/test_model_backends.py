"""Model processes for real: process groups ended on timeout, cancellation, answer and stop;
the working folder and environment a model gets; the attempts folder; progress lines."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from loguru import logger

from teams_runtime import PromptContextConfig, project_request
from teams_runtime.actors.models import _reporting as model_reporting
from teams_runtime.actors.models._backends import (
    STDERR_TAIL_BYTES,
    CommandBackend,
    DryRunBackend,
    make_backend,
)
from teams_runtime.actors.models.spawn import _processes as model_processes
from teams_runtime.actors.models.spawn._starter import ModelStarter
from teams_runtime.codecs.config import DryRunConfig, ModelConfig
from teams_runtime.codecs.envelopes import MessageEnvelope
from teams_runtime.demo import sample_record
from teams_runtime.exceptions import ModelFailure
from teams_runtime.monitoring import configure_logging, stop_logging
from teams_runtime.policy.prompts import PromptBundle, build_prompt
from teams_runtime.storage import FileWorkQueue, Workspace

from ...support.processes import group_alive, model_starters_of, running
from ...support.waiting import eventually, eventually_sync

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


@pytest.fixture(params=["model starter", "started by the worker"])
async def starter(request: pytest.FixtureRequest) -> AsyncIterator[ModelStarter | None]:
    """A Team's model starter (how a worker starts its models), or none (the backend starts
    them itself, as it does on its own): each backend test runs both ways."""
    if request.param != "model starter":
        yield None
        return
    made = ModelStarter()
    try:
        yield made
    finally:
        await made.aclose()


@pytest.fixture
def quick_grace(monkeypatch: pytest.MonkeyPatch) -> None:
    """Half a second's grace between SIGTERM and SIGKILL, not 2 s. The group's end is what is
    checked; a killed model's children are orphans, and where the init process is slow to reap
    them their zombies keep the group "alive" until the grace runs out."""
    monkeypatch.setattr(model_processes, "GRACE_SECONDS", 0.5)


def _backend(
    root: Path, command: list[str], timeout: float = 20, *, starter: ModelStarter | None
) -> CommandBackend:
    config = ModelConfig(backend="command", command=command, timeout_seconds=timeout)
    return CommandBackend(config, root, starter)


async def _pids(path: Path) -> list[int]:
    await eventually(path.exists, f"the model to write {path.name}")
    return [int(pid) for pid in path.read_text().split()]


@pytest.mark.parametrize(
    "command",
    [
        pytest.param(["sh", "-c", 'echo $$ > "$0"; sleep 1002 | cat'], id="shell-pipeline"),
        pytest.param([sys.executable, "-c", FAMILY], id="python-family"),
    ],
)
async def test_a_timeout_ends_the_whole_process_group(
    starter: ModelStarter | None, tmp_path: Path, command: list[str], quick_grace: None
) -> None:
    pid_file = tmp_path / "pids"
    backend = _backend(tmp_path, [*command, str(pid_file)], timeout=1, starter=starter)
    with anyio.fail_after(15):
        with pytest.raises(ModelFailure, match=r"^no answer within 1 s \(timeout_seconds\)"):
            await backend.complete(_bundle())
        pids = await _pids(pid_file)
        await eventually(lambda: not group_alive(pids[0]), "the model's group to end")
    assert not any(running(pid) for pid in pids)


async def test_processes_that_ignore_sigterm_are_killed_after_the_grace(
    starter: ModelStarter | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(model_processes, "GRACE_SECONDS", 0.5)
    pid_file = tmp_path / "pids"
    backend = _backend(
        tmp_path, [sys.executable, "-c", FAMILY, str(pid_file), "ignore"], 1, starter=starter
    )
    with anyio.fail_after(15):
        started = anyio.current_time()
        with pytest.raises(ModelFailure, match=r"^no answer within 1 s"):
            await backend.complete(_bundle())
        assert anyio.current_time() - started >= 1.5  # the timeout, then the whole grace
        pids = await _pids(pid_file)
        await eventually(lambda: not group_alive(pids[0]), "the model's group to end")


async def test_an_answer_is_taken_while_a_grandchild_holds_stdout(
    starter: ModelStarter | None, tmp_path: Path
) -> None:
    pid_file = tmp_path / "lingering"
    backend = _backend(
        tmp_path, [sys.executable, "-c", ANSWER_AND_LINGER, str(pid_file)], starter=starter
    )
    with anyio.fail_after(15):
        started = anyio.current_time()
        reply = await backend.complete(_bundle())
        assert anyio.current_time() - started < 5  # well within the 20 s timeout
        assert json.loads(reply.text) == {"answer": "valid"}
        (lingering,) = await _pids(pid_file)
        await eventually(lambda: not running(lingering), "the grandchild to end")


async def test_cancelling_a_call_ends_its_process_group(
    starter: ModelStarter | None, tmp_path: Path, quick_grace: None
) -> None:
    pid_file = tmp_path / "pids"
    backend = _backend(tmp_path, [sys.executable, "-c", FAMILY, str(pid_file)], starter=starter)
    with anyio.fail_after(15):
        async with anyio.create_task_group() as group:
            group.start_soon(backend.complete, _bundle())
            pids = await _pids(pid_file)
            assert all(running(pid) for pid in pids)
            group.cancel_scope.cancel()
        await eventually(lambda: not group_alive(pids[0]), "the model's group to end")
    assert not any(running(pid) for pid in pids)


async def test_the_model_runs_in_the_workspace_with_its_path(
    starter: ModelStarter | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    out = tmp_path / "where.json"
    backend = _backend(Path("../ws"), [sys.executable, "-c", WHERE, str(out)], starter=starter)
    with anyio.fail_after(15):
        await backend.complete(_bundle())
    where = json.loads(out.read_text())
    assert where["workspace"] == str(workspace)  # absolute, whatever the run's folder
    assert os.path.samefile(where["cwd"], workspace)


async def test_a_failure_carries_what_the_model_printed_not_in_its_message(
    starter: ModelStarter | None,
    tmp_path: Path,
) -> None:
    script = (
        "import sys; sys.stdin.read(); print('partial answer');"
        "sys.stderr.write('noise ' * 5000 + 'LAST-WORDS'); sys.exit(3)"
    )
    backend = _backend(tmp_path, [sys.executable, "-c", script], starter=starter)
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


def _run_while_the_model_runs(
    tmp_path: Path,
    seed: Callable[..., None],
    script: str,
    *run_args: str,
    **popen: Any,
) -> subprocess.Popen[str]:
    """`teams-runtime run RUN_ARGS` on a workspace with one qa envelope, whose model is
    ``python -c script PID_FILE`` (``tmp_path / "pids"``); returned once the model has written
    that file (the runner is killed if it never does)."""
    root = tmp_path / "ws"
    pid_file = tmp_path / "pids"
    _command_workspace(root, [sys.executable, "-c", script, str(pid_file)])
    seed(Workspace(root), "req-1", "qa", events=5)
    runner = subprocess.Popen(
        [sys.executable, "-m", "teams_runtime", "run", *run_args, "--workspace", str(root)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **popen,
    )
    try:
        eventually_sync(
            lambda: pid_file.exists() or runner.poll() is not None, "the model to start", 30
        )
        assert runner.poll() is None, runner.communicate()
    except BaseException:
        runner.kill()
        runner.communicate()
        raise
    return runner


def test_sigterm_stops_run_once_with_the_envelope_queued_and_no_model_left(
    tmp_path: Path, seed: Callable[..., None]
) -> None:
    root = tmp_path / "ws"
    runner = _run_while_the_model_runs(tmp_path, seed, FAMILY, "--once", cwd=tmp_path)
    try:
        pids = [int(pid) for pid in (tmp_path / "pids").read_text().split()]
        runner.send_signal(signal.SIGTERM)
        out, err = runner.communicate(timeout=30)
    finally:
        if runner.poll() is None:
            runner.kill()
    assert runner.returncode == 0, err
    assert "Finished 0 envelopes" in out
    assert "Stopped; 1 envelope queued for the next run." in out
    assert "SIGTERM received: stopping the team" in err
    counts = FileWorkQueue(Workspace(root)).counts()
    assert (counts["qa"], sum(counts.values())) == (1, 1)  # still queued for the next run
    eventually_sync(lambda: not group_alive(pids[0]), "the model's group to end")
    assert not any(running(pid) for pid in pids)


# Says its pid, then waits; at SIGTERM it takes a moment to clean up, then says so and exits.
#     python -c SLOW_TO_STOP PID_FILE
SLOW_TO_STOP = """
import os, signal, sys, time
def stop(*_):
    time.sleep(0.5)
    open(sys.argv[1] + ".cleaned", "w").close()
    sys.exit(0)
signal.signal(signal.SIGTERM, stop)
with open(sys.argv[1] + ".tmp", "w") as out:
    out.write(str(os.getpid()))
os.replace(sys.argv[1] + ".tmp", sys.argv[1])
time.sleep(60)
"""


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_a_stop_sent_to_the_workers_whole_group_gives_the_model_its_grace(
    tmp_path: Path, seed: Callable[..., None], signum: int
) -> None:
    # A terminal's Ctrl-C, `kill -- -PGID` and a service manager's stop signal every process
    # of the worker's group at once: the model still gets its SIGTERM and time to clean up.
    # A group of its own, as a terminal or a service manager gives it.
    runner = _run_while_the_model_runs(
        tmp_path, seed, SLOW_TO_STOP, "--once", start_new_session=True
    )
    try:
        os.killpg(runner.pid, signum)
        out, err = runner.communicate(timeout=30)
    finally:
        if runner.poll() is None:
            runner.kill()
    assert runner.returncode == 0, err
    assert "Traceback" not in err
    assert "Stopped; 1 envelope queued for the next run." in out
    assert (tmp_path / "pids.cleaned").exists()  # its SIGTERM, then its grace: not a SIGKILL


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a Linux parent-death signal")
def test_kill_9_of_run_during_a_call_takes_the_model_process_with_it(
    tmp_path: Path, seed: Callable[..., None]
) -> None:
    # Nothing of a worker killed with SIGKILL runs: it cannot end the model's group. The
    # kernel then kills the model's process (its parent-death signal), within moments.
    pid_file = tmp_path / "pids"
    runner = _run_while_the_model_runs(tmp_path, seed, FAMILY)
    try:
        model = int(pid_file.read_text().split()[0])
        assert running(model)
        starters = model_starters_of(runner.pid)  # the worker's: the model's parent
        assert len(starters) == 1, starters
        runner.send_signal(signal.SIGKILL)
        runner.communicate(timeout=30)
        # Gone within a second or two:
        eventually_sync(lambda: not running(model), "the model's parent-death signal", 2.0)
        assert not running(starters[0])
    finally:
        if runner.poll() is None:
            runner.kill()
        for pid in pid_file.read_text().split() if pid_file.exists() else []:
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGKILL)  # what the model started itself lives on


def test_a_relative_command_runs_from_the_workspace_whatever_the_folder(
    tmp_path: Path, seed: Callable[..., None], fake_model: Path
) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    _command_workspace(root, ["./model.sh"])
    model = root / "model.sh"
    model.write_text(
        "#!/bin/sh\n"
        'pwd -P > where.txt\necho "$TEAMS_RUNTIME_WORKSPACE" >> where.txt\n'
        f'exec "{sys.executable}" "{fake_model}" valid "{tmp_path / "state"}"\n'
    )
    model.chmod(0o755)
    seed(Workspace(root), "req-1", "qa", events=5)
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
    assert "Finished 1 envelope: 1 done, 0 failed" in done.stdout
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
    tmp_path: Path,
    mode: str,
    expected: list[dict[str, Any]],
    team_workspace: Callable[..., Workspace],
    seed: Callable[..., None],
    run_once: Callable[..., Any],
) -> None:
    workspace = team_workspace(mode)
    seed(workspace, "req-1", "qa")
    configure_logging(workspace, console_level="ERROR")
    try:
        await run_once(workspace)
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
    monkeypatch: pytest.MonkeyPatch,
    team_workspace: Callable[..., Workspace],
    seed: Callable[..., None],
    run_once: Callable[..., Any],
) -> None:
    monkeypatch.setattr(model_reporting, "PROGRESS_SECONDS", 0.2)
    workspace = team_workspace("slow:0.9")
    seed(workspace, "req-1", "qa")
    lines: list[str] = []
    logger.enable("teams_runtime")
    sink = logger.add(lambda message: lines.append(message.record["message"]), level="DEBUG")
    try:
        await run_once(workspace)
    finally:
        logger.remove(sink)
        logger.disable("teams_runtime")
    assert "model call started: qa for req-1 (role_task)" in lines
    running = [line for line in lines if line.startswith("model call running:")]
    assert running and all(
        re.fullmatch(r"model call running: qa for req-1, \d+ s", line) for line in running
    )


# --- what helper tests of the backend itself check ------------------------------------------

MakeBundle = Callable[..., PromptBundle]


def _plain_backend(
    command: list[str], starter: ModelStarter | None, **settings: Any
) -> CommandBackend:
    config = ModelConfig(backend="command", command=command, **settings)
    return CommandBackend(config, Path.cwd(), starter)


def _python(script: str, *args: str) -> list[str]:
    return [sys.executable, "-c", script, *args]


async def test_the_answer_is_what_the_model_prints(
    starter: ModelStarter | None,
    tmp_path: Path,
    model_command: Callable[..., list[str]],
    prompt_bundle: MakeBundle,
) -> None:
    bundle = prompt_bundle("task", role="planner", request_id="req-5")
    with anyio.fail_after(30):
        text = (
            await _plain_backend(model_command("valid", tmp_path), starter).complete(bundle)
        ).text
    answer = json.loads(text)  # the fake model answers for the role and request it was told
    assert (answer["request_id"], answer["role"], answer["next_role"]) == (
        "req-5",
        "planner",
        "developer",
    )
    (call,) = [json.loads(line) for line in (tmp_path / "calls.log").read_text().splitlines()]
    assert (call["role"], call["request_id"], call["purpose"]) == ("planner", "req-5", "role_task")


async def test_the_whole_prompt_is_streamed_to_stdin(
    starter: ModelStarter | None, prompt_bundle: MakeBundle
) -> None:
    digest = "import sys, hashlib; print(hashlib.sha256(sys.stdin.buffer.read()).hexdigest())"
    bundle = prompt_bundle(events=200, config=PromptContextConfig(enabled=False))  # ~200 KB
    with anyio.fail_after(30):
        text = (await _plain_backend(_python(digest), starter).complete(bundle)).text
    assert bundle.chars() > 100_000
    assert text == hashlib.sha256(bundle.text().encode()).hexdigest() + "\n"


async def test_the_configured_environment_reaches_the_model(
    starter: ModelStarter | None, prompt_bundle: MakeBundle
) -> None:
    script = (
        "import os, sys; sys.stdin.read(); "
        "print(os.environ['MODEL_TOKEN'], os.environ['TEAMS_RUNTIME_PURPOSE'])"
    )
    backend = _plain_backend(_python(script), starter, env={"MODEL_TOKEN": "loopback-only"})
    with anyio.fail_after(30):
        text = (await backend.complete(prompt_bundle("repair"))).text
    assert text == "loopback-only contract_repair\n"


async def test_a_model_that_stops_reading_early_is_answered_by_its_output(
    starter: ModelStarter | None,
    prompt_bundle: MakeBundle,
) -> None:
    bundle = prompt_bundle(events=200, config=PromptContextConfig(enabled=False))
    with anyio.fail_after(30):
        reply = await _plain_backend(_python("print('{}')"), starter).complete(
            bundle
        )  # never reads stdin
        text = reply.text
    assert text == "{}\n"


@pytest.mark.parametrize(
    ("mode", "reason"),
    [
        pytest.param(
            "exit_1",
            r"^the model command exited with status 1 \(15 bytes on stderr\)$",
            id="exit-1",
        ),
        pytest.param("empty", r"^the model printed nothing$", id="empty-output"),
        pytest.param("garbage", r"^the model printed bytes that are not UTF-8$", id="not-utf8"),
        pytest.param(
            "huge", r"^the model printed more than 1000000 bytes \(max_output_bytes\)$", id="huge"
        ),
    ],
)
async def test_failures_have_a_content_free_reason(
    starter: ModelStarter | None,
    tmp_path: Path,
    model_command: Callable[..., list[str]],
    prompt_bundle: MakeBundle,
    mode: str,
    reason: str,
) -> None:
    backend = _plain_backend(model_command(mode, tmp_path), starter, max_output_bytes=1_000_000)
    with anyio.fail_after(30), pytest.raises(ModelFailure, match=reason):
        await backend.complete(prompt_bundle())


async def test_a_command_that_cannot_start_is_a_model_failure(
    starter: ModelStarter | None, prompt_bundle: MakeBundle
) -> None:
    backend = _plain_backend(["/nonexistent/model-cli", "--json"], starter)
    with pytest.raises(
        ModelFailure, match=r"^cannot start model command '/nonexistent/model-cli': "
    ):
        await backend.complete(prompt_bundle())


@pytest.mark.parametrize(
    ("role", "next_role"),
    [
        pytest.param("planner", "developer", id="first"),
        pytest.param("developer", "qa", id="middle"),
        pytest.param("qa", "", id="last"),
        pytest.param("designer", "", id="not-on-the-route"),
    ],
)
async def test_the_dry_run_hands_along_its_route(
    prompt_bundle: MakeBundle, role: str, next_role: str
) -> None:
    backend = DryRunBackend(DryRunConfig(route=["planner", "developer", "qa"]))
    answer = json.loads((await backend.complete(prompt_bundle(role=role, request_id="req-3"))).text)
    assert (answer["request_id"], answer["role"], answer["status"]) == ("req-3", role, "completed")
    assert answer["next_role"] == next_role
    assert "Dry run" in answer["summary"]


async def test_the_dry_run_answers_each_kind(prompt_bundle: MakeBundle) -> None:
    backend = DryRunBackend(DryRunConfig(route=["research", "planner"]))
    gate = json.loads(
        (await backend.complete(prompt_bundle("research_decision", role="research"))).text
    )
    assert (gate["needed"], gate["reason_code"], gate["next_role"]) == (False, "dry_run", "planner")
    commit = json.loads(
        (await backend.complete(prompt_bundle("version_control", role="version_controller"))).text
    )
    assert (commit["commit_status"], commit["next_role"]) == ("no_repo", "")


def test_make_backend_follows_the_model_section() -> None:
    assert isinstance(make_backend(ModelConfig(), "."), DryRunBackend)
    command = ModelConfig(backend="command", command=["model-cli"])
    assert isinstance(make_backend(command, "."), CommandBackend)
