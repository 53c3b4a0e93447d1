"""The ContextActor's protocol: the asks it takes and the replies it gives, as plain data.

One tagged union of asks and one of replies, every field used, JSON fragments as ``bytes``:
the same values cross a process or network boundary unchanged, in JSON or msgpack. An error is
a reply too (``Failed``): ``raise_failure`` turns it back into the exception it stands for.
"""

from __future__ import annotations

from typing import Literal, NoReturn

import msgspec

from teams_runtime.codecs.projection_reply import Projection
from teams_runtime.exceptions import (
    ConfigError,
    RecordError,
    StorageError,
    TeamsRuntimeError,
    UnknownRequestError,
    UnsafeRequestIdError,
)

__all__ = [
    "Append",
    "Appended",
    "ContextAsk",
    "ContextReply",
    "Create",
    "Created",
    "Failed",
    "Load",
    "Loaded",
    "Project",
    "Recall",
    "Recalled",
    "failure_of",
    "raise_failure",
]


class Project(msgspec.Struct, tag=True, frozen=True, kw_only=True):
    """Ask for the projection of a request's record (answered with a ``Projection``)."""

    request_id: str


class Append(msgspec.Struct, tag=True, frozen=True, kw_only=True):
    """Append events and set top-level fields in one write (answered with ``Appended``).

    ``events`` are the JSON bytes of each event; ``updates`` the JSON bytes of each value.
    ``key`` makes the append idempotent: the events carry it as ``append_key``, and an append
    whose key is already stored is answered as the first one was, without writing again.
    ``unless`` makes it conditional on the record's fields at the moment of writing.
    """

    request_id: str
    events: list[bytes]
    updates: dict[str, bytes] = {}
    key: str = ""
    # Write nothing if a top-level field now holds one of these values (JSON bytes): checked
    # under the record's lock, so a concurrent change (a cancel) cannot slip in between.
    unless: dict[str, bytes] = {}
    # Write nothing unless each of these fields now holds exactly this value (JSON bytes; an
    # absent field holds null): a compare-and-set on what the writer decided from.
    expect: dict[str, bytes] = {}


class Load(msgspec.Struct, tag=True, frozen=True, kw_only=True):
    """Ask for the whole record as stored now (answered with ``Loaded``)."""

    request_id: str


class Create(msgspec.Struct, tag=True, frozen=True, kw_only=True):
    """Create a record unless one exists (answered with ``Created``)."""

    request_id: str
    record: bytes  # the JSON bytes of the new record


class Recall(msgspec.Struct, tag=True, frozen=True, kw_only=True):
    """Ask for the events an append with ``key`` stored, among the record's last 256
    (answered with ``Recalled``; none if it was never stored)."""

    request_id: str
    key: str


ContextAsk = Project | Append | Load | Create | Recall


class Appended(msgspec.Struct, tag=True, frozen=True, kw_only=True):
    """The events are stored (fsynced); ``count`` is the record's event count now. ``applied``
    is ``False`` when an append with the same key was stored before (nothing was written and
    ``count`` is what that append left)."""

    count: int
    applied: bool = True
    refused: bool = False  # the condition (`unless`, `expect`) failed: nothing was written
    # Refused: the JSON of each field the condition named, as the record held it (absent ones
    # left out), so the asker can decide again without reading the record.
    fields: dict[str, bytes] = {}


class Loaded(msgspec.Struct, tag=True, frozen=True, kw_only=True):
    """The record as the bytes of its canonical file."""

    record: bytes


class Created(msgspec.Struct, tag=True, frozen=True, kw_only=True):
    """Whether the record was created (``False``: one existed and was left as it was)."""

    created: bool


class Recalled(msgspec.Struct, tag=True, frozen=True, kw_only=True):
    """The JSON bytes of each event stored under the key, oldest first."""

    events: list[bytes]


FailureKind = Literal[
    "unknown_request", "unsafe_request_id", "record", "config", "backend", "runtime", "internal"
]


class Failed(msgspec.Struct, tag=True, frozen=True, kw_only=True):
    """The ask failed; ``message`` says why (content-free: names files and ids only)."""

    kind: FailureKind
    message: str


ContextReply = Projection | Appended | Loaded | Created | Recalled | Failed

# Most specific first: a failure is matched to the first class it is an instance of.
_KINDS: tuple[tuple[type[Exception], FailureKind], ...] = (
    (UnknownRequestError, "unknown_request"),
    (UnsafeRequestIdError, "unsafe_request_id"),
    (RecordError, "record"),
    (ConfigError, "config"),
    (StorageError, "backend"),  # the store's server refused or is away
    (TeamsRuntimeError, "runtime"),  # any other error the runtime explains in one line
)
_ERRORS: dict[FailureKind, type[Exception]] = {kind: error for error, kind in _KINDS}


def failure_of(error: Exception) -> Failed:
    """The reply for an error raised while answering an ask."""
    for error_type, kind in _KINDS:
        if isinstance(error, error_type):
            return Failed(kind=kind, message=str(error))
    return Failed(kind="internal", message=f"{type(error).__name__}: {error}")


def raise_failure(failed: Failed) -> NoReturn:
    """Raise the exception a ``Failed`` reply stands for (``internal``: a ``RuntimeError``,
    a bug in the actor, never a problem with the request)."""
    error = _ERRORS.get(failed.kind)
    if error is None:
        raise RuntimeError(f"the context actor failed: {failed.message}")
    raise error(failed.message)
