"""Other processes in tests: whether one runs, whether its group has a live member, the
model starters of a worker (wait for such a state with ``waiting.eventually``), and reading a
process's stderr until a line comes (a wait on the pipe, not a poll)."""

from __future__ import annotations

import codecs
import os
import selectors
import subprocess
import time
from pathlib import Path

__all__ = ["group_alive", "model_starters_of", "running", "stderr_until", "stopped"]


def running(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie, exited and not reaped yet, is not)."""
    state = _state(pid)
    if state is None:
        if Path("/proc/self/stat").exists():
            return False
        try:  # no /proc: ask the kernel (a zombie counts as running here)
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True
    return state != "Z"


def stopped(pid: int) -> bool:
    """Whether ``pid`` is stopped by a signal (SIGSTOP): a signal is delivered a moment after
    it is sent, and a process answers requests until then."""
    return _state(pid) == "T"


def _state(pid: int) -> str | None:
    """The state letter ``/proc`` gives ``pid`` (``R``, ``S``, ``T``, ``Z``...); ``None``
    when it has no entry."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return None


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


def stderr_until(process: subprocess.Popen[str], text: str, seconds: float) -> str:
    """Read ``process``'s stderr until a whole line of it holds ``text``; what was read
    (``communicate`` gives the rest). Reads the pipe itself, unbuffered, so nothing read sits
    in a buffer meanwhile."""
    assert process.stderr is not None
    decoder, read = codecs.getincrementaldecoder("utf-8")(), ""
    deadline = time.monotonic() + seconds
    with selectors.DefaultSelector() as selector:
        selector.register(process.stderr, selectors.EVENT_READ)
        while text not in read or "\n" not in read[read.index(text) :]:
            left = deadline - time.monotonic()
            assert left > 0, f"timed out waiting for {text!r} on stderr; it said: {read}"
            if selector.select(left):
                chunk = os.read(process.stderr.fileno(), 65536)
                assert chunk, f"stderr closed before {text!r}; it said: {read}"
                read += decoder.decode(chunk)
    return read
