"""What only the NATS store promises, on a real ``nats-server`` (the protocol itself is
test_record_store's): the same projections, prompts and record bytes as the file store for any
history; appends from several processes at once; idempotent appends across hosts; an append a
dead writer left half done is set aside."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
import time
import unicodedata
import uuid
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from teams_runtime.actors.context._actor import open_context
from teams_runtime.codecs.config import NatsSettings, PromptContextConfig
from teams_runtime.codecs.envelopes import MessageEnvelope
from teams_runtime.codecs.record_heads import HEAD_TAIL, decode_head
from teams_runtime.codecs.request_ids import check_request_id
from teams_runtime.codecs.request_records import encode_json
from teams_runtime.exceptions import (
    RecordError,
    StorageError,
    UnknownRequestError,
    UnsafeRequestIdError,
)
from teams_runtime.policy.prompts import build_prompt
from teams_runtime.storage import (
    FileRecordStore,
    IndexedParts,
    RecordStore,
    Workspace,
)
from teams_runtime.storage.blocking import BlockingRecordStore, view_store
from teams_runtime.storage.files.threaded import ThreadedRecordStore
from teams_runtime.storage.nats import _append_writer as append_writer
from teams_runtime.storage.nats._append_writer import AppendWriter
from teams_runtime.storage.nats._head_changes import prepare
from teams_runtime.storage.nats._names import id_of_token, token_of
from teams_runtime.storage.nats.blocking_faces import blocking_store
from teams_runtime.storage.nats.connection import NatsConnection
from teams_runtime.storage.nats.nats_store import UNSEEN, NatsRecordStore

from ...conftest import SMALL_MAX_PAYLOAD
from ...support.strategies import configs, event


@pytest.fixture
def nats_settings(nats_server: Any) -> NatsSettings:
    settings: NatsSettings = nats_server.settings()
    return settings


@pytest.fixture
def connection(
    nats_settings: NatsSettings, nats_connect: Callable[..., NatsConnection]
) -> NatsConnection:
    return nats_connect(nats_settings)


def _raw(value: Any) -> msgspec.Raw:
    return msgspec.Raw(encode_json(value))


# --- the same bytes as the file store ---------------------------------------------------------

_append = st.fixed_dictionaries(
    {
        "events": st.lists(event, max_size=4),
        "updates": st.dictionaries(
            st.sampled_from(["status", "result", "new_key", "current_role"]),
            st.one_of(st.text(max_size=4), st.integers(), st.none(), st.just({"role": "qa"})),
            max_size=2,
        ),
        "key": st.sampled_from(["", "", "k1", "k2"]),
        "unless": st.sampled_from([{}, {}, {"status": "cancelled"}]),
        "expect": st.sampled_from([{}, {}, {"status": None}, {"current_role": 1, "new_key": "a"}]),
    }
)


async def _projections(store: RecordStore, request_id: str, config: PromptContextConfig) -> Any:
    envelope = MessageEnvelope(request_id=request_id, sender="user", target="qa", scope="s")
    async with open_context("unused", config, store=store) as context:
        projection = await context.project(request_id)
        again = await context.project(request_id)  # from the actor's cache this time
    prompt = build_prompt("task", role="qa", projection=projection, envelope=envelope).text()
    return msgspec.json.encode(projection), msgspec.json.encode(again), prompt


def _nats_store(connection: NatsConnection) -> NatsRecordStore:
    """The async store itself (its reader, its writer), opened on the connection's loop."""
    return connection.call(partial(NatsRecordStore.open, connection))


def _check_same_as_the_file_store(
    connection: NatsConnection,
    record: dict[str, Any],
    appends: list[dict[str, Any]],
    config: PromptContextConfig,
) -> None:
    """Create ``record`` and run ``appends`` on both stores: the same answers, bytes, reads,
    projections and prompts."""
    request_id = record["request_id"]
    nats_async = _nats_store(connection)
    with tempfile.TemporaryDirectory() as folder:
        stores: list[BlockingRecordStore] = [
            FileRecordStore(Workspace(Path(folder))),
            view_store(nats_async, connection.call),
        ]
        for store in stores:
            assert store.create(request_id, record)
        for step in appends:
            answers = [
                store.append(
                    request_id,
                    [_raw(item) for item in step["events"]],
                    step["updates"],
                    key=step["key"],
                    unless=step["unless"],
                    expect=step.get("expect"),
                )
                for store in stores
            ]
            file_answer, nats_answer = answers
            assert (
                nats_answer.count,
                nats_answer.applied,
                nats_answer.refused,
                nats_answer.fields,
            ) == (file_answer.count, file_answer.applied, file_answer.refused, file_answer.fields)
        file_store, nats_store = stores
        assert nats_store.load(request_id) == file_store.load(request_id)  # export bytes
        reads = [store.read(request_id, tail=config.max_events) for store in stores]
        for read in reads:
            assert isinstance(read, IndexedParts)
        file_read, nats_read = reads
        assert isinstance(file_read, IndexedParts) and isinstance(nats_read, IndexedParts)
        assert (nats_read.count, nats_read.history_bytes) == (
            file_read.count,
            file_read.history_bytes,
        )
        assert nats_read.fields == file_read.fields
        assert nats_read.evidence == file_read.evidence
        assert nats_read.tail == file_read.tail[-len(nats_read.tail) :] if nats_read.tail else True
        whole = [store.read(request_id, tail=None) for store in stores]
        assert whole[1].fields == whole[0].fields  # type: ignore[union-attr]
        file_views = anyio.run(_projections, ThreadedRecordStore(file_store), request_id, config)
        # The NATS store answers on its connection's loop: the actor runs there.
        nats_views = connection.call(partial(_projections, nats_async, request_id, config))
        assert nats_views == file_views  # projection, cached projection and prompt


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    history=st.lists(event, max_size=40),
    appends=st.lists(_append, max_size=8),
    config=configs(),
)
def test_any_history_projects_prompts_and_exports_as_the_file_store_does(
    connection: NatsConnection,
    history: list[Any],
    appends: list[dict[str, Any]],
    config: PromptContextConfig,
) -> None:
    request_id = f"req.{uuid.uuid4().hex[:8]}:x"  # `.` and `:` must survive the subjects
    record = {"request_id": request_id, "status": "in_progress", "events": history}
    _check_same_as_the_file_store(connection, record, appends, config)


# --- values larger than a message -------------------------------------------------------------


@pytest.fixture
def small_connection(
    small_nats_server: Any, nats_connect: Callable[..., NatsConnection]
) -> NatsConnection:
    return nats_connect(small_nats_server.settings())


_ROOM = SMALL_MAX_PAYLOAD - 2048  # the data a message of `small_nats_server` carries
# Sizes around where a value stops fitting in one message, and in two.
_SIZES = st.sampled_from([_ROOM - 200, _ROOM - 90, _ROOM, _ROOM + 1, 2 * _ROOM, 5 * _ROOM + 3])
_big_event = st.builds(
    lambda size, role: {
        "timestamp": "t",
        "type": "role_report",
        "actor": role,
        "summary": "s" * size,
        "payload": {"role": role},
    },
    _SIZES,
    st.sampled_from(["planner", "qa", "developer"]),
)
_big_append = st.fixed_dictionaries(
    {
        "events": st.lists(event | _big_event, max_size=3),
        "updates": st.dictionaries(
            st.sampled_from(["status", "result", "body"]),
            st.one_of(st.text(max_size=4), _SIZES.map(lambda size: {"summary": "r" * size})),
            max_size=2,
        ),
        "key": st.sampled_from(["", "k1", "k" * (_ROOM + 10)]),  # a key longer than a message
        "unless": st.sampled_from([{}, {"status": "cancelled"}]),
    }
)


@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
)
@given(
    history=st.lists(event | _big_event, max_size=12),
    big_field=st.none() | _SIZES,
    appends=st.lists(_big_append, max_size=5),
    config=configs(),
)
def test_events_and_fields_larger_than_a_message_are_stored_as_the_file_store_stores_them(
    small_connection: NatsConnection,
    history: list[Any],
    big_field: int | None,
    appends: list[dict[str, Any]],
    config: PromptContextConfig,
) -> None:
    # On a server whose messages carry 64 KiB: events split over several messages, fields
    # spilled from the head, keys longer than a message; the same as the file store.
    request_id = f"req-{uuid.uuid4().hex[:8]}"
    record: dict[str, Any] = {"request_id": request_id, "status": "queued", "events": history}
    if big_field is not None:
        record["scope"] = "x" * big_field
    _check_same_as_the_file_store(small_connection, record, appends, config)


def test_a_model_answer_of_a_megabyte_is_stored_as_the_file_store_stores_it(
    connection: NatsConnection,
) -> None:
    # The server's default max_payload (1 MiB): a role_report of 1.2 MB (a 600,000-byte
    # summary, in the event and in `result`), a 2.5 MB event, a 1.5 MB field.
    summary = "s" * 600_000
    report = {
        "timestamp": "t",
        "type": "role_report",
        "actor": "planner",
        "summary": summary,
        "payload": {"role": "planner", "result": {"summary": summary}},
    }
    record = {
        "request_id": "req-big",
        "status": "queued",
        "body": "b" * 1_500_000,
        "events": [{"type": "created"}, report],
    }
    huge = {**report, "actor": "qa", "summary": "q" * 2_500_000, "payload": {"role": "qa"}}
    appends = [
        {"events": [huge], "updates": {"result": {"summary": summary}}, "key": "env-1",
         "unless": {"status": "cancelled"}},
        {"events": [{"type": "note"}], "updates": {"status": "done"}, "key": "", "unless": {}},
        {"events": [huge], "updates": {}, "key": "env-1", "unless": {}},  # stored already
    ]  # fmt: skip
    _check_same_as_the_file_store(connection, record, appends, PromptContextConfig())
    kv = connection.call(lambda: connection.js.key_value(connection.names.heads))
    entry = connection.call(lambda: kv.get("req-big"))
    assert entry.value is not None
    assert list(decode_head(entry.value).spilled) == ["body"]  # `result` fits in the head


def test_append_keys_of_any_length_are_answered_as_the_file_store_answers_them(
    connection: NatsConnection,
) -> None:
    # The head keeps digests of the keys on the last 256 events: eleven 100 KB keys made a
    # head of more than 1 MiB; and a key is found exactly when the file store finds it.
    long_keys = [f"{n}-" + "k" * 100_000 for n in range(12)]
    short_keys = [f"short-{n}" for n in range(258)]
    appends = [
        {"events": [{"type": "note", "append_key": key}], "updates": {}, "key": key,
         "unless": {}}
        for key in [*long_keys, *short_keys, long_keys[0], long_keys[11], short_keys[3],
                    short_keys[257]]
    ]  # fmt: skip
    config = PromptContextConfig()
    record = {"request_id": "req-keys", "events": []}
    _check_same_as_the_file_store(connection, record, appends, config)
    store = blocking_store(connection)
    again = store.append("req-keys", [_raw({"type": "note"})], {}, key=long_keys[11])
    assert (again.applied, again.count) == (False, 272)  # its newest event is in the window


# --- several writers --------------------------------------------------------------------------

_WRITER = """
import sys, msgspec
from anyio.from_thread import start_blocking_portal
from teams_runtime.storage.nats.connection import open_connection
from teams_runtime.storage.nats.blocking_faces import blocking_store
from teams_runtime.codecs.config import NatsSettings
settings = msgspec.json.decode(sys.argv[1].encode(), type=NatsSettings)
name, appends = sys.argv[2], int(sys.argv[3])
with start_blocking_portal() as portal:
    with portal.wrap_async_context_manager(open_connection(settings)) as connection:
        store = blocking_store(connection)
        print("ready", flush=True)
        sys.stdin.readline()  # start together
        for number in range(appends):
            event = {"timestamp": "t", "type": "note", "actor": name, "summary": f"{name}:{number}"}
            store.append("req-1", [msgspec.Raw(msgspec.json.encode(event))], {"status": name})
"""


def test_four_processes_appending_at_once_lose_nothing_and_keep_their_order(
    connection: NatsConnection, nats_settings: NatsSettings
) -> None:
    store = blocking_store(connection)
    store.create("req-1", {"request_id": "req-1", "events": []})
    writers, appends = 4, 100
    argument = msgspec.json.encode(nats_settings).decode()
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", _WRITER, argument, f"w{n}", str(appends)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for n in range(writers)
    ]
    for process in processes:
        assert process.stdout is not None and process.stdout.readline() == "ready\n"
    for process in processes:
        assert process.stdin is not None
        process.stdin.write("go\n")
        process.stdin.flush()
    for process in processes:
        process.communicate(timeout=180)
        assert process.returncode == 0
    events = json.loads(store.load("req-1"))["events"]
    assert len(events) == writers * appends
    for n in range(writers):
        mine = [item["summary"] for item in events if item["actor"] == f"w{n}"]
        assert mine == [f"w{n}:{number}" for number in range(appends)]
    read = store.read("req-1", tail=16)
    assert isinstance(read, IndexedParts) and read.count == writers * appends


def test_a_keyed_append_is_stored_once_whichever_host_repeats_it(
    connection: NatsConnection,
    nats_settings: NatsSettings,
    nats_connect: Callable[..., NatsConnection],
) -> None:
    other_host = nats_connect(nats_settings)
    here, there = blocking_store(connection), blocking_store(other_host)
    here.create("req-1", {"request_id": "req-1", "events": []})
    note = {"timestamp": "t", "type": "note", "append_key": "env-1"}
    first = here.append("req-1", [_raw(note)], {"status": "a"}, key="env-1")
    again = there.append("req-1", [_raw(note)], {"status": "b"}, key="env-1")
    assert (first.applied, first.count) == (True, 1)
    assert (again.applied, again.count) == (False, 1)
    stored = json.loads(there.load("req-1"))
    assert (len(stored["events"]), stored["status"]) == (1, "a")


def test_an_append_a_dead_writer_left_half_done_is_set_aside(
    connection: NatsConnection, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = blocking_store(connection)
    store.create("req-1", {"request_id": "req-1", "events": [{"type": "created"}]})
    names = connection.names
    # A writer published an event and died before committing the head.
    subject = names.event_subject("req-1", None)
    headers = {"Tr-Append": "dead"}
    connection.call(lambda: connection.js.publish(subject, b'{"type": "lost"}', headers=headers))
    monkeypatch.setattr(append_writer, "ABANDONED_SECONDS", 0.3)  # the grace, shortened
    appended = store.append("req-1", [_raw({"type": "after"})], {})
    assert appended.count == 2
    stored = json.loads(store.load("req-1"))
    assert [item["type"] for item in stored["events"]] == ["created", "after"]
    read = store.read("req-1", tail=None)
    assert len(read.fields["events"]) == 2


def test_a_fresh_half_done_append_is_waited_for_not_set_aside(
    connection: NatsConnection, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = blocking_store(connection)
    store.create("req-1", {"request_id": "req-1", "events": []})
    headers = {"Tr-Append": "slow"}
    subject = connection.names.event_subject("req-1", None)
    connection.call(lambda: connection.js.publish(subject, b'{"type": "pending"}', headers=headers))
    other = blocking_store(connection)
    assert other.exists("req-1")  # its head seen: version() says its revision
    before = other.version("req-1")
    # Its writer may still commit it: an append waits (here it gives up, nothing written).
    monkeypatch.setattr(append_writer, "APPEND_SECONDS", 0.5)
    with pytest.raises(RecordError, match=r"other writers kept the request busy for 0.5 s"):
        other.append("req-1", [_raw({"type": "x"})], {})
    assert other.version("req-1") == before
    assert json.loads(store.load("req-1"))["events"] == []


def test_a_half_done_append_is_aged_by_the_appenders_own_clock_and_waited_for_calmly(
    connection: NatsConnection, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A writer whose clock ran an hour ahead published an event and died. Its age is how long
    # the appender has watched it (monotonic), so it is set aside after the grace (shortened
    # here to a second), not an hour later; and the append waits without spinning.
    nats_store = _nats_store(connection)
    store = view_store(nats_store, connection.call)
    store.create("req-1", {"request_id": "req-1", "events": []})
    subject = connection.names.event_subject("req-1", None)
    headers = {"Tr-Append": "ahead", "Tr-Time": f"{time.time() + 3600:.3f}"}
    connection.call(lambda: connection.js.publish(subject, b'{"type": "lost"}', headers=headers))
    monkeypatch.setattr(append_writer, "ABANDONED_SECONDS", 1.0)
    monkeypatch.setattr(append_writer, "APPEND_SECONDS", 20.0)
    reads = 0
    get_head = nats_store.reader.get_head

    async def counted(key: str) -> Any:
        nonlocal reads
        reads += 1
        return await get_head(key)

    monkeypatch.setattr(nats_store.reader, "get_head", counted)
    appended = store.append("req-1", [_raw({"type": "after"})], {})
    assert appended.count == 1
    assert [item["type"] for item in json.loads(store.load("req-1"))["events"]] == ["after"]
    assert reads < 25  # a few reads in that second (with 1-10 ms pauses it was hundreds)


def test_an_appender_whose_clock_runs_ahead_never_sets_a_live_writers_messages_aside(
    connection: NatsConnection, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Another writer has just published the first message of its append (it is alive and
    # about to commit). This host's clock runs two minutes ahead: judged by timestamps the
    # message would look two minutes old and be set aside, interleaving the two appends (an
    # outside attack corrupted a record so). It must wait instead, and say the request is busy.
    store = blocking_store(connection)
    store.create("req-1", {"request_id": "req-1", "events": []})
    subject = connection.names.event_subject("req-1", None)
    headers = {"Tr-Append": "live", "Tr-Time": f"{time.time():.3f}"}
    connection.call(lambda: connection.js.publish(subject, b'{"type": "live"}', headers=headers))
    ahead = time.time() + 120
    monkeypatch.setattr(append_writer.time, "time", lambda: ahead)
    monkeypatch.setattr(append_writer, "ABANDONED_SECONDS", 5.0)
    monkeypatch.setattr(append_writer, "APPEND_SECONDS", 1.0)
    with pytest.raises(RecordError, match="busy"):
        store.append("req-1", [_raw({"type": "mine"})], {})


def test_a_create_the_server_refuses_half_way_leaves_no_request_behind(
    nats_server: Any, monkeypatch: pytest.MonkeyPatch, nats_connect: Callable[..., NatsConnection]
) -> None:
    # The stream's limit (200 KB, set by an operator) is reached after a few of its events:
    # the head, made last, is never made; once the limit is raised the same create works.
    settings = nats_server.settings()
    nats_server.limit_events(settings.prefix, 200_000)
    connection = nats_connect(settings)
    store = blocking_store(connection)
    events = [{"type": "note", "summary": "s" * 50_000} for _ in range(6)]
    record = {"request_id": "req-1", "events": events}
    with pytest.raises(StorageError, match=r"refused a message of this write \(.*\); noth"):
        store.create("req-1", record)
    assert (store.exists("req-1"), store.list_ids()) == (False, [])
    nats_server.limit_events(settings.prefix, -1)
    monkeypatch.setattr(append_writer, "ABANDONED_SECONDS", 0.2)  # the grace, shortened
    assert store.create("req-1", record)
    assert json.loads(store.load("req-1"))["events"] == events


def test_a_head_another_program_wrote_is_a_clear_error(connection: NatsConnection) -> None:
    store = blocking_store(connection)
    store.create("req-1", {"request_id": "req-1", "events": []})
    kv = connection.call(lambda: connection.js.key_value(connection.names.heads))
    connection.call(lambda: kv.put("req-1", b"not a head"))
    pattern = (
        r"^nats:t\w+_records/req-1: the record head is not one teams-runtime wrote .*import`\.$"
    )
    for call in (lambda: store.read("req-1", tail=16), lambda: store.load("req-1"),
                 lambda: store.append("req-1", [], {})):  # fmt: skip
        with pytest.raises(RecordError, match=pattern):
            call()


def test_an_append_retried_after_its_answer_was_lost_is_stored_once(
    connection: NatsConnection,
) -> None:
    # What `NatsConnection.run` does when the server's reply to a commit times out: it runs
    # the same append again. Another writer's append in between must not make it write twice.
    nats_store = _nats_store(connection)
    store = view_store(nats_store, connection.call)
    store.create("req-1", {"request_id": "req-1", "events": []})
    prepared = prepare([_raw({"type": "mine"})], "an appended event")
    append = AppendWriter(nats_store.reader, "req-1", prepared, {"status": "x"}, "", {})
    first = connection.call(append.run)
    store.append("req-1", [_raw({"type": "other"})], {})
    again = connection.call(append.run)
    assert (first.applied, first.count) == (True, 1)
    assert (again.applied, again.count) == (True, 1)
    stored = json.loads(store.load("req-1"))
    assert [event["type"] for event in stored["events"]] == ["mine", "other"]


# --- request ids of any script ----------------------------------------------------------------

_ID_CHARACTERS = st.characters(categories=["Lu", "Ll", "Lt", "Lm", "Lo", "Nd", "Mn", "Mc"])
_ids = st.text(_ID_CHARACTERS | st.sampled_from("-_.:="), min_size=1, max_size=70)


def _old_token(value: str) -> str:
    """What `token_of` made of an id before ids of any script were tokens."""
    return "".join(f"={ord(c):02X}" if c in ".:=" else c for c in value)


@given(_ids)
def test_a_request_id_is_a_token_kv_keys_and_subjects_accept_and_it_comes_back(
    value: str,
) -> None:
    token = token_of(value)
    assert re.fullmatch(r"[-_=A-Za-z0-9]+", token)  # KV: [-/_=.A-Za-z0-9]; subjects: no . * >
    assert id_of_token(token) == value
    if value.isascii():  # the tokens of ids already on a server do not change
        assert token == _old_token(value)


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(st.text(_ID_CHARACTERS | st.sampled_from("-_.:"), min_size=1, max_size=40))
def test_any_request_id_is_one_record_on_nats_in_nfc_or_nfd(
    connection: NatsConnection, value: str
) -> None:
    try:
        nfc = check_request_id(value)
    except UnsafeRequestIdError:
        assume(False)
        return
    nfd = unicodedata.normalize("NFD", nfc)
    suffix = uuid.uuid4().hex[:6]  # one record per example on the shared server
    nfc, nfd = f"{nfc}-{suffix}", f"{nfd}-{suffix}"
    store = blocking_store(connection)
    assert store.create(nfd, {"request_id": nfc, "events": []})
    assert store.append(nfc, [_raw({"type": "note"})], {}).count == 1
    assert store.exists(nfd) and store.exists(nfc)
    assert nfc in store.list_ids()
    assert json.loads(store.load(nfd))["events"] == [{"type": "note"}]


def test_an_id_typed_in_nfd_or_nfc_is_one_record(connection: NatsConnection) -> None:
    store = blocking_store(connection)
    nfc = "요청-1:é.ß"
    nfd = unicodedata.normalize("NFD", nfc)
    assert nfd != nfc
    assert store.create(nfd, {"request_id": nfc, "events": [{"type": "created"}]})
    assert not store.create(nfc, {"request_id": nfc, "events": []})
    assert store.append(nfc, [_raw({"type": "note"})], {}).count == 2
    assert store.append(nfd, [_raw({"type": "note"})], {}, key="k").count == 3
    assert store.list_ids() == [nfc]
    assert store.exists(nfd) and store.version(nfd) == store.version(nfc)
    read = store.read(nfd, tail=16)
    assert isinstance(read, IndexedParts) and read.count == 3
    assert json.loads(store.load(nfd)) == json.loads(store.load(nfc))


# --- versions -----------------------------------------------------------------------------------


def test_version_of_an_unseen_request_asks_no_server(
    own_nats_server: Any, nats_connect: Callable[..., NatsConnection]
) -> None:
    # The actor asks version() on the event loop per projection: it must never wait on the
    # server (here a call would retry for retry_seconds, then raise StorageError).
    connection = nats_connect(own_nats_server.settings(retry_seconds=1.0))
    store = blocking_store(connection)
    store.create("req-1", {"request_id": "req-1", "events": [{"type": "created"}]})
    assert not store.exists("req-gone")
    created = store.version("req-1")
    own_nats_server.stop()
    unseen = store.version("req-2")
    assert unseen is UNSEEN and unseen != created and unseen is not None
    assert store.version("req-1") == created  # seen: what this store wrote
    assert store.version("req-gone") is None  # looked for: none
    with pytest.raises(StorageError, match=r"did not answer a record read for 1 s"):
        store.read("req-2", tail=16)  # the read waits on the server


def test_a_read_or_lookup_records_the_version_it_saw(connection: NatsConnection) -> None:
    writer, reader = blocking_store(connection), blocking_store(connection)
    writer.create("req-1", {"request_id": "req-1", "events": [{"type": "created"}]})
    assert reader.version("req-1") in (UNSEEN, writer.version("req-1"))
    read = reader.read("req-1", tail=16)
    assert reader.version("req-1") == read.version == writer.version("req-1")
    with pytest.raises(UnknownRequestError, match=r"^no request 'req-2'"):
        reader.read("req-2", tail=16)
    assert reader.version("req-2") is None
    writer.create("req-2", {"request_id": "req-2", "events": []})  # the watch brings it...
    assert writer.version("req-2") is not None
    assert reader.exists("req-2")  # ...or the next look-up does
    assert reader.version("req-2") == writer.version("req-2")


def test_an_appends_answer_holds_at_most_the_heads_tail_of_its_events(
    connection: NatsConnection,
) -> None:
    # An import-sized append answers as a read does: the last HEAD_TAIL events, not all.
    store = blocking_store(connection)
    store.create("req-1", {"request_id": "req-1", "events": [{"type": "created"}]})
    events = [{"type": "note", "summary": str(number)} for number in range(HEAD_TAIL + 44)]
    appended = store.append("req-1", [_raw(event) for event in events], {"status": "x"})
    parts = appended.parts
    assert parts is not None and parts.count == 1 + len(events)
    assert [json.loads(bytes(raw)) for raw in parts.tail] == events[-HEAD_TAIL:]
    assert parts == store.read("req-1", tail=HEAD_TAIL)
    fields_only = store.append("req-1", [], {"status": "y"}).parts
    assert fields_only is not None and fields_only.tail == []
    assert fields_only.fields["status"] == "y" and fields_only.count == parts.count
