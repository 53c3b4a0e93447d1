"""anyio byte streams over the worker's ends of a model's pipes (non-blocking file
descriptors, waited on with ``anyio.wait_readable`` / ``wait_writable``), and the model's
status pipe from the model starter (lines: ``started``, ``failed``, ``exited``)."""

from __future__ import annotations

import os

import anyio
from anyio.abc import ByteReceiveStream, ByteSendStream
from anyio.lowlevel import checkpoint

__all__ = ["PipeReader", "PipeWriter", "StatusLines"]


class _Pipe:
    """One end of a pipe this side owns: closed once, and no task left waiting on it."""

    def __init__(self, fd: int) -> None:
        os.set_blocking(fd, False)  # this end only: the model's end stays as it was
        self._fd = fd

    def _open_fd(self) -> int:
        if self._fd < 0:
            raise anyio.ClosedResourceError
        return self._fd

    async def aclose(self) -> None:
        if self._fd >= 0:
            fd, self._fd = self._fd, -1
            anyio.notify_closing(fd)  # a task waiting on it gets ClosedResourceError
            os.close(fd)
        await checkpoint()


class PipeReader(_Pipe, ByteReceiveStream):
    """What the model prints on one pipe."""

    async def receive(self, max_bytes: int = 65536) -> bytes:
        while True:
            try:
                data = os.read(self._open_fd(), max_bytes)
            except BlockingIOError:
                await anyio.wait_readable(self._fd)
                continue
            if not data:
                raise anyio.EndOfStream
            await checkpoint()
            return data


class PipeWriter(_Pipe, ByteSendStream):
    """The model's stdin."""

    async def send(self, item: bytes) -> None:
        view = memoryview(item)
        while view:
            try:
                written = os.write(self._open_fd(), view)
            except BlockingIOError:
                await anyio.wait_writable(self._fd)
                continue
            except BrokenPipeError as exc:  # the model stopped reading
                raise anyio.BrokenResourceError from exc
            view = view[written:]
        await checkpoint()


class StatusLines:
    """The lines of a status pipe, one at a time; ``None`` at its end."""

    def __init__(self, fd: int) -> None:
        self._reader = PipeReader(fd)
        self._buffer = b""

    async def next(self) -> bytes | None:
        while b"\n" not in self._buffer:
            try:
                self._buffer += await self._reader.receive(256)
            except (anyio.EndOfStream, anyio.ClosedResourceError):
                return None
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line

    async def aclose(self) -> None:
        await self._reader.aclose()
