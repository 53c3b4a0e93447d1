"""The record index: a cache that must never change an answer, only its cost."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from teams_runtime.codecs.config import PromptContextConfig
from teams_runtime.codecs.projection_reply import Projection
from teams_runtime.codecs.request_records import decode_any, encode_event, encode_record
from teams_runtime.demo import sample_record
from teams_runtime.exceptions import RecordError
from teams_runtime.policy.digest import digest_from_fields, digest_from_parts
from teams_runtime.policy.projection import project_request
from teams_runtime.storage.files import file_store as store
from teams_runtime.storage.files._index import (
    INDEX_TAIL,
    RecordIndex,
    encode_index,
    load_index,
)
from teams_runtime.storage.files._index_derivation import index_from_bytes
from teams_runtime.storage.local_files import file_version
from teams_runtime.storage.protocols import IndexedParts
from teams_runtime.storage.workspace import RecordPaths, Workspace

from ...support.reference import reference_role
from ...support.strategies import configs, event, events


def _paths(root: Path) -> RecordPaths:
    return Workspace(root).record_paths("req-1")


def _newest_evidence(history: list[Any]) -> dict[str, int]:
    newest: dict[str, int] = {}
    for position, item in enumerate(history):
        if (role := reference_role(item)) is not None:
            newest[role] = position
    return newest


def _check_consistent(paths: RecordPaths) -> None:
    on_disk = json.loads(paths.record.read_bytes())
    text = paths.record.read_text(encoding="utf-8")
    assert text == json.dumps(on_disk, indent=2, ensure_ascii=False) + "\n"  # canonical bytes
    parts = store.read_indexed_parts(paths)
    assert parts is not None
    history = on_disk["events"]
    assert parts.count == len(history)
    assert [decode_any(raw) for raw in parts.tail] == history[-INDEX_TAIL:]
    assert {role: position for role, (position, _) in parts.evidence.items()} == (
        _newest_evidence(history)
    )
    for position, raw in parts.evidence.values():
        assert decode_any(raw) == history[position]
    assert {**json.loads(msgspec.json.encode(parts.fields)), "events": history} == on_disk


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    initial=events,
    batches=st.lists(st.lists(event, max_size=3), max_size=5),
    status=st.text(max_size=5),
)
def test_index_matches_the_file_after_every_write(
    tmp_path_factory: pytest.TempPathFactory,
    initial: list[Any],
    batches: list[list[Any]],
    status: str,
) -> None:
    paths = _paths(tmp_path_factory.mktemp("ws"))
    store.create_record(paths, {"request_id": "req-1", "ünï": "ok", "events": initial})
    _check_consistent(paths)
    for batch in batches:
        objects = [item if isinstance(item, dict) else {"value": item} for item in batch]
        store.append_to_record(paths, [encode_event(o) for o in objects], {"status": status})
        _check_consistent(paths)


def test_a_stale_index_is_ignored_and_replaced(tmp_path: Path) -> None:
    paths = _paths(tmp_path)
    store.create_record(paths, sample_record(40, "req-1"))
    assert store.read_indexed_parts(paths) is not None
    record = json.loads(paths.record.read_bytes())
    record["events"] = record["events"][:10]
    paths.record.write_text(json.dumps(record))  # another program, another layout
    assert store.read_indexed_parts(paths) is None
    store.append_to_record(paths, [encode_event({"type": "note"})], {})
    _check_consistent(paths)
    assert store.read_indexed_parts(paths).count == 11  # type: ignore[union-attr]


def test_an_index_that_lies_is_not_believed(tmp_path: Path) -> None:
    paths = _paths(tmp_path)
    store.create_record(paths, sample_record(40, "req-1"))
    index = _decoded(paths.index.read_bytes())
    role, (position, (offset, length)) = next(iter(index.evidence.items()))
    lying = msgspec.structs.replace(
        index, evidence={**index.evidence, role: (position, (offset + 1, length))}
    )
    paths.index.write_bytes(encode_index(lying))  # even with a digest that matches
    assert store.read_indexed_parts(paths) is None


def test_an_index_with_wrong_tail_offsets_is_not_believed(tmp_path: Path) -> None:
    paths = _paths(tmp_path)
    store.create_record(paths, sample_record(40, "req-1"))
    index = _decoded(paths.index.read_bytes())
    for shift in (1, -3):
        lying = msgspec.structs.replace(
            index, tail=[(offset + shift, length) for offset, length in index.tail]
        )
        paths.index.write_bytes(encode_index(lying))
        assert store.read_indexed_parts(paths) is None


def test_garbage_index_is_ignored(tmp_path: Path) -> None:
    paths = _paths(tmp_path)
    store.create_record(paths, sample_record(5, "req-1"))
    paths.index.write_bytes(b"\x00garbage")
    assert store.read_indexed_parts(paths) is None
    store.append_to_record(paths, [encode_event({"type": "note"})], {})
    _check_consistent(paths)


def _decoded(data: bytes) -> RecordIndex:
    return msgspec.msgpack.decode(data[16:], type=RecordIndex)  # after its 16-byte digest


# --- a record another program wrote: the index derived from its bytes ---------------------


def _foreign(paths: RecordPaths, data: bytes) -> None:
    """Put a record in place the way another program would: its bytes, no index."""
    paths.record.parent.mkdir(parents=True, exist_ok=True)
    paths.record.write_bytes(data)
    paths.index.unlink(missing_ok=True)


def _first_answer(root: Path, config: PromptContextConfig) -> Projection:
    """The projection a ContextActor answers from the store's first read of ``req-1``."""
    tail = config.max_events if config.enabled else None  # as the ContextActor asks
    read = store.FileRecordStore(Workspace(root)).read("req-1", tail=tail)
    digest = (
        digest_from_parts(read, config)
        if isinstance(read, IndexedParts)
        else digest_from_fields(read.fields, config)
    )
    return digest.project()


def _written_index(tmp_path: Path, history: list[Any]) -> RecordIndex:
    """The index teams-runtime's own writer lays down for ``history``."""
    paths = Workspace(tmp_path / "written").record_paths("req-1")
    store.create_record(paths, {"request_id": "req-1", "status": "new", "events": history})
    index = load_index(paths, file_version(paths.record))
    assert index is not None
    return index


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(history=st.lists(event, max_size=300))
def test_an_index_derived_from_bytes_is_the_one_the_writer_keeps(
    tmp_path_factory: pytest.TempPathFactory, history: list[Any]
) -> None:
    tmp_path = tmp_path_factory.mktemp("derived")
    expected = _written_index(tmp_path, history)
    paths = Workspace(tmp_path / "written").record_paths("req-1")
    derived = index_from_bytes(paths, paths.record.read_bytes(), expected.record)
    assert derived == msgspec.structs.replace(expected, canonical=False)  # vouches for less


def test_a_first_read_keeps_an_index_and_the_next_read_uses_it(tmp_path: Path) -> None:
    paths = _paths(tmp_path)
    _foreign(paths, encode_record(sample_record(600, "req-1")))
    records = store.FileRecordStore(Workspace(tmp_path))
    first = records.read("req-1", tail=16)
    assert isinstance(first, IndexedParts)  # answered as if indexed: no full parse
    assert load_index(paths, file_version(paths.record)) is not None
    assert store.read_indexed_parts(paths) == first
    _check_consistent(paths)


@pytest.mark.parametrize(
    "layout",
    [
        lambda record: msgspec.json.encode(record),  # compact
        lambda record: json.dumps(record, indent=4).encode(),  # deeper indent
        lambda record: json.dumps(record, indent=2).encode().replace(b"\n    {", b"\n    \n    {"),
        # events first, then another list: the array's close is not the file's last one
        lambda record: encode_record({"events": record["events"], **record, "tags": [1, 2]}),
    ],
    ids=["compact", "indent-4", "blank-lines", "list-after-events"],
)
def test_any_other_layout_is_parsed_and_answers_the_same(
    tmp_path: Path, layout: Callable[[dict[str, Any]], bytes]
) -> None:
    record = sample_record(300, "req-1")
    data = layout(record)
    paths = _paths(tmp_path)
    _foreign(paths, data)
    config = PromptContextConfig()
    answer = _first_answer(tmp_path, config)
    expected = project_request(data, config)
    assert answer.fields == expected.fields
    assert answer.notice == expected.notice


def test_an_event_that_is_not_utf8_is_refused_clearly_not_put_in_a_prompt(tmp_path: Path) -> None:
    data = encode_record(sample_record(40, "req-1"))
    bad = data.replace(b"step 39", b"step \xff9", 1)
    paths = _paths(tmp_path)
    _foreign(paths, bad)
    with pytest.raises(RecordError, match="not valid UTF-8"):
        store.FileRecordStore(Workspace(tmp_path)).read("req-1", tail=16)
    assert not paths.index.exists()


def test_a_comma_inside_an_event_is_never_taken_for_a_boundary(tmp_path: Path) -> None:
    """Events whose own lines look like the writer's separators (a string-free nested array
    laid out at depth two by hand): the derived spans are checked, so the answer stays right."""
    history = [{"type": "role_report", "actor": "qa", "payload": {"role": "qa", "status": "ok"}}]
    history += [{"type": "note", "n": [index, index + 1]} for index in range(40)]
    data = encode_record({"request_id": "req-1", "events": history})
    tricky = data.replace(b'"n": [\n        ', b'"n": [\n    ').replace(b",\n        ", b",\n    ")
    paths = _paths(tmp_path)
    _foreign(paths, tricky)
    config = PromptContextConfig(recent_events=2, max_events=4)
    answer = _first_answer(tmp_path, config)
    assert answer.fields == project_request(tricky, config).fields


@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(history=st.lists(event, max_size=120), config=configs(), padding=st.sampled_from([0, 2000]))
def test_a_first_read_of_a_foreign_record_answers_as_the_policy(
    tmp_path_factory: pytest.TempPathFactory,
    history: list[Any],
    config: PromptContextConfig,
    padding: int,
) -> None:
    """Small records (read whole, index derived for one read) and large ones (index derived and
    kept) answer exactly as ``project_request``, on the first read and on the next."""
    root = tmp_path_factory.mktemp("foreign")
    record = {"request_id": "req-1", "status": "new", "pad": "p" * padding * 80, "events": history}
    data = encode_record(record)
    _foreign(Workspace(root).record_paths("req-1"), data)
    expected = project_request(data, config)
    assert _first_answer(root, config) == expected
    assert _first_answer(root, config) == expected  # through the index a large one kept
