"""``run --once`` waiting on roles nobody serves says which, after a few seconds, in one
content-free line (once per set of roles), instead of waiting silently; a worker that then
serves them lets both finish."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import anyio
import pytest

from teams_runtime.actors.team import _unserved_roles as unserved_roles
from teams_runtime.actors.team._team import Team
from teams_runtime.actors.team._unserved_roles import UnservedRoles
from teams_runtime.storage import Workspace

from ...support.processes import stderr_until
from ...support.waiting import eventually

pytestmark = pytest.mark.anyio

Seed = Callable[..., None]


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_it_speaks_after_the_wait_once_per_set_of_roles() -> None:
    clock = _Clock()
    watch = UnservedRoles(["planner"], after=5, clock=clock)
    waiting = {"planner": 3, "qa": 2}
    assert watch.look(waiting) is None  # just seen
    clock.now += 4.9
    assert watch.look(waiting) is None
    clock.now += 0.2
    line = watch.look(waiting)
    assert line == (
        "run --once is waiting for 2 envelopes of roles this worker does not serve (qa 2) that "
        "no worker has taken for 5 s; start a worker for them (teams-runtime run --roles qa), "
        "or stop this one (Ctrl-C: what it holds goes back to the queue)"
    )
    clock.now += 60
    assert watch.look(waiting) is None  # said once
    waiting["developer"] = 1  # another role now: its own wait, then its own line
    assert watch.look(waiting) is None
    clock.now += 5.1
    line = watch.look(waiting)
    assert line is not None and "(developer 1, qa 2)" in line and "--roles developer,qa" in line
    assert watch.look({"planner": 1}) is None  # only served roles wait: nothing to say


async def test_a_worker_for_the_roles_it_names_lets_both_finish(
    team_workspace: Callable[..., Workspace], seed: Seed, log_messages: list[Any],
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    monkeypatch.setattr(unserved_roles, "UNSERVED_NOTICE_SECONDS", 0.3)
    workspace = team_workspace()
    seed(workspace, "req-1", "qa", events=3)
    planner = Team(workspace.root, roles=["planner"])
    with anyio.fail_after(60):
        async with anyio.create_task_group() as group:
            group.start_soon(lambda: planner.run(once=True))
            notices = await eventually(  # a log line of the other task's: nothing to wait on
                lambda: [str(m).strip() for m in log_messages if "does not serve" in str(m)],
                "the notice that qa is not served",
            )
            (notice,) = notices
            assert "(qa 1)" in notice and "--roles qa" in notice
            assert "req-1" not in notice  # counts and roles only
            qa = await Team(workspace.root, roles=["qa"]).run(once=True)
    assert qa.done == 1 and planner.summary.done == 0


# `python -m teams_runtime` with the notice's wait cut to half a second (the 5 s rule itself is
# checked above, on a clock): the command's wiring is what is under test here.
QUICK_NOTICE = (
    "from teams_runtime.actors.team import _unserved_roles\n"
    "_unserved_roles.UNSERVED_NOTICE_SECONDS = 0.5\n"
    "import runpy\n"
    "runpy.run_module('teams_runtime', run_name='__main__')\n"
)


def test_the_command_says_it_on_stderr_and_keeps_waiting(
    team_workspace: Callable[..., Workspace], seed: Seed
) -> None:
    workspace = team_workspace()
    seed(workspace, "req-1", "qa", events=3)
    worker = subprocess.Popen(
        [sys.executable, "-P", "-c", QUICK_NOTICE, "run", "--once", "--plain",
         "--roles", "planner", "--workspace", str(workspace.root)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    started = time.monotonic()
    try:
        said = stderr_until(worker, "does not serve", 60)
    finally:
        worker.send_signal(signal.SIGTERM)
        out, _ = worker.communicate(timeout=30)
    (seen,) = [line for line in said.splitlines() if "does not serve" in line]
    assert "WARNING" in seen and "(qa 1)" in seen and "teams-runtime run --roles qa" in seen
    assert time.monotonic() - started >= 0.5
    assert worker.returncode == 0 and "Stopped; 1 envelope queued for the next run." in out
