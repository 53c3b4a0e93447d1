"""The seam between the ContextActor's asks as values and their wire shape
(``codecs.context_wire``): every ask and reply crosses JSON and msgpack and comes back the
value it was; an error comes back as the error it was (its class and message)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec
import pytest

from teams_runtime.codecs import context_asks as asks
from teams_runtime.codecs import context_protocol as wire
from teams_runtime.codecs.context_wire import (
    ask_from_wire,
    ask_to_wire,
    reply_from_wire,
    reply_to_wire,
)
from teams_runtime.exceptions import RecordError, UnknownRequestError

FORMATS = [
    pytest.param(msgspec.json.encode, msgspec.json.decode, id="json"),
    pytest.param(msgspec.msgpack.encode, msgspec.msgpack.decode, id="msgpack"),
]

ASKS = [
    pytest.param(asks.Project(request_id="req-1"), id="project"),
    pytest.param(
        asks.Append(
            request_id="req-1",
            events=[msgspec.Raw(b'{"type":"note","summary":"\xc3\xbcn"}'), msgspec.Raw(b"{}")],
            updates={"status": msgspec.Raw(b'"completed"')},
            key="qa/env-1",
            unless={"status": "cancelled"},
            expect={"hops": 3, "status": None},
        ),
        id="append",
    ),
    pytest.param(asks.Load(request_id="req-1"), id="load"),
    pytest.param(asks.Recall(request_id="req-1", key="qa/env-1"), id="recall"),
    pytest.param(
        asks.Create(request_id="req-1", record={"request_id": "req-1", "events": [], "n": 1.5}),
        id="create",
    ),
]

REPLIES = [
    pytest.param(asks.Appended(count=4), id="appended"),
    pytest.param(
        asks.Appended(count=4, applied=False, refused=True, fields={"status": "cancelled"}),
        id="appended-refused",
    ),
    pytest.param(asks.Loaded(record=b'{"events": []}\n'), id="loaded"),
    pytest.param(asks.Created(created=True), id="created"),
    pytest.param(asks.Recalled(events=[b'{"append_key":"k"}']), id="recalled"),
]

Encode = Callable[[Any], bytes]
Decode = Callable[..., Any]


def _same(value: Any) -> Any:
    """A struct as comparable builtins (``Raw`` has no equality of its own)."""
    return msgspec.json.decode(msgspec.json.encode(value))


@pytest.mark.parametrize(("encode", "decode"), FORMATS)
@pytest.mark.parametrize("ask", ASKS)
def test_every_ask_crosses_a_wire_as_the_value_it_was(
    ask: asks.ContextAsk, encode: Encode, decode: Decode
) -> None:
    crossed = decode(encode(ask_to_wire(ask)), type=wire.ContextAsk)
    back = ask_from_wire(crossed)
    assert type(back) is type(ask)
    assert _same(back) == _same(ask)


@pytest.mark.parametrize(("encode", "decode"), FORMATS)
@pytest.mark.parametrize("reply", REPLIES)
def test_every_reply_crosses_a_wire_as_the_value_it_was(
    reply: asks.ContextReply, encode: Encode, decode: Decode
) -> None:
    crossed = decode(encode(reply_to_wire(reply)), type=wire.ContextReply)
    assert reply_from_wire(crossed) == reply


@pytest.mark.parametrize(
    "error",
    [
        pytest.param(UnknownRequestError("no request 'x'"), id="unknown-request"),
        pytest.param(RecordError("req-1: torn file"), id="record"),
    ],
)
def test_an_error_crosses_a_wire_as_its_class_and_message(error: Exception) -> None:
    crossed = msgspec.json.decode(msgspec.json.encode(reply_to_wire(error)), type=wire.ContextReply)
    with pytest.raises(type(error), match=f"^{error}$"):
        reply_from_wire(crossed)
