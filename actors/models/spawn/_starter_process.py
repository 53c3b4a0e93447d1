"""The model starter: a small process a worker starts once, which starts its model commands.

Why it exists: a model must die with its worker, even under ``kill -9``, so its process gets a
parent-death signal, set between fork and exec. Code between fork and exec makes CPython fork
the whole worker (40 MB and more) instead of using vfork: about 6 ms and 1,600 page faults a
model start. This process is a bare interpreter (``python -I -S``, the standard library only,
never the package): forking it costs a fraction of that. The guarantee is a chain: this process
gets SIGKILL when its worker dies, each model gets SIGKILL when this process dies. It ignores
SIGINT and SIGTERM (the worker stops it, by closing the socket, once its models have ended).

What it reads, on the socket it is given (``SOCK_SEQPACKET``: one message, one start): a
``marshal`` of ``(argv, cwd, env)`` with four file descriptors: the model's stdin, stdout and
stderr, and a status pipe. What it writes on the status pipe (one ASCII line each):
``started <pid>``, or ``failed <errno>`` when it could not start it; and for a
started model ``exited <returncode>`` (negative: the signal that ended it), then it closes
the pipe. An end of file on the socket (the worker closed it, or died) ends this process.

Run as ``python -I -S model_starter_process.py <worker pid> <socket fd>``.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import functools
import marshal
import os
import select
import signal
import socket
import sys
from collections.abc import Callable

_PR_SET_PDEATHSIG = 1  # linux/prctl.h
# The largest start message (argv and env, marshalled): a bigger one is started by the worker
# itself. A ``SOCK_SEQPACKET`` message must fit the socket's send buffer anyway (~200 KiB).
MAX_MESSAGE = 192 * 1024
FDS_PER_START = 4  # stdin, stdout, stderr, status
_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)  # ignored here; a model gets them as usual


@functools.cache
def find_prctl() -> Callable[..., int] | None:
    """libc's ``prctl``, looked up once (before any fork: a child only calls it); ``None``
    where there is none (not Linux)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    prctl.restype = ctypes.c_int
    found: Callable[..., int] = prctl
    return found


def die_with(parent: int) -> None:
    """Get SIGKILL when ``parent`` dies; exit at once if it already has (the signal would
    never come), or if there is no such signal here (nothing could keep the promise). Run
    by this process, by each model it forks, and by a model the worker starts itself."""
    prctl = find_prctl()
    if prctl is None:
        os._exit(1)
    prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:
        os._exit(1)


Request = tuple[list[str], str, dict[str, str]]  # argv, cwd, env


def _exec_model(request: Request, fds: list[int], err: int, starter: int) -> None:
    """In the forked child: become the model (or write why not to ``err`` and exit)."""
    argv, cwd, env = request
    try:
        os.setsid()  # a session, so a process group, of its own: it is ended whole
        die_with(starter)
        # Ignored signals stay ignored across exec: Python ignores SIGPIPE and SIGXFSZ (what
        # Popen's restore_signals undoes), this process SIGINT and SIGTERM (see main).
        for signum in (signal.SIGPIPE, signal.SIGXFSZ, *_STOP_SIGNALS):
            signal.signal(signum, signal.SIG_DFL)
        os.chdir(cwd)
        for target, fd in enumerate(fds[:3]):
            os.dup2(fd, target)  # 0, 1, 2 stay open across exec; everything else is CLOEXEC
        os.execvpe(argv[0], argv, env)
    except OSError as exc:
        os.write(err, b"%d" % (exc.errno or errno.EINVAL))
    except Exception:  # a value exec cannot take (a message of ours never has one)
        os.write(err, b"%d" % errno.EINVAL)
    finally:
        os._exit(127)


def _request(message: bytes) -> Request | None:
    """``(argv, cwd, env)`` from a message, or ``None`` if it is not one."""
    try:
        request = marshal.loads(message)
    except (EOFError, ValueError, TypeError):
        return None
    match request:
        case (list() as argv, str() as cwd, dict() as env) if argv and all(
            isinstance(arg, str) for arg in argv
        ):
            return argv, cwd, env
    return None


def _fork_exec(request: Request, fds: list[int]) -> tuple[int, bytes]:
    """Fork and exec the model: its pid and, if it could not start, why (else ``b""``)."""
    starter = os.getpid()
    err_read, err_write = os.pipe()  # both CLOEXEC: a successful exec closes the write end
    try:
        try:
            pid = os.fork()
        except OSError as exc:
            return 0, b"%d" % (exc.errno or errno.EAGAIN)
        if pid == 0:
            _exec_model(request, fds, err_write, starter)
        os.close(err_write)
        err_write = -1
        failure = b""
        while chunk := os.read(err_read, 64):
            failure += chunk
    finally:
        os.close(err_read)
        if err_write >= 0:
            os.close(err_write)
    if failure:
        os.waitpid(pid, 0)
    return pid, failure


def _start(message: bytes, fds: list[int], running: dict[int, int]) -> None:
    """Start one model; its status pipe gets ``started`` or ``failed``."""
    status = fds[3]
    request = _request(message)
    try:
        if request is None:
            pid, failure = 0, b"%d" % errno.EINVAL
        else:
            pid, failure = _fork_exec(request, fds)
    finally:
        for fd in fds[:3]:
            os.close(fd)  # the model has its copies
    if failure:
        _report(status, b"failed " + failure, last=True)
    else:
        running[pid] = status
        _report(status, b"started %d" % pid, last=False)


def _report(status: int, line: bytes, *, last: bool) -> None:
    """One line on a status pipe (short, so written whole); a worker that stopped reading it
    needs nothing more."""
    with contextlib.suppress(OSError):
        os.write(status, line + b"\n")
    if last:
        os.close(status)


def _reap(running: dict[int, int]) -> None:
    """Every model that has exited: its returncode on its status pipe."""
    while True:
        try:
            pid, wait_status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        status = running.pop(pid, None)
        if status is not None:
            code = os.waitstatus_to_exitcode(wait_status)
            _report(status, b"exited %d" % code, last=True)


def _serve(requests: socket.socket) -> None:
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # a handler, so the wakeup fd hears it
    running: dict[int, int] = {}
    while True:
        ready, _, _ = select.select([requests.fileno(), wake_read], [], [])
        if wake_read in ready:
            os.read(wake_read, 512)
            _reap(running)
        if requests.fileno() in ready:
            message, fds, flags, _ = socket.recv_fds(requests, MAX_MESSAGE, FDS_PER_START)
            for fd in fds:
                os.set_inheritable(fd, False)  # no model may inherit another's pipes
            if not message:
                return  # the worker is gone, or closed its end: so is this process's job
            if len(fds) == FDS_PER_START and not flags & socket.MSG_TRUNC:
                _start(message, fds, running)
            else:  # not a message of ours, or cut short: nothing to answer on
                for fd in fds:
                    os.close(fd)


def main(argv: list[str]) -> None:
    worker, fd = int(argv[1]), int(argv[2])
    # A signal to stop is the worker's to handle: it ends its models' groups (SIGTERM, then the
    # grace), then closes the socket. Dying at a Ctrl-C, or at a stop sent to every process of
    # the service, would kill the models at once (their parent-death signal) and cut that
    # grace short. (It runs in a session of its own: a terminal's signals do not reach it.)
    for signum in _STOP_SIGNALS:
        signal.signal(signum, signal.SIG_IGN)
    die_with(worker)
    os.set_inheritable(fd, False)  # passed to this process, but to no model
    _serve(socket.socket(fileno=fd))


if __name__ == "__main__":
    main(sys.argv)
