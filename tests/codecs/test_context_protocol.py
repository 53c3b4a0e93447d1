"""The ContextActor's protocol as plain data: every ask and reply crosses JSON and msgpack
unchanged, and a failure reply stands for exactly the error it was made from."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import msgspec
import pytest

from teams_runtime.codecs.config import PromptContextConfig
from teams_runtime.codecs.context_protocol import (
    Append,
    Appended,
    ContextAsk,
    ContextReply,
    Create,
    Created,
    Failed,
    Load,
    Loaded,
    Project,
    failure_of,
    raise_failure,
)
from teams_runtime.demo import sample_record
from teams_runtime.exceptions import (
    ConfigError,
    RecordError,
    StorageError,
    TeamsRuntimeError,
    UnknownRequestError,
    UnsafeRequestIdError,
)
from teams_runtime.policy.projection import project_request

Encode = Callable[[Any], bytes]
Decode = Callable[..., Any]

FORMATS = [
    pytest.param(msgspec.json.encode, msgspec.json.decode, id="json"),
    pytest.param(msgspec.msgpack.encode, msgspec.msgpack.decode, id="msgpack"),
]

ASKS = [
    pytest.param(Project(request_id="req-1"), id="project"),
    pytest.param(
        Append(
            request_id="req-1",
            events=[b'{"type":"note","summary":"\xc3\xbcn\xc3\xaf"}', b"{}"],
            updates={"status": b'"completed"', "result": b'{"role":"qa"}'},
        ),
        id="append",
    ),
    pytest.param(Append(request_id="req-1", events=[]), id="append-nothing"),
    pytest.param(
        Append(
            request_id="req-1",
            events=[b"{}"],
            updates={"hops": b"4"},
            key="qa/env-1",
            unless={"status": b'"cancelled"'},
            expect={"hops": b"3", "status": b'"in_progress"'},
        ),
        id="append-conditional",
    ),
    pytest.param(Load(request_id="req-1"), id="load"),
    pytest.param(
        Create(request_id="req-1", record=b'{"request_id":"req-1","events":[]}'), id="create"
    ),
]

_COMPACTED = project_request(
    sample_record(40, "req-1"), PromptContextConfig(recent_events=4, max_events=7)
)
REPLIES = [
    pytest.param(_COMPACTED, id="projection"),
    pytest.param(project_request(sample_record(3, "req-1")), id="projection-whole"),
    pytest.param(Appended(count=41), id="appended"),
    pytest.param(
        Appended(count=41, applied=False, refused=True, fields={"hops": b"4"}), id="refused"
    ),
    pytest.param(Loaded(record=b'{"request_id": "req-1", "events": []}\n'), id="loaded"),
    pytest.param(Created(created=True), id="created"),
    pytest.param(Created(created=False), id="not-created"),
    pytest.param(Failed(kind="unknown_request", message="no request 'x'"), id="failed"),
]


def test_the_projection_sample_is_compacted() -> None:
    assert _COMPACTED.compacted and _COMPACTED.backfilled  # the reply exercises every field


@pytest.mark.parametrize(("encode", "decode"), FORMATS)
@pytest.mark.parametrize("ask", ASKS)
def test_every_ask_crosses_unchanged(encode: Encode, decode: Decode, ask: Any) -> None:
    decoded = decode(encode(ask), type=ContextAsk)
    assert type(decoded) is type(ask)
    assert decoded == ask


@pytest.mark.parametrize(("encode", "decode"), FORMATS)
@pytest.mark.parametrize("reply", REPLIES)
def test_every_reply_crosses_unchanged(encode: Encode, decode: Decode, reply: Any) -> None:
    decoded = decode(encode(reply), type=ContextReply)
    assert type(decoded) is type(reply)
    assert decoded == reply


def test_a_projection_reply_still_answers_like_the_original() -> None:
    decoded = msgspec.msgpack.decode(msgspec.msgpack.encode(_COMPACTED), type=ContextReply)
    assert decoded.record == _COMPACTED.record
    assert decoded.notice == _COMPACTED.notice
    assert b"".join(decoded.iter_record_json()) == b"".join(_COMPACTED.iter_record_json())


@pytest.mark.parametrize("ask", ASKS)
def test_messages_are_tagged_with_their_name(ask: Any) -> None:
    assert msgspec.json.decode(msgspec.json.encode(ask))["type"] == type(ask).__name__


def test_an_ask_is_not_a_reply() -> None:
    with pytest.raises(msgspec.ValidationError, match=r"^Invalid value 'Project'"):
        msgspec.json.decode(msgspec.json.encode(Project(request_id="r")), type=ContextReply)


def test_an_unknown_failure_kind_is_refused() -> None:
    data = b'{"type": "Failed", "kind": "oops", "message": "m"}'
    with pytest.raises(
        msgspec.ValidationError, match=r"^Invalid enum value 'oops' - at `\$\.kind`$"
    ):
        msgspec.json.decode(data, type=ContextReply)


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        pytest.param(UnknownRequestError("no request 'x': gone"), "unknown_request", id="unknown"),
        pytest.param(
            UnsafeRequestIdError("request id '../x' is not a safe file name"),
            "unsafe_request_id",
            id="unsafe",
        ),
        pytest.param(RecordError("r.json: not valid JSON"), "record", id="record"),
        pytest.param(ConfigError("team_runtime.yaml model: bad"), "config", id="config"),
        pytest.param(
            StorageError("the NATS server at nats://h:4222 refused an append"),
            "backend",
            id="backend",
        ),
        pytest.param(TeamsRuntimeError("any other one-line error"), "runtime", id="runtime"),
    ],
)
def test_failures_stand_for_the_error_they_were_made_from(error: Exception, kind: str) -> None:
    failed = failure_of(error)
    assert failed == Failed(kind=kind, message=str(error))
    crossed = msgspec.json.decode(msgspec.json.encode(failed), type=ContextReply)
    with pytest.raises(type(error), match=f"^{re.escape(str(error))}$") as caught:
        raise_failure(crossed)
    assert type(caught.value) is type(error)  # the exact class, not a parent of it


def test_an_unexpected_error_is_an_internal_failure() -> None:
    failed = failure_of(ValueError("boom"))
    assert failed == Failed(kind="internal", message="ValueError: boom")
    with pytest.raises(RuntimeError, match=r"^the context actor failed: ValueError: boom$"):
        raise_failure(failed)
