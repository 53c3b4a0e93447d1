"""A worker's model starter: the small process (``model_starter_process``) that starts this
worker's model commands, so that the worker itself never forks (see that module for why), and
the model processes it starts, as anyio ``Process`` objects.

One ``ModelStarter`` belongs to one Team, which closes it when its run ends. Its process is
started on first use, on the event loop's thread (the parent-death signal follows the thread
that forked), and again if it ever dies. Where it cannot take a start (not Linux, a start
message too large, its process would not start), ``start`` returns ``None`` and the caller
starts the model itself.
"""

from __future__ import annotations

import contextlib
import errno
import marshal
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import anyio
from anyio.abc import Process

from teams_runtime.actors.models.spawn._pipes import PipeReader, PipeWriter, StatusLines
from teams_runtime.actors.models.spawn._starter_process import MAX_MESSAGE

__all__ = ["ModelStarter", "StartedModel"]

_PROGRAM = Path(__file__).with_name("_starter_process.py")
# How long a start may take (a fork and an exec: about a millisecond). A starter that takes
# longer is stuck (stopped, or in an exec that hangs): it is killed, with its models, and the
# call's model is started by the worker itself. Bounds how long a stop can wait for a start.
START_SECONDS = 5.0


class StartedModel(Process):
    """A model process the starter started: its pipes, and its returncode from the status
    pipe (the starter is its parent, so only the starter can reap it)."""

    def __init__(self, pid: int, pipes: tuple[int, int, int], status: StatusLines) -> None:
        self._pid = pid
        self._stdin = PipeWriter(pipes[0])
        self._stdout = PipeReader(pipes[1])
        self._stderr = PipeReader(pipes[2])
        self._status = status
        self._returncode: int | None = None
        self._waiting = anyio.Lock()

    async def wait(self) -> int:
        async with self._waiting:  # one reader of the status pipe at a time
            if self._returncode is None:
                line = await self._status.next()
                # No line: the starter died, and the parent-death signal killed the model.
                code = -signal.SIGKILL if line is None else int(line.split()[1])
                self._returncode = code
                await self._status.aclose()
            return self._returncode

    async def aclose(self) -> None:
        """As anyio's own: close the pipes (a model blocked on a full pipe gets SIGPIPE),
        then wait for the model to exit; killed if that wait is cancelled."""
        with anyio.CancelScope(shield=True) as scope:
            for pipe in (self._stdin, self._stdout, self._stderr):
                await pipe.aclose()
            scope.shield = False
            try:
                await self.wait()
            except BaseException:
                scope.shield = True
                self.kill()
                await self.wait()
                raise

    def send_signal(self, value: int) -> None:
        if self._returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self._pid, value)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    @property
    def pid(self) -> int:
        return self._pid

    @property
    def returncode(self) -> int | None:
        return self._returncode

    @property
    def stdin(self) -> PipeWriter:
        return self._stdin

    @property
    def stdout(self) -> PipeReader:
        return self._stdout

    @property
    def stderr(self) -> PipeReader:
        return self._stderr


class ModelStarter:
    """Starts a worker's model commands through its starter process."""

    def __init__(self) -> None:
        self._process: Process | None = None
        self._socket: socket.socket | None = None
        self._lock = anyio.Lock()

    async def start(
        self, command: Sequence[str], *, cwd: Path, env: Mapping[str, str]
    ) -> Process | None:
        """Start ``command`` (pipes, a session of its own, killed when the starter dies);
        ``None`` if the starter cannot take it. Raises ``OSError`` if the command or ``cwd``
        cannot be used, as ``Popen`` would."""
        message = marshal.dumps((list(command), str(cwd), dict(env)))
        if len(message) > MAX_MESSAGE:
            return None
        requests = await self._requests()
        if requests is None:
            return None
        ends = [os.pipe() for _ in range(4)]  # stdin, stdout, stderr, status
        ours = (ends[0][1], ends[1][0], ends[2][0])
        theirs = [ends[0][0], ends[1][1], ends[2][1], ends[3][1]]
        status = StatusLines(ends[3][0])
        line: bytes | None = b""
        try:
            line = await _started(requests, message, theirs, status)
        finally:
            if not line:  # not started (b"": too large for the socket), or it raised
                for fd in ours:
                    os.close(fd)
                await status.aclose()
        if line is None:  # the starter is gone, or stuck
            async with self._lock:
                if self._socket is requests:
                    await self._forget(kill=True)
        if not line:
            return None
        return StartedModel(int(line.split()[1]), ours, status)

    async def _requests(self) -> socket.socket | None:
        """The socket to the starter process, started now if it is not running."""
        async with self._lock:
            if self._process is not None and self._process.returncode is None:
                return self._socket
            await self._forget()
            ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            try:
                self._process = await anyio.open_process(
                    [
                        sys.executable,
                        "-I",
                        "-S",
                        str(_PROGRAM),
                        str(os.getpid()),
                        str(theirs.fileno()),
                    ],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=None,
                    pass_fds=(theirs.fileno(),),
                    start_new_session=True,  # a signal to the worker's group is the worker's
                )
            except OSError:
                ours.close()
                return None
            finally:
                theirs.close()
            ours.setblocking(False)
            self._socket = ours
            return ours

    async def _forget(self, *, kill: bool = False) -> None:
        """Close the socket (the starter exits at its end of file) and reap the process;
        ``kill``: it may be stuck, so SIGKILL it first (its models die with it)."""
        if self._socket is not None:
            self._socket.close()
            self._socket = None
        if self._process is not None:
            process, self._process = self._process, None
            if kill and process.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    process.kill()
            with anyio.CancelScope(shield=True):
                await process.aclose()

    @property
    def pid(self) -> int | None:
        """The starter process's pid, while it runs (``None`` before the first start)."""
        return self._process.pid if self._process is not None else None

    async def aclose(self) -> None:
        """Stop the starter process (at the end of a run: no model of it is running)."""
        async with self._lock:
            await self._forget()


async def _started(
    requests: socket.socket, message: bytes, theirs: list[int], status: StatusLines
) -> bytes | None:
    """Send a start with the model's ends of its pipes (closed here once sent, so that the
    status pipe ends when the starter does); the ``started`` line, ``b""`` if the message is
    too large for the socket, ``None`` if the starter is gone or stuck. Raises ``OSError`` for
    a ``failed`` line."""
    try:
        while True:
            try:
                socket.send_fds(requests, [message], theirs)
                break
            except BlockingIOError:
                await anyio.wait_writable(requests)
    except OSError as exc:  # EMSGSIZE: over the socket's buffer; EPIPE and others: gone
        return b"" if exc.errno == errno.EMSGSIZE else None
    finally:
        for fd in theirs:
            os.close(fd)
    # A model that started must not go unnoticed: the wait is not cancelled (the caller ends
    # the model's group). A starter that does not answer in START_SECONDS is stuck.
    line = None
    with anyio.CancelScope(shield=True), anyio.move_on_after(START_SECONDS):
        line = await status.next()
    if line is not None and line.startswith(b"failed"):
        code = int(line.split()[1])
        raise OSError(code, os.strerror(code))
    return line
