"""Waiting on other processes in tests: whether one runs, whether its group has a live
member, and polling for such a condition (another process's exit sets no event)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

import anyio

__all__ = ["eventually", "eventually_sync", "group_alive", "model_starters_of", "running"]


def running(pid: int) -> bool:
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


def group_alive(pgid: int) -> bool:
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


async def eventually(condition: Callable[[], bool], seconds: float = 10) -> None:
    with anyio.fail_after(seconds):
        while not condition():  # noqa: ASYNC110 (another process's exit sets no event: poll)
            await anyio.sleep(0.02)


def eventually_sync(condition: Callable[[], bool], seconds: float = 10) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.02)


def model_starters_of(worker: int) -> list[int]:
    """The live model starter processes that ``worker`` started (their command line names
    the worker's pid)."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            argv = cmdline.read_bytes().split(b"\0")
        except OSError:  # gone while we looked
            continue
        program = [n for n, arg in enumerate(argv) if arg.endswith(b"spawn/_starter_process.py")]
        if program and argv[program[0] + 1 : program[0] + 2] == [str(worker).encode()]:
            pid = int(cmdline.parent.name)
            if running(pid):
                found.append(pid)
    return found
