"""``import`` takes record files only: a file that is not a request record (an empty object,
an object naming no request, a list, a request id that is not text) is refused with one line
naming the file, exit 2, and nothing is written, whatever the other files given."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from teams_runtime.cli import main
from teams_runtime.codecs.request_records import encode_record
from teams_runtime.demo import sample_record

from ..support.cli_in_process import run_cli


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param("{}", "not a request record (it has no `request_id`)", id="empty-object"),
        pytest.param(
            '{"status": "completed", "events": []}',
            "not a request record (it has no `request_id`)",
            id="no-request-id",
        ),
        pytest.param("[1, 2]", "a request record must be a JSON object", id="a-list"),
        pytest.param('{"request_id": 7}', "its request_id is not text", id="id-not-text"),
    ],
)
def test_a_file_that_is_not_a_record_is_refused_and_nothing_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, message: str
) -> None:
    workspace = tmp_path / "ws"
    assert main(["init", str(workspace)]) == 0
    good = tmp_path / "files" / "req-1.json"
    good.parent.mkdir()
    good.write_bytes(encode_record(sample_record(5, "req-1")))
    bad = good.with_name("req-2.json")
    bad.write_text(text)
    capsys.readouterr()
    status, out, err = run_cli(capsys, "import", str(good), str(bad), "--workspace", str(workspace))
    assert (status, out) == (2, "")
    assert err.startswith(f"teams-runtime: error: {bad}: {message}")
    assert err.count("\n") == 1 and "Traceback" not in err
    assert list((workspace / ".teams_runtime" / "requests").iterdir()) == []  # not even req-1


def test_a_record_file_imports_and_the_count_reads_as_words(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    workspace = tmp_path / "ws"
    assert main(["init", str(workspace)]) == 0
    good = tmp_path / "req-1.json"
    good.write_bytes(encode_record(sample_record(5, "req-1")))
    capsys.readouterr()
    status, out, _ = run_cli(capsys, "import", str(good), "--workspace", str(workspace))
    assert status == 0
    assert out.splitlines() == ["Imported req-1 (5 events).", "Imported 1 of 1 request."]
    stored = workspace / ".teams_runtime" / "requests" / "req-1.json"
    assert json.loads(stored.read_bytes())["request_id"] == "req-1"
