"""The one seam between the ContextActor's asks as values (``context_asks``, inside a process)
and their wire shape (``context_protocol``, across one): what a transport calls on each side.

An asker's side sends ``ask_to_wire(ask)`` and turns what comes back into the reply or the
error with ``reply_from_wire``; the actor's side answers ``ask_from_wire(wire)`` and sends
``reply_to_wire(reply or error)``. Encoded with msgspec (JSON or msgpack), every wire value
crosses unchanged. An error crosses as ``Failed`` (its class and message, not its attributes).
"""

from __future__ import annotations

import msgspec

from teams_runtime.codecs import context_asks as asks
from teams_runtime.codecs import context_protocol as wire
from teams_runtime.codecs.request_records import encode_json

__all__ = ["ask_from_wire", "ask_to_wire", "reply_from_wire", "reply_to_wire"]


def ask_to_wire(ask: asks.ContextAsk) -> wire.ContextAsk:
    """``ask`` in its wire shape."""
    match ask:
        case asks.Append():
            return wire.Append(
                request_id=ask.request_id,
                events=[bytes(event) for event in ask.events],
                updates={name: bytes(value) for name, value in ask.updates.items()},
                key=ask.key,
                unless={name: encode_json(value) for name, value in ask.unless.items()},
                expect={name: encode_json(value) for name, value in ask.expect.items()},
            )
        case asks.Create():
            return wire.Create(request_id=ask.request_id, record=encode_json(ask.record))
        case _:
            return ask  # the same on a wire


def ask_from_wire(message: wire.ContextAsk) -> asks.ContextAsk:
    """The ask a wire message stands for."""
    match message:
        case wire.Append():
            return asks.Append(
                request_id=message.request_id,
                events=[msgspec.Raw(event) for event in message.events],
                updates={name: msgspec.Raw(value) for name, value in message.updates.items()},
                key=message.key,
                unless={name: msgspec.json.decode(v) for name, v in message.unless.items()},
                expect={name: msgspec.json.decode(v) for name, v in message.expect.items()},
            )
        case wire.Create():
            return asks.Create(
                request_id=message.request_id, record=msgspec.json.decode(message.record)
            )
        case _:
            return message


def reply_to_wire(reply: asks.ContextReply | Exception) -> wire.ContextReply:
    """A reply, or the error an ask raised, in its wire shape (an error as ``Failed``)."""
    match reply:
        case Exception():
            return wire.failure_of(reply)
        case asks.Appended():
            return wire.Appended(
                count=reply.count,
                applied=reply.applied,
                refused=reply.refused,
                fields={name: encode_json(value) for name, value in reply.fields.items()},
            )
        case _:
            return reply


def reply_from_wire(message: wire.ContextReply) -> asks.ContextReply:
    """The reply a wire message stands for; raises the error a ``Failed`` stands for
    (``context_protocol.raise_failure``)."""
    match message:
        case wire.Failed():
            wire.raise_failure(message)
        case wire.Appended():
            return asks.Appended(
                count=message.count,
                applied=message.applied,
                refused=message.refused,
                fields={name: msgspec.json.decode(v) for name, v in message.fields.items()},
            )
        case _:
            return message
