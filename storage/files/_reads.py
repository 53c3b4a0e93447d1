"""Reading request record files: one descriptor per read, never through a link to the file.

Every read path takes the version from the descriptor it read (``fstat``), so a file another
program replaces meanwhile is never mixed with the one read.
"""

from __future__ import annotations

import os

from teams_runtime.codecs.request_records import not_utf8_at
from teams_runtime.exceptions import RecordError, UnknownRequestError
from teams_runtime.storage.files._index import INDEX_TAIL, load_index, write_index
from teams_runtime.storage.files._index_derivation import index_from_bytes, parts_from_bytes
from teams_runtime.storage.files._indexed_reads import parts_from_index
from teams_runtime.storage.local_files import (
    FileVersion,
    open_regular,
    version_of,
)
from teams_runtime.storage.protocols import IndexedParts
from teams_runtime.storage.workspace import RecordPaths

__all__ = [
    "parts_from_unindexed",
    "read_bytes",
    "read_indexed_parts",
    "read_small",
    "unknown_request",
]


def unknown_request(paths: RecordPaths) -> UnknownRequestError:
    """The error for a request whose record file does not exist."""
    return UnknownRequestError(
        f"no request {paths.request_id!r}: {paths.record} does not exist; "
        "check the id and the workspace."
    )


def _open_record(paths: RecordPaths) -> int:
    try:
        return open_regular(paths.record)
    except FileNotFoundError:
        raise unknown_request(paths) from None
    except OSError as exc:
        if os.path.islink(paths.record):
            raise RecordError(
                f"{paths.record} is a symbolic link; a record must be a file of its own."
            ) from exc
        raise RecordError(f"{paths.record}: cannot be read ({exc.strerror}).") from exc


_STABLE_READS = 5  # reads of a record another program keeps writing in place, then give up


def read_bytes(paths: RecordPaths) -> tuple[bytes, FileVersion]:
    """The record's bytes and the version of exactly those bytes.

    The version is taken before the read and checked after it: a program writing into the file
    in place meanwhile (teams-runtime itself replaces files, never writes into them) changes
    it, and the bytes are read again, so old bytes are never labelled with a new version.
    """
    read = _read_stable(paths, None)
    assert read is not None  # no size limit
    return read


def read_small(paths: RecordPaths, most: int) -> tuple[bytes, FileVersion] | None:
    """``read_bytes`` for a file of at most ``most`` bytes; ``None`` for a larger one or none
    at all. One descriptor, its ``fstat`` both the size check and the version (no ``stat`` of
    the path first)."""
    try:
        return _read_stable(paths, most)
    except UnknownRequestError:
        return None


def _read_stable(paths: RecordPaths, most: int | None) -> tuple[bytes, FileVersion] | None:
    fd = _open_record(paths)
    try:
        for _ in range(_STABLE_READS):
            before = version_of(os.fstat(fd))
            if most is not None and before.size > most:
                return None
            # A byte more than its size, from offset 0 (no seek, no buffer): a file that grew
            # or shrank meanwhile reads short or long, and its version changed as well.
            data = _pread_all(fd, before.size)
            if len(data) == before.size and version_of(os.fstat(fd)) == before:
                return data, before
    except OSError as exc:
        raise RecordError(f"{paths.record}: cannot be read ({exc.strerror}).") from exc
    finally:
        os.close(fd)
    raise RecordError(
        f"{paths.record}: it kept changing while it was read (another program writes into it "
        "in place); nothing was changed, ask again once it is done."
    )


def _pread_all(fd: int, size: int) -> bytes:
    """The file's bytes from offset 0 if it holds ``size`` of them (one call, asking for one
    byte more: the end of the file shows as a short read), else as many as it holds up to one
    more than ``size`` (it changed; a read is short also after a signal, or beyond what one
    call gives, about 2 GiB on Linux)."""
    data = os.pread(fd, size + 1, 0)
    if len(data) >= size or not data:
        return data
    chunks = [data]
    offset = len(data)
    while offset <= size and (chunk := os.pread(fd, size + 1 - offset, offset)):
        chunks.append(chunk)
        offset += len(chunk)
    return b"".join(chunks)


def read_indexed_parts(paths: RecordPaths) -> IndexedParts | None:
    """Read a record through its index: a few small reads, no parse of the history.

    ``None`` when there is no intact index for the file as it is now (then parse it instead).
    Every read goes through one descriptor, so a file replaced meanwhile cannot mix in.
    """
    fd = _open_record(paths)
    try:
        version = version_of(os.fstat(fd))
        index = load_index(paths, version)
        if index is None:
            return None
        parts = parts_from_index(
            lambda offset, length: os.pread(fd, max(length, 0), max(offset, 0)),
            index,
            str(paths.record),
        )
        # Written into in place while we read (not by teams-runtime): read it whole instead.
        return parts if version_of(os.fstat(fd)) == version else None
    except OSError:
        return None  # the index pointed somewhere the file cannot be read: parse instead
    finally:
        os.close(fd)


def parts_from_unindexed(
    paths: RecordPaths, data: bytes, version: FileVersion, *, tail: int, keep: bool
) -> IndexedParts | None:
    """Read a record that has no index (another program wrote it, or it is small) as if it had
    one: the last ``tail`` events and each role's newest evidence, without parsing the history.

    The index is derived from the bytes (one C pass over the events' heads, see
    ``index_from_bytes``); with ``keep`` it is written, so the next cold read of this version
    is an indexed one. ``None`` when the file is not laid out as teams-runtime writes it, or an
    byte of it is not UTF-8: then parse it (which names what is wrong).
    """
    if not_utf8_at(data) is not None:  # the whole file, as a full parse checks it
        return None
    index = index_from_bytes(paths, data, version, tail=max(tail, INDEX_TAIL if keep else 0))
    if index is None:
        return None
    parts = parts_from_bytes(data, index, str(paths.record))
    if parts is None:
        return None
    if keep:  # a cache, so a failure is left alone (``write_index``): the next read derives it
        write_index(paths, index)  # (making the index folder if it is missing)
    return parts
