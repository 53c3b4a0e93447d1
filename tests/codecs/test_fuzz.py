"""Decoder fuzzing: random bytes and mutated real records never crash with anything but ours.

Short in `just test`; `just fuzz` runs many more examples (TEAMS_RUNTIME_FUZZ_EXAMPLES).
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from teams_runtime import RecordError, project_request
from teams_runtime.codecs.request_records import decode_record, encode_record
from teams_runtime.demo import sample_record
from teams_runtime.storage import Workspace
from teams_runtime.storage.files import file_store as store

EXAMPLES = int(os.environ.get("TEAMS_RUNTIME_FUZZ_EXAMPLES", "150"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
REAL = encode_record(sample_record(12, "req-fuzz"))


@st.composite
def mutated(draw: st.DrawFn) -> bytes:
    data = bytearray(REAL)
    for _ in range(draw(st.integers(1, 8))):
        position = draw(st.integers(0, len(data) - 1))
        action = draw(st.sampled_from(["flip", "cut", "insert", "delete"]))
        if action == "flip":
            data[position] = draw(st.integers(0, 255))
        elif action == "cut":
            del data[position:]
            if not data:
                break
        elif action == "insert":
            data[position:position] = draw(st.binary(min_size=1, max_size=8))
        else:
            del data[position : position + draw(st.integers(1, 40))]
        if not data:
            break
    return bytes(data)


def _project_or_typed_error(data: bytes) -> None:
    try:
        decode_record(data, "fuzz")
        projection = project_request(data)
    except RecordError:
        return
    assert projection.included_events <= projection.total_events
    b"".join(projection.iter_record_json()).decode("utf-8")  # renders, as a prompt would


@FUZZ
@given(st.binary(max_size=400))
def test_random_bytes(data: bytes) -> None:
    _project_or_typed_error(data)


@FUZZ
@given(mutated())
def test_mutated_real_records(data: bytes) -> None:
    _project_or_typed_error(data)


@FUZZ
@given(data=mutated(), garbage=st.binary(max_size=200))
def test_mutated_files_and_indexes_on_disk(
    tmp_path_factory: pytest.TempPathFactory, data: bytes, garbage: bytes
) -> None:
    workspace = Workspace(tmp_path_factory.mktemp("ws"))
    paths = workspace.record_paths("req-fuzz")
    store.create_record(paths, sample_record(12, "req-fuzz"))
    paths.record.write_bytes(data)  # another program mangled it: the index is now stale
    if garbage:
        paths.index.write_bytes(garbage)
    assert store.read_indexed_parts(paths) is None
    try:  # every read path: whole, and through an index derived from the bytes
        store.FileRecordStore(workspace).read("req-fuzz", tail=None)
        store.FileRecordStore(workspace).read("req-fuzz", tail=16)
    except RecordError:
        return


def test_the_fuzz_corpus_is_a_real_record() -> None:
    projection = project_request(REAL)
    assert projection.total_events == 12 and not projection.compacted
