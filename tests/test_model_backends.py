"""Model backends with real subprocesses: the command backend's answers, failures and kills, and
the dry run's route."""

from __future__ import annotations

import hashlib
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from teams_runtime.actors.model_backends import CommandBackend, DryRunBackend, make_backend
from teams_runtime.codecs.config import DryRunConfig, ModelConfig, PromptContextConfig
from teams_runtime.exceptions import ModelFailure
from teams_runtime.prompts import PromptBundle

pytestmark = pytest.mark.anyio

MakeBundle = Callable[..., PromptBundle]

# Tells its pid through the FIFO it is given, reads the prompt, then hangs: a model that never
# answers.
HANG = """
import os, sys, time
with open(sys.argv[1], "w") as fifo:
    fifo.write(str(os.getpid()))
sys.stdin.read()
time.sleep(60)
"""


def _backend(command: list[str], **settings: Any) -> CommandBackend:
    return CommandBackend(ModelConfig(backend="command", command=command, **settings))


def _python(script: str, *args: str) -> list[str]:
    return [sys.executable, "-c", script, *args]


async def _pid_from(fifo: Path) -> int:
    """Wait for the hanging model to start and say its pid."""
    return int(await anyio.to_thread.run_sync(fifo.read_text, abandon_on_cancel=True))


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


async def test_the_answer_is_what_the_model_prints(
    tmp_path: Path, model_command: Callable[..., list[str]], prompt_bundle: MakeBundle
) -> None:
    bundle = prompt_bundle("task", role="planner", request_id="req-5")
    with anyio.fail_after(30):
        text = await _backend(model_command("valid", tmp_path)).complete(bundle)
    answer = json.loads(text)  # the fake model answers for the role and request it was told
    assert (answer["request_id"], answer["role"], answer["next_role"]) == (
        "req-5",
        "planner",
        "developer",
    )
    (call,) = [json.loads(line) for line in (tmp_path / "calls.log").read_text().splitlines()]
    assert (call["role"], call["request_id"], call["purpose"]) == ("planner", "req-5", "role_task")


async def test_the_whole_prompt_is_streamed_to_stdin(prompt_bundle: MakeBundle) -> None:
    digest = "import sys, hashlib; print(hashlib.sha256(sys.stdin.buffer.read()).hexdigest())"
    bundle = prompt_bundle(events=200, config=PromptContextConfig(enabled=False))  # ~200 KB
    with anyio.fail_after(30):
        text = await _backend(_python(digest)).complete(bundle)
    assert bundle.chars() > 100_000
    assert text == hashlib.sha256(bundle.text().encode()).hexdigest() + "\n"


async def test_the_configured_environment_reaches_the_model(prompt_bundle: MakeBundle) -> None:
    script = (
        "import os, sys; sys.stdin.read(); "
        "print(os.environ['MODEL_TOKEN'], os.environ['TEAMS_RUNTIME_PURPOSE'])"
    )
    backend = _backend(_python(script), env={"MODEL_TOKEN": "loopback-only"})
    with anyio.fail_after(30):
        text = await backend.complete(prompt_bundle("repair"))
    assert text == "loopback-only contract_repair\n"


async def test_a_model_that_stops_reading_early_is_answered_by_its_output(
    prompt_bundle: MakeBundle,
) -> None:
    bundle = prompt_bundle(events=200, config=PromptContextConfig(enabled=False))
    with anyio.fail_after(30):
        text = await _backend(_python("print('{}')")).complete(bundle)  # never reads stdin
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
    tmp_path: Path,
    model_command: Callable[..., list[str]],
    prompt_bundle: MakeBundle,
    mode: str,
    reason: str,
) -> None:
    backend = _backend(model_command(mode, tmp_path), max_output_bytes=1_000_000)
    with anyio.fail_after(30), pytest.raises(ModelFailure, match=reason):
        await backend.complete(prompt_bundle())


async def test_a_command_that_cannot_start_is_a_model_failure(prompt_bundle: MakeBundle) -> None:
    backend = _backend(["/nonexistent/model-cli", "--json"])
    with pytest.raises(
        ModelFailure, match=r"^cannot start model command '/nonexistent/model-cli': "
    ):
        await backend.complete(prompt_bundle())


async def test_a_model_past_its_timeout_is_killed(
    tmp_path: Path, prompt_bundle: MakeBundle
) -> None:
    fifo = tmp_path / "pid"
    os.mkfifo(fifo)
    backend = _backend(_python(HANG, str(fifo)), timeout_seconds=0.5)
    pids: list[int] = []

    async def note_pid() -> None:
        pids.append(await _pid_from(fifo))

    # Far less than the model's 60 s, and less than the 5 s a stop waits for a process to exit.
    with anyio.fail_after(4):
        async with anyio.create_task_group() as group:
            group.start_soon(note_pid)
            with pytest.raises(
                ModelFailure, match=r"^no answer within 0\.5 s \(timeout_seconds\); killed$"
            ):
                await backend.complete(prompt_bundle())
    (pid,) = pids
    assert _gone(pid)


async def test_a_cancelled_call_leaves_no_model_process(
    tmp_path: Path, prompt_bundle: MakeBundle
) -> None:
    fifo = tmp_path / "pid"
    os.mkfifo(fifo)
    backend = _backend(_python(HANG, str(fifo)), timeout_seconds=60)
    with anyio.fail_after(4):
        async with anyio.create_task_group() as group:
            group.start_soon(backend.complete, prompt_bundle())
            pid = await _pid_from(fifo)  # the model is running
            group.cancel_scope.cancel()
    assert _gone(pid)


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
    answer = json.loads(await backend.complete(prompt_bundle(role=role, request_id="req-3")))
    assert (answer["request_id"], answer["role"], answer["status"]) == ("req-3", role, "completed")
    assert answer["next_role"] == next_role
    assert "Dry run" in answer["summary"]


async def test_the_dry_run_answers_each_kind(prompt_bundle: MakeBundle) -> None:
    backend = DryRunBackend(DryRunConfig(route=["research", "planner"]))
    gate = json.loads(await backend.complete(prompt_bundle("research_decision", role="research")))
    assert (gate["needed"], gate["reason_code"], gate["next_role"]) == (False, "dry_run", "planner")
    commit = json.loads(
        await backend.complete(prompt_bundle("version_control", role="version_controller"))
    )
    assert (commit["commit_status"], commit["next_role"]) == ("no_repo", "")


def test_make_backend_follows_the_model_section() -> None:
    assert isinstance(make_backend(ModelConfig()), DryRunBackend)
    command = ModelConfig(backend="command", command=["model-cli"])
    assert isinstance(make_backend(command), CommandBackend)
