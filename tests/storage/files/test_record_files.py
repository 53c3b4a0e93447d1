"""The file record store's own promises (the protocol's are in test_record_store): several OS
processes appending to one record lose nothing and keep order; lock and temp files are private;
the record keeps its mode."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from teams_runtime.codecs.request_records import encode_record
from teams_runtime.demo import sample_record
from teams_runtime.storage import Workspace
from teams_runtime.storage.files import file_store as store

from ...support.scripts import APPENDER


def _record(root: Path, events: int = 5) -> Path:
    path = Workspace(root).request_path("req-1")
    path.parent.mkdir(parents=True)
    path.write_bytes(encode_record(sample_record(events, "req-1")))
    return path


def test_four_processes_append_one_hundred_events_each(tmp_path: Path) -> None:
    path = _record(tmp_path)
    writers = [
        subprocess.Popen([sys.executable, "-c", APPENDER, str(tmp_path), f"w{n}", "100", "quiet"])
        for n in range(4)
    ]
    reads = 0
    deadline = time.monotonic() + 120
    while any(writer.poll() is None for writer in writers):
        assert time.monotonic() < deadline, "writers did not finish"
        json.loads(path.read_bytes())  # valid after every write, never torn
        reads += 1
    assert [writer.returncode for writer in writers] == [0, 0, 0, 0]
    notes = [event["summary"] for event in json.loads(path.read_bytes())["events"][5:]]
    assert len(notes) == 400
    for n in range(4):
        assert [note for note in notes if note.startswith(f"w{n}:")] == [
            f"w{n}:{i}" for i in range(100)
        ]
    assert reads > 0
    assert not list(path.parent.glob("*.tmp"))


def test_lock_and_temp_files_are_private(tmp_path: Path) -> None:
    paths = Workspace(tmp_path).record_paths("req-1")
    store.create_record(paths, sample_record(5, "req-1"))
    assert paths.lock.stat().st_mode & 0o077 == 0
    assert paths.record.stat().st_mode & 0o777 == 0o644
    paths.record.chmod(0o640)
    store.append_to_record(paths, [], {"status": "x"})
    assert paths.record.stat().st_mode & 0o777 == 0o640  # the record keeps its mode


def test_the_record_file_is_canonical_json(tmp_path: Path) -> None:
    paths = Workspace(tmp_path).record_paths("req-1")
    source = sample_record(5, "req-1") | {"scope": "Ünï"}
    store.create_record(paths, source)
    assert paths.record.read_bytes() == encode_record(source)
    text = paths.record.read_text(encoding="utf-8")
    assert text == json.dumps(source, indent=2, ensure_ascii=False) + "\n"
