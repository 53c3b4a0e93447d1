"""The record index: a cache that must never change an answer, only its cost."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from teams_runtime.actors.storage import record_files as store
from teams_runtime.actors.storage.record_index import INDEX_TAIL, RecordIndex, encode_index
from teams_runtime.actors.storage.workspace import RecordPaths, Workspace
from teams_runtime.codecs.records import decode_any, encode_event
from teams_runtime.demo import sample_record

from .reference import reference_role
from .strategies import event, events


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
