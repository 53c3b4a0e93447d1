"""A model command's process: started in a process group of its own that dies with its
worker, and ended whole.

- ``start_model`` starts the command in a new session (so it leads its own group); on Linux its
  process also gets a parent-death signal (SIGKILL, set between fork and exec), so the kernel
  kills it when its worker dies, even by ``kill -9``, when nothing of the worker runs to end
  the group.
- ``end_group`` ends every process of the group: SIGTERM, then SIGKILL ``GRACE_SECONDS`` later
  to whatever is left, then reaps the model; it runs to its end even while being cancelled.
"""

from __future__ import annotations

import functools
import os
import signal
import subprocess
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import anyio
from anyio._core._eventloop import get_async_backend
from anyio.abc import Process

from teams_runtime.actors.models.spawn._starter import ModelStarter
from teams_runtime.actors.models.spawn._starter_process import die_with, find_prctl

__all__ = ["GRACE_SECONDS", "end_group", "start_model"]

# Between SIGTERM to the model's process group and SIGKILL to whatever is left of it.
GRACE_SECONDS = 2.0
_POLL_FIRST, _POLL_MAX = 0.005, 0.1  # seconds between checks that the group has ended


def _signal_group(group: int, signum: int) -> bool:
    """Send ``signum`` to the process group; whether any process of it was there to get it."""
    try:
        os.killpg(group, signum)
    except OSError:  # ProcessLookupError: the group is gone; PermissionError: none is ours
        return False
    return True


async def _group_ended(group: int) -> None:
    """Wait until no process of the group is left (there is no event to wait on: poll)."""
    delay = _POLL_FIRST
    while _signal_group(group, 0):
        await anyio.sleep(delay)
        delay = min(delay * 2, _POLL_MAX)


async def end_group(process: Process) -> None:
    """End every process of the model's group: SIGTERM, then SIGKILL to what is left after
    ``GRACE_SECONDS``; then reap the model. Shielded: it runs to the end even while the call
    is being cancelled, and never raises for a process that is already gone."""
    group = process.pid  # started with a new session: the model leads its own group
    with anyio.CancelScope(shield=True):
        if _signal_group(group, signal.SIGTERM):
            with anyio.move_on_after(GRACE_SECONDS):
                await _group_ended(group)
            # Cannot be caught or ignored: no need to wait for it. (A process that exited but
            # was not reaped yet also counts as in the group: SIGKILL is then a no-op.)
            _signal_group(group, signal.SIGKILL)
        with anyio.move_on_after(GRACE_SECONDS):
            await process.aclose()


def _dies_with(parent: int) -> Callable[[], None] | None:
    """What the model's process runs between fork and exec so that the kernel kills it when
    its worker dies; ``None`` where there is no such signal (not Linux).

    The signal comes when the *thread* that forked the child ends, not the process: asyncio
    forks on its event loop's thread (``loop.subprocess_exec`` runs ``Popen`` there), which
    lives as long as the run, never on a worker thread that may be retired while the model
    works. If the worker died before the signal was set, the child's parent is already
    another: it exits instead of running the model for nobody."""
    if find_prctl() is None:
        return None
    return functools.partial(die_with, parent)


async def start_model(
    command: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    starter: ModelStarter | None = None,
) -> Process:
    """Start the model command with pipes, in a session (process group) of its own, with a
    parent-death signal where the platform has one: through the worker's ``starter`` if it
    takes it (no fork of the worker), else here. ``anyio.open_process`` takes no
    ``preexec_fn``; its event loop backend's ``open_process`` hands it to ``Popen``."""
    if starter is not None and find_prctl() is not None:
        started = await starter.start(command, cwd=cwd, env=env)
        if started is not None:
            return started
    preexec = _dies_with(os.getpid())
    if preexec is not None:
        try:
            process: Process = await get_async_backend().open_process(
                command,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=cwd,
                env=env,
                start_new_session=True,
                preexec_fn=preexec,
            )
            return process
        except TypeError:  # an event loop backend that takes no Popen options
            pass
    return await anyio.open_process(
        command,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=cwd,
        env=env,
        start_new_session=True,
    )
