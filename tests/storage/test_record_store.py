"""The ``RecordStore`` protocol, run against every implementation through the ``record_store``
fixture. A new backend joins by adding its ``pytest.param`` to ``STORES``; file-format details
(the index, the byte layout) are tested in test_record_index and test_record_files."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Hashable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import msgspec
import pytest

from teams_runtime.codecs.request_ids import MAX_REQUEST_ID_BYTES
from teams_runtime.codecs.request_records import decode_any
from teams_runtime.demo import sample_record
from teams_runtime.exceptions import RecordError, UnknownRequestError, UnsafeRequestIdError
from teams_runtime.storage import (
    FileRecordStore,
    IndexedParts,
    ParsedRecord,
    RecordRead,
    RecordStore,
    Workspace,
)
from teams_runtime.storage.nats.blocking_faces import blocking_store

from ..support.reference import reference_role

NewStore = Callable[[], RecordStore]


def _file_stores(root: Path, request: pytest.FixtureRequest) -> NewStore:
    return lambda: FileRecordStore(Workspace(root))


def _nats_stores(root: Path, request: pytest.FixtureRequest) -> NewStore:
    settings = request.getfixturevalue("nats_server").settings()  # a team of its own
    connect = request.getfixturevalue("nats_connect")

    def new() -> RecordStore:
        connection = connect(settings)  # another writer: a connection of its own
        return blocking_store(connection)

    return new


# Each entry makes, for a test's own empty folder (or server prefix), a function that opens a
# store on it: every call is another store object (another writer) on the same records.
STORES = [pytest.param(_file_stores, id="file"), pytest.param(_nats_stores, id="nats")]


@pytest.fixture(params=STORES)
def new_store(request: pytest.FixtureRequest, tmp_path: Path) -> NewStore:
    factory: Callable[[Path, pytest.FixtureRequest], NewStore] = request.param
    return factory(tmp_path, request)


@pytest.fixture
def record_store(new_store: NewStore) -> RecordStore:
    return new_store()


def _raw(event: dict[str, Any]) -> msgspec.Raw:
    return msgspec.Raw(msgspec.json.encode(event))


def _note(writer: str, number: int) -> dict[str, Any]:
    return {"timestamp": "t", "type": "note", "actor": writer, "summary": f"{writer}:{number}"}


def _held_events(read: RecordRead) -> tuple[int, list[Any]]:
    """The record's event count and the (last) events the read holds, decoded."""
    if isinstance(read, IndexedParts):
        return read.count, [decode_any(raw) for raw in read.tail]
    events = read.fields["events"]
    return len(events), [decode_any(raw) for raw in events]


def _other_fields(read: RecordRead) -> dict[str, Any]:
    fields: dict[str, Any] = json.loads(msgspec.json.encode(read.fields))
    return {key: value for key, value in fields.items() if key != "events"}


def _stored(store: RecordStore, request_id: str) -> dict[str, Any]:
    record: dict[str, Any] = json.loads(store.load(request_id))
    return record


# --- create, exists, list_ids -----------------------------------------------------------------


def test_create_stores_a_new_record_once(record_store: RecordStore) -> None:
    source = sample_record(10, "req-1")
    assert not record_store.exists("req-1")
    assert record_store.create("req-1", source) is True
    assert record_store.exists("req-1")
    before, version = record_store.load("req-1"), record_store.version("req-1")
    other = {"request_id": "req-1", "status": "overwritten?", "events": []}
    assert record_store.create("req-1", other) is False
    assert record_store.load("req-1") == before  # untouched
    assert record_store.version("req-1") == version
    assert _stored(record_store, "req-1") == source


def test_a_record_created_without_events_gets_an_empty_history(record_store: RecordStore) -> None:
    assert record_store.create("req-1", {"request_id": "req-1", "status": "queued"})
    assert _stored(record_store, "req-1") == {
        "request_id": "req-1",
        "status": "queued",
        "events": [],
    }
    assert _held_events(record_store.read("req-1", tail=16)) == (0, [])


def test_a_new_record_needs_a_list_of_events(record_store: RecordStore) -> None:
    with pytest.raises(RecordError, match=r"^a new request record needs `events` to be a list\.$"):
        record_store.create("req-1", {"request_id": "req-1", "events": "none"})
    assert not record_store.exists("req-1")
    assert record_store.list_ids() == []


def test_list_ids_is_sorted(record_store: RecordStore) -> None:
    assert record_store.list_ids() == []
    for request_id in ("req-b", "req-a", "req-10", "req-2"):
        record_store.create(request_id, sample_record(1, request_id))
    assert record_store.list_ids() == ["req-10", "req-2", "req-a", "req-b"]


# --- version ------------------------------------------------------------------------------------


def test_version_changes_on_every_append_and_only_then(record_store: RecordStore) -> None:
    assert not record_store.exists("req-1")  # a NATS store knows no more before it looks
    assert record_store.version("req-1") is None
    record_store.create("req-1", sample_record(5, "req-1"))
    versions: list[Hashable] = [record_store.version("req-1")]
    for number in range(5):
        record_store.read("req-1", tail=16)
        record_store.read("req-1", tail=None)
        record_store.load("req-1")
        assert record_store.version("req-1") == versions[-1]  # reads change nothing
        record_store.append("req-1", [_raw(_note("w", number))], {})
        versions.append(record_store.version("req-1"))
        assert versions[-1] != versions[-2]
    assert None not in versions
    assert len(set(versions)) == len(versions)
    record_store.append("req-1", [], {"status": "done"})  # fields only: a change all the same
    assert record_store.version("req-1") != versions[-1]


# --- read and load ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("events", "tail"),
    [
        pytest.param(40, 16, id="tail-16"),
        pytest.param(40, None, id="every-event"),
        pytest.param(5, 16, id="fewer-than-the-tail"),
        pytest.param(0, 16, id="no-events"),
    ],
)
def test_read_holds_the_fields_and_the_events_asked_for(
    record_store: RecordStore, events: int, tail: int | None
) -> None:
    source = sample_record(events, "req-1")
    record_store.create("req-1", source)
    read = record_store.read("req-1", tail=tail)
    assert isinstance(read, IndexedParts | ParsedRecord)
    assert read.version == record_store.version("req-1")
    count, held = _held_events(read)
    assert count == events
    wanted = events if tail is None else min(tail, events)
    assert len(held) >= wanted
    assert held == source["events"][len(source["events"]) - len(held) :]  # the last ones, in order
    assert list(read.fields) == list(source)  # every top-level field, in the record's order
    assert _other_fields(read) == {key: value for key, value in source.items() if key != "events"}
    if isinstance(read, IndexedParts):
        assert read.covers(wanted)
        newest: dict[str, int] = {}
        for position, event in enumerate(source["events"]):
            if (role := reference_role(event)) is not None:
                newest[role] = position
        assert {role: position for role, (position, _) in read.evidence.items()} == newest
        for position, raw in read.evidence.values():
            assert decode_any(raw) == source["events"][position]


def test_load_returns_the_bytes_of_the_record(record_store: RecordStore) -> None:
    source = sample_record(20, "req-1") | {"scope": "Ünï — 日本語", "extra": {"kept": [1, None]}}
    record_store.create("req-1", source)
    data = record_store.load("req-1")
    assert isinstance(data, bytes)
    assert json.loads(data) == source
    assert list(json.loads(data)) == list(source)


# --- append -------------------------------------------------------------------------------------


def test_append_adds_events_and_sets_fields_in_one_write(record_store: RecordStore) -> None:
    source = sample_record(30, "req-1")
    record_store.create("req-1", source)
    before = record_store.version("req-1")
    new = [_note("qa", 1), _note("qa", 2)]
    updates = {"status": "completed", "result": {"role": "qa"}, "new_key": [1, "two"]}
    appended = record_store.append("req-1", [_raw(event) for event in new], updates)
    assert appended.read_version == before
    assert appended.parts.version == record_store.version("req-1") != before
    assert appended.parts.count == 32
    assert [decode_any(raw) for raw in appended.parts.tail][-2:] == new
    assert json.loads(msgspec.json.encode(appended.parts.fields))["status"] == "completed"
    stored = _stored(record_store, "req-1")
    assert stored["events"] == source["events"] + new
    assert (stored["status"], stored["result"], stored["new_key"]) == (
        "completed",
        {"role": "qa"},
        [1, "two"],
    )
    assert [key for key in stored if key in source] == list(source)  # keys keep their places
    count, held = _held_events(record_store.read("req-1", tail=16))
    assert count == 32 and held[-2:] == new


def test_an_event_that_cannot_be_laid_out_is_refused_by_position(record_store: RecordStore) -> None:
    record_store.create("req-1", sample_record(3, "req-1"))
    before = record_store.load("req-1")
    events = [_raw(_note("w", 0)), msgspec.Raw(b'{"type": ')]
    with pytest.raises(RecordError, match=r"^an appended event: event 1 cannot be laid out again"):
        record_store.append("req-1", events, {"status": "x"})
    assert record_store.load("req-1") == before


def test_appends_to_an_empty_history(record_store: RecordStore) -> None:
    record_store.create("req-1", {"request_id": "req-1", "events": []})
    assert record_store.append("req-1", [], {"status": "x"}).parts.count == 0
    assert record_store.append("req-1", [_raw(_note("a", 0))], {}).parts.count == 1
    assert record_store.append("req-1", [_raw(_note("a", 1))], {}).parts.count == 2
    assert _stored(record_store, "req-1") == {
        "request_id": "req-1",
        "events": [_note("a", 0), _note("a", 1)],
        "status": "x",
    }


def test_events_cannot_be_replaced_through_updates(record_store: RecordStore) -> None:
    record_store.create("req-1", sample_record(5, "req-1"))
    before, version = record_store.load("req-1"), record_store.version("req-1")
    with pytest.raises(RecordError, match=r"^`events` cannot be set directly; append events"):
        record_store.append("req-1", [], {"events": []})
    assert record_store.load("req-1") == before
    assert record_store.version("req-1") == version


def test_writers_never_lose_each_others_events(
    record_store: RecordStore, new_store: NewStore
) -> None:
    record_store.create("req-1", sample_record(5, "req-1"))
    writers, appends = 4, 25
    start = threading.Barrier(writers)

    def write(name: str) -> None:
        store = new_store()  # another writer: its own store object
        start.wait(timeout=10)
        for number in range(appends):
            store.append("req-1", [_raw(_note(name, number))], {"status": name})

    with ThreadPoolExecutor(writers) as pool:
        list(pool.map(write, [f"w{n}" for n in range(writers)]))
    events = _stored(record_store, "req-1")["events"][5:]
    assert len(events) == writers * appends
    for n in range(writers):  # every event there, each writer's in its order
        mine = [event["summary"] for event in events if event["actor"] == f"w{n}"]
        assert mine == [f"w{n}:{number}" for number in range(appends)]
    assert _held_events(record_store.read("req-1", tail=16))[0] == 5 + writers * appends


def test_expect_writes_only_while_the_fields_hold_exactly_those_values(
    record_store: RecordStore,
) -> None:
    record_store.create("req-1", {**sample_record(3, "req-1"), "status": "in_progress", "hops": 1})
    before = record_store.load("req-1")
    for expect in (
        {"hops": 2},  # another writer moved it on
        {"hops": True},  # JSON true is not 1
        {"hops": 1.0},  # nor is 1.0
        {"hops": 1, "status": "failed"},
        {"hops": 1, "owner": "qa"},  # absent: null
    ):
        refused = record_store.append("req-1", [_raw(_note("qa", 1))], {"hops": 2}, expect=expect)
        assert (refused.refused, refused.applied, refused.parts) == (True, False, None), expect
        assert refused.count == 3
        named = {"hops": 1, "status": "in_progress"}
        assert refused.fields == {key: named[key] for key in expect if key in named}
    assert record_store.load("req-1") == before  # nothing of any of them was written
    written = record_store.append(
        "req-1",
        [_raw(_note("qa", 1))],
        {"hops": 2},
        expect={"hops": 1, "status": "in_progress", "owner": None},
    )
    assert (written.refused, written.applied, written.count, written.fields) == (False, True, 4, {})
    assert _stored(record_store, "req-1")["hops"] == 2


def test_compare_and_set_writers_never_lose_an_increment(
    record_store: RecordStore, new_store: NewStore
) -> None:
    # Each writer reads the count once, then writes count + 1 expecting what it read; a refusal
    # answers the count now, so it decides again without reading. No increment is lost, none
    # is counted twice: the count ends equal to the events written.
    record_store.create("req-1", sample_record(2, "req-1"))
    writers, increments = 4, 12
    start = threading.Barrier(writers)
    refusals = [0] * writers

    def write(number: int) -> None:
        store = new_store()  # another writer: its own store object
        start.wait(timeout=10)
        hops = None
        for step in range(increments):
            while True:
                event = _raw(_note(f"w{number}", step))
                appended = store.append("req-1", [event], {"hops": (hops or 0) + 1},
                                        expect={"hops": hops})  # fmt: skip
                if not appended.refused:
                    hops = (hops or 0) + 1
                    break
                refusals[number] += 1
                hops = appended.fields.get("hops")

    with ThreadPoolExecutor(writers) as pool:
        list(pool.map(write, range(writers)))
    stored = _stored(record_store, "req-1")
    assert stored["hops"] == writers * increments == len(stored["events"]) - 2
    assert sum(refusals) >= writers - 1  # all expected no count at first: one wrote it


# --- ids ----------------------------------------------------------------------------------------

CALLS = [
    pytest.param(lambda store, request_id: store.read(request_id, tail=16), id="read"),
    pytest.param(lambda store, request_id: store.read(request_id, tail=None), id="read-all"),
    pytest.param(lambda store, request_id: store.load(request_id), id="load"),
    pytest.param(lambda store, request_id: store.append(request_id, [], {}), id="append"),
]


@pytest.mark.parametrize("call", CALLS)
def test_unknown_ids_raise_unknown_request(
    record_store: RecordStore, call: Callable[[RecordStore, str], object]
) -> None:
    record_store.create("req-1", sample_record(3, "req-1"))
    with pytest.raises(UnknownRequestError, match=r"^no request 'nope'"):
        call(record_store, "nope")
    assert record_store.version("nope") is None
    assert not record_store.exists("nope")
    assert record_store.list_ids() == ["req-1"]  # asking created nothing


@pytest.mark.parametrize(
    "request_id",
    [
        pytest.param("", id="empty"),
        pytest.param("..", id="dotdot"),
        pytest.param("../req-1", id="escape"),
        pytest.param("a/b", id="slash"),
        pytest.param("a\x00b", id="nul"),
        pytest.param("x" * (MAX_REQUEST_ID_BYTES + 1), id="too-long"),
    ],
)
def test_unsafe_ids_are_refused_by_every_method(record_store: RecordStore, request_id: str) -> None:
    calls: list[Callable[[], object]] = [
        lambda: record_store.version(request_id),
        lambda: record_store.exists(request_id),
        lambda: record_store.read(request_id, tail=16),
        lambda: record_store.load(request_id),
        lambda: record_store.create(request_id, {"events": []}),
        lambda: record_store.append(request_id, [], {}),
    ]
    for call in calls:
        with pytest.raises(UnsafeRequestIdError, match=r"^request id "):
            call()
    assert record_store.list_ids() == []
