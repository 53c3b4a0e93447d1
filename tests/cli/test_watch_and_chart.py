"""`status --watch` (through a pseudo-terminal, and as plain text into a pipe) and
`metrics --chart` (the bars drawn for known prompt records)."""

from __future__ import annotations

import json
import os
import pty
import select
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from teams_runtime.cli import main
from teams_runtime.cli._metrics import BAR_WIDTH
from teams_runtime.codecs.prompt_records import PromptRecord, encode_prompt_record


def _record(timestamp: str, **fields: Any) -> PromptRecord:
    values: dict[str, Any] = {
        "timestamp": timestamp,
        "role": "qa",
        "purpose": "role_task",
        "request_id": "req-1",
        "enabled": True,
        "recent_events": 8,
        "max_events": 16,
        "total_events": 40,
        "included_events": 16,
        "omitted_events": 24,
        "compacted": True,
        "eligible": True,
        "backfilled_roles": [],
        "prompt_chars": 1000,
        "full_history_chars": 4000,
    }
    return PromptRecord(**(values | fields))


def _workspace(tmp_path: Path, records: list[PromptRecord]) -> Path:
    root = tmp_path / "ws"
    assert main(["init", str(root)]) == 0
    logs = root / ".teams_runtime" / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    lines = "".join(encode_prompt_record(record) + "\n" for record in records)
    (logs / "prompt_context.jsonl").write_text(lines + "torn line\n")
    return root


def _bars(sent: int, full: int) -> tuple[str, str]:
    return "█" * sent + "·" * (BAR_WIDTH - sent), "█" * full + "·" * (BAR_WIDTH - full)


def test_chart_draws_tokens_per_day_against_each_calls_own_estimate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _workspace(
        tmp_path,
        [
            # 1,000 characters were 250 tokens: the 4,000 of full history are 1,000 tokens.
            _record("2026-11-30T09:00:00+01:00", prompt_tokens=250, completion_tokens=9),
            # 2,000 characters were 1,000 tokens (another model): 3,000 full are 1,500.
            _record(
                "2026-11-30T17:00:00+01:00",
                prompt_chars=2000,
                full_history_chars=3000,
                prompt_tokens=1000,
            ),
            _record("2026-12-01T08:00:00+01:00", prompt_tokens=500),  # full: 2,000
            _record("2026-12-01T09:00:00+01:00"),  # no tokens: not counted
            _record("2026-12-01T10:00:00+01:00", enabled=False, prompt_tokens=9999),
        ],
    )
    capsys.readouterr()
    assert main(["metrics", "--chart", "--workspace", str(root)]) == 0
    lines = capsys.readouterr().out.splitlines()
    most = 2500  # the longest bar: 30 November's full history
    first = _bars(round(BAR_WIDTH * 1250 / most), BAR_WIDTH)
    second = _bars(round(BAR_WIDTH * 500 / most), round(BAR_WIDTH * 2000 / most))
    assert lines == [
        "input tokens per day: sent (compaction on) against the full-history estimate",
        f"2026-11-30  sent {first[0]}        1,250",
        f"            full {first[1]}        2,500  saved 50.0%",
        f"2026-12-01  sent {second[0]}          500",
        f"            full {second[1]}        2,000  saved 75.0%",
        "note: 1 prompt without reported tokens not counted.",
        "note: 1 prompt with compaction off not shown.",
        "note: 1 skipped line.",
    ]
    assert main(["metrics", "--chart", "--per", "hour", "--workspace", str(root)]) == 0
    hourly = capsys.readouterr().out.splitlines()
    assert [line[:16] for line in hourly[1:8:2]] == [
        "2026-11-30 09h  ",
        "2026-11-30 17h  ",
        "2026-12-01 08h  ",
        "2026-12-01 09h  ",  # its characters count, its tokens do not exist: a zero bar
    ]


def test_chart_falls_back_to_characters_when_no_tokens_were_reported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _workspace(tmp_path, [_record("2026-11-30T09:00:00+01:00")])
    capsys.readouterr()
    assert main(["metrics", "--chart", "--role", "qa", "--workspace", str(root)]) == 0
    sent, full = _bars(BAR_WIDTH // 4, BAR_WIDTH)
    assert capsys.readouterr().out.splitlines() == [
        "prompt characters per day: sent (compaction on) against the full-history estimate",
        f"2026-11-30  sent {sent}        1,000",
        f"            full {full}        4,000  saved 75.0%",
        "note: no server reported tokens for these prompts: shown in characters.",
        "note: 1 skipped line.",
    ]
    assert main(["metrics", "--chart", "--role", "developer", "--workspace", str(root)]) == 0
    assert capsys.readouterr().out == "no data: no prompt records with compaction on match.\n"


def test_chart_filters_skips_and_estimates_as_metrics_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The chart draws metrics' own report: the same records pass its filters, the same are
    skipped (a torn line; a timestamp that cannot be placed against --since), and its bars
    are the report's sent and full-history figures per hour."""
    root = _workspace(
        tmp_path,
        [
            _record("2026-11-30T09:10:00+01:00", prompt_tokens=250, completion_tokens=9),
            _record("2026-11-30T09:50:00+01:00", prompt_tokens=100, completion_tokens=9),
            _record("2026-11-30T11:00:00+01:00", prompt_tokens=400, completion_tokens=9),
            _record("2026-11-30T08:00:00+01:00", prompt_tokens=400, completion_tokens=9),  # early
            _record("2026-11-30T10:00:00", prompt_tokens=400, completion_tokens=9),  # no offset
            _record("2026-11-30T10:00:00+01:00", role="developer", prompt_tokens=400),
        ],
    )
    filters = ["--since", "2026-11-30T09:00:00+01:00", "--role", "qa", "--workspace", str(root)]
    capsys.readouterr()
    assert main(["metrics", "--json", "--by", "hour", *filters]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["skipped_lines"] == 2
    hours = {group["hour"]: group for group in report["groups"]}
    assert list(hours) == ["2026-11-30 09h", "2026-11-30 11h"]
    assert main(["metrics", "--chart", "--per", "hour", *filters]) == 0
    lines = capsys.readouterr().out.splitlines()
    for number, (hour, group) in enumerate(hours.items()):
        full = group["full_history_prompt_tokens_estimate"]
        sent = full - group["saved_prompt_tokens_estimate"]
        assert lines[1 + 2 * number].startswith(f"{hour}  sent ")
        assert lines[1 + 2 * number].endswith(f"{round(sent):>12,}")
        saved = 100 * group["saved_prompt_tokens_estimate"] / full
        assert lines[2 + 2 * number].endswith(f"{round(full):>12,}  saved {saved:.1f}%")
    assert (hours["2026-11-30 09h"]["prompt_tokens"], lines[-1]) == (350, "note: 2 skipped lines.")


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--per", "hour"], "--per goes with --chart (a bar pair per day or hour)."),
        (["--chart", "--json"], "--chart draws bars: give it without --json and --by."),
        (["--chart", "--by", "day"], "--chart draws bars: give it without --json and --by."),
    ],
)
def test_chart_flags_used_wrongly_exit_2(tmp_path: Path, flags: list[str], message: str) -> None:
    root = _workspace(tmp_path, [])
    done = subprocess.run(
        [sys.executable, "-m", "teams_runtime", "metrics", *flags, "--workspace", str(root)],
        capture_output=True,
        text=True,
    )
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == f"teams-runtime: error: {message}\n"


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--watch", "--json"], "--watch redraws text: give it without --json."),
        (["--count", "2"], "--interval and --count go with --watch."),
        (["--interval", "5"], "--interval and --count go with --watch."),
    ],
)
def test_watch_flags_used_wrongly_exit_2(tmp_path: Path, flags: list[str], message: str) -> None:
    root = tmp_path / "ws"
    assert main(["init", str(root)]) == 0
    done = subprocess.run(
        [sys.executable, "-m", "teams_runtime", "status", *flags, "--workspace", str(root)],
        capture_output=True,
        text=True,
    )
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == f"teams-runtime: error: {message}\n"


def _watch(root: Path, *flags: str) -> list[str]:
    command = [sys.executable, "-m", "teams_runtime", "status", "--watch", *flags]
    return [*command, "--workspace", str(root)]


def test_watch_into_a_pipe_prints_each_redraw_as_plain_text(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    assert main(["init", str(root)]) == 0
    assert main(["submit", "--workspace", str(root), "--role", "qa", "--scope", "x"]) == 0
    done = subprocess.run(
        _watch(root, "--interval", "0.1", "--count", "3"), capture_output=True, text=True
    )
    assert (done.returncode, done.stderr) == (0, "")
    screens = done.stdout.split("\n\n")
    assert len(screens) == 3
    for screen in screens:
        lines = screen.splitlines()
        assert lines[0].startswith("teams-runtime status at ")
        assert lines[0].endswith(" (every 0.1 s; Ctrl-C ends)")
        assert lines[1] == f"1 request in {root.resolve()}"
        assert lines[-1] == "envelopes: qa 1 waiting/0 claimed/0 deferred"
    assert "\x1b[" not in done.stdout  # no terminal codes into a pipe


def _read_until(fd: int, wanted: bytes, seen: bytearray, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while wanted not in seen:
        left = deadline - time.monotonic()
        assert left > 0, f"{wanted!r} never came; got {bytes(seen)!r}"
        ready, _, _ = select.select([fd], [], [], left)
        if ready:
            try:
                seen.extend(os.read(fd, 65536))
            except OSError:  # the child closed the terminal
                break


def test_watch_on_a_terminal_redraws_in_place_and_ctrl_c_exits_0(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    assert main(["init", str(root)]) == 0
    primary, secondary = pty.openpty()
    env = dict(os.environ, TERM="xterm", COLUMNS="120")
    process = subprocess.Popen(
        _watch(root, "--interval", "0.1"),
        stdin=subprocess.DEVNULL,
        stdout=secondary,
        stderr=subprocess.PIPE,
        env=env,
    )
    os.close(secondary)
    seen = bytearray()
    try:
        _read_until(primary, b"0 requests in", seen)
        # Work queued meanwhile shows up on a later redraw, in place.
        assert main(["submit", "--workspace", str(root), "--role", "qa", "--scope", "x"]) == 0
        _read_until(primary, b"qa 1 waiting", seen)
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=30) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        os.close(primary)
    assert process.stderr is not None
    with process.stderr:
        assert process.stderr.read() == b""
    assert b"\x1b[" in seen  # cursor movement: the screen is redrawn, not appended to
