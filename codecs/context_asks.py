"""The ContextActor's asks and replies as values, the way they travel inside one process.

A ``ContextHandle`` and its ContextActor share a process: an append's events are encoded once
(the store writes those bytes), its conditions and a new record stay Python values, and an
error raised in the actor reaches the asker as the same exception object. The wire shape of the
same asks (JSON fragments as ``bytes``, errors as ``Failed``) is ``context_protocol``;
``context_wire`` turns one into the other, for the day a transport crosses a process.
Asks and replies whose fields are the same either way are ``context_protocol``'s own.
"""

from __future__ import annotations

from typing import Any

import msgspec

from teams_runtime.codecs.context_protocol import (
    Created,
    Load,
    Loaded,
    Project,
    Recall,
    Recalled,
)
from teams_runtime.codecs.projection_reply import Projection

__all__ = [
    "Append",
    "Appended",
    "ContextAsk",
    "ContextReply",
    "Create",
    "Created",
    "Load",
    "Loaded",
    "Project",
    "Recall",
    "Recalled",
]


class Append(msgspec.Struct, tag=True, frozen=True, kw_only=True):
    """Append events and set top-level fields in one write (answered with ``Appended``).

    ``events`` and ``updates`` are JSON as the store writes it, encoded once by the asker;
    ``key`` makes the append idempotent; ``unless`` and ``expect`` are the values a
    compare-and-set checks (``context_protocol.Append`` says what each means).
    """

    request_id: str
    events: list[msgspec.Raw]
    updates: dict[str, msgspec.Raw] = {}
    key: str = ""
    unless: dict[str, Any] = {}
    expect: dict[str, Any] = {}


class Create(msgspec.Struct, tag=True, frozen=True, kw_only=True):
    """Create a record unless one exists (answered with ``Created``)."""

    request_id: str
    record: dict[str, Any]


ContextAsk = Project | Append | Load | Create | Recall


class Appended(msgspec.Struct, tag=True, frozen=True, kw_only=True):
    """The events are stored; ``count`` is the record's event count now (``applied``,
    ``refused`` as in ``context_protocol.Appended``). A refusal's ``fields`` are the values
    the record held in the fields its condition named (absent ones left out)."""

    count: int
    applied: bool = True
    refused: bool = False
    fields: dict[str, Any] = {}


ContextReply = Projection | Appended | Loaded | Created | Recalled
