"""Several OS processes appending to one record at once: nothing lost, order kept."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from teams_runtime.actors.storage import Workspace
from teams_runtime.cli import main
from teams_runtime.codecs.records import encode_record
from teams_runtime.demo import sample_record

from .scripts import APPENDER


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


def test_cli_append_from_lines_writes_all_or_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _record(tmp_path)
    good = tmp_path / "good.jsonl"
    good.write_text('{"type": "a", "actor": "qa"}\n\n{"type": "b", "payload": {"x": 1}}\n')
    assert main(["append", "req-1", "--workspace", str(tmp_path), "--from", str(good)]) == 0
    assert "Appended 2 event(s) to req-1; it now has 7 events." in capsys.readouterr().out
    before = path.read_bytes()
    for content in ('{"type": "c"}\nnot json\n', '{"type": "c"}\n[1, 2]\n', "\n"):
        bad = tmp_path / "bad.jsonl"
        bad.write_text(content)
        assert main(["append", "req-1", "--workspace", str(tmp_path), "--from", str(bad)]) == 2
        out, err = capsys.readouterr()
        assert out == "" and err.startswith("teams-runtime: error: ")
        assert path.read_bytes() == before


def test_cli_append_with_flags(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _record(tmp_path)
    payload = '{"role": "qa", "status": "done"}'
    argv = ["append", "req-1", "--workspace", str(tmp_path), "--type", "role_report",
            "--actor", "qa", "--summary", "ok", "--payload", payload]  # fmt: skip
    assert main(argv) == 0
    last = json.loads(path.read_bytes())["events"][-1]
    assert (last["type"], last["actor"], last["payload"]) == (
        "role_report",
        "qa",
        {"role": "qa", "status": "done"},
    )
    assert main([*argv[:3], str(tmp_path), "--type", "x"]) == 2
    assert "missing: --actor, --summary" in capsys.readouterr().err
    assert main([*argv[:-1], "[1]"]) == 2
    assert "--payload must be a JSON object" in capsys.readouterr().err
    assert main(["append", "../evil", "--workspace", str(tmp_path), "--type", "x", "--actor", "a",
                 "--summary", "s"]) == 2  # fmt: skip
    assert "not a safe file name" in capsys.readouterr().err
    assert main(["append", "nope", "--workspace", str(tmp_path), "--type", "x", "--actor", "a",
                 "--summary", "s"]) == 2  # fmt: skip
    assert "no request 'nope'" in capsys.readouterr().err
