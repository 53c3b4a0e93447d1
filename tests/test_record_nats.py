"""What only the NATS store promises, on a real ``nats-server`` (the protocol itself is
test_record_store's): the same projections, prompts and record bytes as the file store for any
history; appends from several processes at once; idempotent appends across hosts; an append a
dead writer left half done is set aside."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from teams_runtime.actors.context import open_context
from teams_runtime.actors.storage import (
    FileRecordStore,
    IndexedParts,
    RecordStore,
    Workspace,
    record_nats,
)
from teams_runtime.actors.storage.nats_connection import NatsConnection
from teams_runtime.actors.storage.record_nats import NatsRecordStore
from teams_runtime.codecs.config import NatsSettings, PromptContextConfig
from teams_runtime.codecs.messages import MessageEnvelope
from teams_runtime.codecs.records import encode_json
from teams_runtime.exceptions import RecordError
from teams_runtime.prompts import build_prompt

from .strategies import configs, event


@pytest.fixture
def nats_settings(nats_server: Any) -> NatsSettings:
    settings: NatsSettings = nats_server.settings()
    return settings


@pytest.fixture
def connection(nats_settings: NatsSettings) -> Iterator[NatsConnection]:
    opened = NatsConnection(nats_settings)
    try:
        yield opened
    finally:
        opened.close()


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
    }
)


async def _projections(store: RecordStore, request_id: str, config: PromptContextConfig) -> Any:
    envelope = MessageEnvelope(request_id=request_id, sender="user", target="qa", scope="s")
    async with open_context("unused", config, store=store) as context:
        projection = await context.project(request_id)
        again = await context.project(request_id)  # from the actor's cache this time
    prompt = build_prompt("task", role="qa", projection=projection, envelope=envelope).text()
    return msgspec.json.encode(projection), msgspec.json.encode(again), prompt


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
    with tempfile.TemporaryDirectory() as folder:
        stores: list[RecordStore] = [
            FileRecordStore(Workspace(Path(folder))),
            NatsRecordStore(connection),
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
                )
                for store in stores
            ]
            file_answer, nats_answer = answers
            assert (nats_answer.count, nats_answer.applied, nats_answer.refused) == (
                file_answer.count,
                file_answer.applied,
                file_answer.refused,
            )
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
        assert nats_read.evidence == file_read.evidence
        assert nats_read.tail == file_read.tail[-len(nats_read.tail) :] if nats_read.tail else True
        file_views = anyio.run(_projections, file_store, request_id, config)
        nats_views = anyio.run(_projections, nats_store, request_id, config)
        assert nats_views == file_views  # projection, cached projection and prompt


# --- several writers --------------------------------------------------------------------------

_WRITER = """
import sys, msgspec
from teams_runtime.actors.storage.nats_connection import NatsConnection
from teams_runtime.actors.storage import record_nats
from teams_runtime.actors.storage.record_nats import NatsRecordStore
from teams_runtime.codecs.config import NatsSettings
settings = msgspec.json.decode(sys.argv[1].encode(), type=NatsSettings)
name, appends = sys.argv[2], int(sys.argv[3])
connection = NatsConnection(settings)
store = NatsRecordStore(connection)
print("ready", flush=True)
sys.stdin.readline()  # start together
for number in range(appends):
    event = {"timestamp": "t", "type": "note", "actor": name, "summary": f"{name}:{number}"}
    store.append("req-1", [msgspec.Raw(msgspec.json.encode(event))], {"status": name})
connection.close()
"""


def test_four_processes_appending_at_once_lose_nothing_and_keep_their_order(
    connection: NatsConnection, nats_settings: NatsSettings
) -> None:
    store = NatsRecordStore(connection)
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
    connection: NatsConnection, nats_settings: NatsSettings
) -> None:
    other_host = NatsConnection(nats_settings)
    try:
        here, there = NatsRecordStore(connection), NatsRecordStore(other_host)
        here.create("req-1", {"request_id": "req-1", "events": []})
        note = {"timestamp": "t", "type": "note", "append_key": "env-1"}
        first = here.append("req-1", [_raw(note)], {"status": "a"}, key="env-1")
        again = there.append("req-1", [_raw(note)], {"status": "b"}, key="env-1")
        assert (first.applied, first.count) == (True, 1)
        assert (again.applied, again.count) == (False, 1)
        stored = json.loads(there.load("req-1"))
        assert (len(stored["events"]), stored["status"]) == (1, "a")
    finally:
        other_host.close()


def test_an_append_a_dead_writer_left_half_done_is_set_aside(
    connection: NatsConnection,
) -> None:
    store = NatsRecordStore(connection)
    store.create("req-1", {"request_id": "req-1", "events": [{"type": "created"}]})
    names = connection.names
    # A writer published an event a minute ago and died before committing the head.
    headers = {"Tr-Append": "dead", "Tr-Time": f"{time.time() - 60:.3f}"}
    subject = names.event_subject("req-1", None)
    connection.call(lambda: connection.js.publish(subject, b'{"type": "lost"}', headers=headers))
    appended = store.append("req-1", [_raw({"type": "after"})], {})
    assert appended.count == 2
    stored = json.loads(store.load("req-1"))
    assert [item["type"] for item in stored["events"]] == ["created", "after"]
    read = store.read("req-1", tail=None)
    assert len(read.fields["events"]) == 2


def test_a_fresh_half_done_append_is_waited_for_not_set_aside(
    connection: NatsConnection, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = NatsRecordStore(connection)
    store.create("req-1", {"request_id": "req-1", "events": []})
    headers = {"Tr-Append": "slow", "Tr-Time": f"{time.time():.3f}"}
    subject = connection.names.event_subject("req-1", None)
    connection.call(lambda: connection.js.publish(subject, b'{"type": "pending"}', headers=headers))
    other = NatsRecordStore(connection)
    before = other.version("req-1")
    # Its writer may still commit it: an append waits (here it gives up, nothing written).
    monkeypatch.setattr(record_nats, "_APPEND_SECONDS", 0.5)
    with pytest.raises(RecordError, match=r"other writers kept the request busy for 0.5 s"):
        other.append("req-1", [_raw({"type": "x"})], {})
    assert other.version("req-1") == before
    assert json.loads(store.load("req-1"))["events"] == []


def test_a_head_another_program_wrote_is_a_clear_error(connection: NatsConnection) -> None:
    store = NatsRecordStore(connection)
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
    # What `NatsConnection.call` does when the server's answer to a commit times out: it runs
    # the same append again. Another writer's append in between must not make it write twice.
    store = NatsRecordStore(connection)
    store.create("req-1", {"request_id": "req-1", "events": []})
    prepared = record_nats._prepare([_raw({"type": "mine"})])
    append = record_nats._Append(store, "req-1", prepared, {"status": "x"}, "", {})
    first = connection.call(append.run)
    store.append("req-1", [_raw({"type": "other"})], {})
    again = connection.call(append.run)
    assert (first.applied, first.count) == (True, 1)
    assert (again.applied, again.count) == (True, 1)
    stored = json.loads(store.load("req-1"))
    assert [event["type"] for event in stored["events"]] == ["mine", "other"]
