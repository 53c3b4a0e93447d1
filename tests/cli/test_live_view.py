"""The live view of `run` and `demo`: drawn on a real pseudo-terminal, plain lines otherwise.

Each test runs the real command in a subprocess whose stderr is a pty (python's `pty`) or a
pipe, with a real (fake) model process that takes 1.5 s, so a role is seen at work.
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import signal
import struct
import subprocess
import sys
import termios
from collections.abc import Callable
from pathlib import Path

import pytest

from teams_runtime.storage import Workspace

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def _on_a_terminal(
    argv: list[str], cwd: Path, *, interrupt_when: str | None = None
) -> tuple[int, str, str]:
    """Run the command with stderr on a 120x40 pseudo-terminal and stdout on a pipe; its exit
    status, stdout, and everything drawn on the terminal (escape sequences removed). With
    ``interrupt_when``, send SIGINT (Ctrl-C) once that text has been drawn."""
    controller, terminal = pty.openpty()
    fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    env = {**os.environ, "TERM": "xterm-256color"}
    env.pop("COLUMNS", None)
    env.pop("NO_COLOR", None)
    with subprocess.Popen(
        [sys.executable, "-m", "teams_runtime", *argv],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=terminal,
        cwd=cwd,
        env=env,
    ) as process:
        os.close(terminal)
        drawn = bytearray()
        while True:
            try:
                data = os.read(controller, 65536)
            except OSError:  # EIO: the process closed the terminal (it exited)
                break
            if not data:
                break
            drawn += data
            if interrupt_when is not None and interrupt_when in _screen(drawn):
                process.send_signal(signal.SIGINT)
                interrupt_when = None
        assert process.stdout is not None
        out = process.stdout.read().decode()
        status = process.wait(timeout=60)
    os.close(controller)
    return status, out, _screen(drawn)


def _screen(drawn: bytes) -> str:
    return _ANSI.sub("", drawn.decode(errors="replace")).replace("\r", "")


def _row(screen: str, role: str) -> list[list[str]]:
    """Every drawn row of the table for ``role``, split into its cells."""
    rows = []
    for line in screen.splitlines():
        cells = [cell.strip() for cell in line.split("│")]
        if len(cells) == 7 and cells[1] == role:
            rows.append(cells[1:6])
    return rows


@pytest.fixture
def slow_qa(team_workspace: Callable[..., Workspace], seed: Callable[..., None]) -> Workspace:
    """A workspace whose model takes 1.5 s per call (several redraws of the view), with one
    request queued for qa."""
    workspace = team_workspace("slow:1.5")
    seed(workspace, "req-live", "qa", events=5)
    return workspace


def test_run_on_a_terminal_shows_each_role_its_request_and_counts(
    slow_qa: Workspace, tmp_path: Path
) -> None:
    status, out, screen = _on_a_terminal(
        ["run", "--workspace", str(slow_qa.root), "--once"], tmp_path
    )
    assert status == 0, screen
    assert "Finished 1 envelope: 1 done, 0 failed, 0 rejected; 1 model call, 1 answered." in out
    assert "working on (for)" in screen and "handled" in screen and "queued" in screen
    qa_rows = _row(screen, "qa")
    # While the model ran, qa's row named the request and how long it had been at it ...
    working = [row for row in qa_rows if row[1].startswith("req-live (")]
    assert working, screen
    assert re.fullmatch(r"req-live \(\d+s\)", working[0][1])
    assert working[0][2:] == ["0", "0", "0"]  # handled, failed, queued
    # ... and the last frame shows it handled, the role idle again.
    assert qa_rows[-1] == ["qa", "idle", "1", "0", "0"]
    assert _row(screen, "planner")[-1] == ["planner", "idle", "0", "0", "0"]
    # Log lines still appear, above the view.
    assert "qa: request req-live: completed -> request completed" in screen


@pytest.mark.parametrize(
    "plain",
    [pytest.param(True, id="plain-flag-on-a-terminal"), pytest.param(False, id="stderr-a-pipe")],
)
def test_without_a_terminal_or_with_plain_it_prints_log_lines(
    slow_qa: Workspace, tmp_path: Path, plain: bool
) -> None:
    argv = ["run", "--workspace", str(slow_qa.root), "--once"]
    if plain:
        status, out, err = _on_a_terminal([*argv, "--plain"], tmp_path)
    else:
        done = subprocess.run(
            [sys.executable, "-m", "teams_runtime", *argv],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            check=False,
        )
        status, out, err = done.returncode, done.stdout, done.stderr
    assert status == 0, err
    assert "Finished 1 envelope: 1 done" in out
    assert "working on" not in err and "│" not in err and "┃" not in err
    lines = err.strip().splitlines()
    assert all(re.match(r"\d\d:\d\d:\d\d (INFO|WARNING) ", line) for line in lines), err
    assert any("qa: request req-live: completed -> request completed" in line for line in lines)


def test_run_json_prints_the_summary_and_still_draws_the_view(
    slow_qa: Workspace, tmp_path: Path
) -> None:
    status, out, screen = _on_a_terminal(
        ["run", "--workspace", str(slow_qa.root), "--once", "--json"], tmp_path
    )
    assert status == 0, screen
    summary = json.loads(out)
    assert list(summary) == [
        "finished", "done", "failed", "rejected", "deferred", "waiting", "answers_timed_out",
        "answers_renewed", "model_calls", "answered", "stopped", "queued", "left_deferred",
        "next_attempt_at", "deferred_envelopes",
    ]  # fmt: skip
    assert summary == {"finished": 1, "done": 1, "failed": 0, "rejected": 0, "deferred": 0,
                       "waiting": 0, "answers_timed_out": 0, "answers_renewed": 0,
                       "model_calls": 1, "answered": 1, "stopped": False, "queued": None,
                       "left_deferred": 0, "next_attempt_at": None,
                       "deferred_envelopes": []}  # fmt: skip
    assert _row(screen, "qa")[-1] == ["qa", "idle", "1", "0", "0"]


def test_demo_on_a_terminal_uses_the_same_view(tmp_path: Path) -> None:
    status, out, screen = _on_a_terminal(["demo"], tmp_path)
    assert status == 0, screen
    assert "teams-runtime demo (dry run, no model)" in screen
    rows = {role: _row(screen, role)[-1] for role in ("planner", "research", "qa")}
    assert all(row[1] == "idle" for row in rows.values())
    assert int(rows["qa"][2]) >= 1  # every request reaches qa on the demo's route
    assert "prompts (" in out and "Omitted events stay" in out  # the report is unchanged


def test_ctrl_c_leaves_the_final_state_on_screen(
    team_workspace: Callable[..., Workspace], seed: Callable[..., None], tmp_path: Path
) -> None:
    workspace = team_workspace("sleep")  # a model call that would take 30 s
    seed(workspace, "req-stuck", "developer", events=5)
    status, out, screen = _on_a_terminal(
        ["run", "--workspace", str(workspace.root)], tmp_path, interrupt_when="req-stuck ("
    )
    assert status == 0, screen
    assert out == "Stopped; 1 envelope queued for the next run.\n"
    assert "SIGINT received: stopping the team" in screen
    # The envelope went back to the queue: the last frame shows it queued, nobody at work.
    assert _row(screen, "developer")[-1] == ["developer", "idle", "0", "0", "1"]
    assert screen.rstrip().endswith("0 requests in progress, 0 handled, 0 failed, 1 queued")


def test_a_persons_role_shows_the_answers_waiting_for_it(
    team_workspace: Callable[..., Workspace], seed: Callable[..., None], tmp_path: Path
) -> None:
    person = {"roles": {"qa": {"model": {"backend": "human"}}}}
    workspace = team_workspace("valid", sections=person)
    seed(workspace, "req-live", "qa", events=5)
    status, _, screen = _on_a_terminal(
        ["run", "--workspace", str(workspace.root)],
        tmp_path,
        interrupt_when="a person: 1 answer waiting",  # once it is in the inbox
    )
    assert status == 0, screen
    assert ["qa", "a person: 1 answer waiting", "0", "0", "0"] in _row(screen, "qa")
    assert ["developer", "idle", "0", "0", "0"] in _row(screen, "developer")
    assert "0 queued, 1 answer waiting" in screen
