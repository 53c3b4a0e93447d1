"""Monitoring: the CLI's log sinks (role logs, the prompt-record file) and `teams-runtime
metrics` over the prompt records."""

from __future__ import annotations

import json
import re
import tracemalloc
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest

from teams_runtime.actors.team._team import RunSummary
from teams_runtime.cli import main
from teams_runtime.codecs.config import RateCard
from teams_runtime.codecs.envelopes import MessageEnvelope
from teams_runtime.codecs.prompt_records import PromptRecord, encode_prompt_record
from teams_runtime.monitoring import (
    PROMPT_LOG_NAME,
    Filters,
    aggregate,
    configure_logging,
    log_files,
    render_report,
    stop_logging,
)
from teams_runtime.monitoring._call_groups import Figures
from teams_runtime.storage import FileWorkQueue, Workspace

from ..support.paths import PROJECT_ROOT
from ..support.prompt_records import prompt_record

pytestmark = pytest.mark.anyio

RunOnce = Callable[..., Awaitable[RunSummary]]


def _write(logs: Path, name: str, lines: list[str]) -> None:
    logs.mkdir(parents=True, exist_ok=True)
    (logs / name).write_text("".join(line + "\n" for line in lines))


@pytest.fixture
def logs(tmp_path: Path) -> Path:
    (tmp_path / "team_runtime.yaml").write_text("")  # a workspace: metrics refuses other folders
    folder = tmp_path / ".teams_runtime" / "logs"
    rotated = [encode_prompt_record(prompt_record(prompt_chars=n)) for n in range(1, 101)]
    _write(folder, "prompt_context.2026-11-29_10-00-00_000001.jsonl", rotated)
    live = [
        encode_prompt_record(
            prompt_record(
                role="planner",
                purpose="contract_repair",
                request_id="r2",
                timestamp="2026-11-30T09:30:00+01:00",
            )
        )
        for _ in range(3)
    ]
    off = encode_prompt_record(
        prompt_record(
            enabled=False,
            compacted=False,
            included_events=40,
            omitted_events=0,
            prompt_chars=4000,
            timestamp="2026-11-30T10:00:00+00:00",
        )
    )
    torn = encode_prompt_record(prompt_record())[:37]
    _write(folder, "prompt_context.jsonl", [*live, off, torn, "not json", '{"role": 3}', ""])
    return folder


def test_totals_groups_and_skipped_lines(logs: Path) -> None:
    report = aggregate(log_files(logs), Filters(), ["role", "purpose"])
    totals = report.totals
    assert totals.prompts == 104
    assert totals.eligible == 104 and totals.compacted == 103
    assert totals.total_events == 104 * 40
    assert totals.omitted_events == 103 * 28
    assert totals.prompt_chars == sum(range(1, 101)) + 3 * 1000 + 4000
    assert totals.full_history_chars == 104 * 4000
    assert report.skipped_lines == 3
    assert [(g.values, g.figures.prompts) for g in report.groups] == [
        ({"role": "planner", "purpose": "contract_repair"}, 3),
        ({"role": "qa", "purpose": "role_task"}, 101),
    ]
    qa = report.groups[1].figures
    assert qa.p95_prompt_chars == 96  # of 1..100 and 4000: the 96th of 101 sorted
    assert qa.mean_prompt_chars == (sum(range(1, 101)) + 4000) / 101  # unrounded


def test_token_usage_is_summed_where_the_server_reported_it(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    used = [prompt_record(role="qa", prompt_tokens=100 * n, completion_tokens=n) for n in (1, 2)]
    lines = [encode_prompt_record(r) for r in [*used, prompt_record(role="planner")]]
    lines.append(lines[-1].replace(',"prompt_tokens":null,"completion_tokens":null', ""))
    assert '"prompt_tokens"' not in lines[-1]  # a record from before usage was logged
    _write(logs, PROMPT_LOG_NAME, lines)
    report = aggregate(log_files(logs), Filters(), ["role"])
    assert report.skipped_lines == 0
    totals = report.totals
    assert (totals.prompts, totals.prompts_with_usage) == (4, 2)
    assert (totals.prompt_tokens, totals.completion_tokens) == (300, 3)
    groups = {g.values["role"]: g.figures for g in report.groups}
    # No usage reported: unknown, not zero.
    assert (groups["planner"].prompts_with_usage, groups["planner"].prompt_tokens) == (0, None)
    table = render_report(report).splitlines()
    assert "tokens in/out" in table[0]
    totals_row = next(line for line in table if line.startswith("total"))
    assert "300/3" in totals_row.split()
    planner_row = next(line for line in table if line.startswith("planner"))
    column = table[0].index("tokens in/out")
    assert planner_row[column:].split()[:2] == ["-", "-"]  # none of its calls said: not "0/0"
    without = aggregate(log_files(logs), Filters(role="planner"), ["role"])
    shown = render_report(without).splitlines()
    assert "tokens in/out" not in shown[0]  # no usage reported: no column, and a line says why
    assert "No call reported token usage, so there are no tokens columns" in shown[-3]


def test_a_completed_request_without_usage_took_unknown_tokens_not_zero(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    used_record = prompt_record(
        request_id="used", prompt_tokens=90, completion_tokens=1, cost_usd=0.5
    )
    records = [prompt_record(request_id="dry"), used_record]  # a dry run's call, a priced one
    _write(logs, PROMPT_LOG_NAME, [encode_prompt_record(r) for r in records])

    def report_of(request_id: str) -> Any:
        filters = Filters(request_id=request_id)
        return aggregate(log_files(logs), filters, ["role"], status_of=lambda _: "completed")

    dry = report_of("dry")
    assert msgspec.to_builtins(dry.completed_requests) == {
        "requests": 1,
        "calls": 1,
        "calls_with_usage": 0,
        "priced_calls": 0,
        "prompt_tokens": None,
        "cost_usd": None,
        "mean_prompt_tokens": None,
        "mean_cost_usd": None,
    }
    assert "Per completed request (1): input tokens unknown (0 of 1 call reported usage)." in (
        render_report(dry)
    )
    used = report_of("used")
    assert (
        used.completed_requests.mean_prompt_tokens,
        used.completed_requests.mean_cost_usd,
    ) == (90, 0.5)
    assert "Per completed request (1): 90 input tokens, $0.5000." in render_report(used)


def test_the_guide_names_every_record_field_and_report_key() -> None:
    """docs/monitoring.md's field table and its list of the group keys, against the code."""
    guide = (PROJECT_ROOT / "docs" / "monitoring.md").read_text()
    rows = re.findall(r"^\| (`[^|]*`) \|", guide, re.MULTILINE)
    documented = {name for row in rows for name in re.findall(r"`([a-z_]+)`", row)}
    assert documented == {field.name for field in msgspec.structs.fields(PromptRecord)}
    start = guide.index("`totals` and each group hold:")
    end = start + re.search(r"Token\s+sums", guide[start:]).start()  # type: ignore[union-attr]
    listed = set(re.findall(r"`([a-z_0-9]+)`", guide[start:end]))
    assert {field.name for field in msgspec.structs.fields(Figures)} <= listed


def test_what_no_call_reported_is_unknown_and_partial_sums_say_over_how_many(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A model whose server reports no usage, a server that never says what it cached, and a
    request one of whose three calls reported nothing: null and "-", never 0 or $0."""
    (tmp_path / "team_runtime.yaml").write_text("")
    priced = {"model": "openai/big", "prompt_tokens": 900, "completion_tokens": 50}
    records = [
        prompt_record(request_id="r1", **priced, cached_prompt_tokens=300, cost_usd=0.01),
        prompt_record(request_id="r1", **priced, cost_usd=0.01),  # usage without cached tokens
        prompt_record(request_id="r1", model="local/tiny"),  # no usage, no cost
    ]
    _write(
        tmp_path / ".teams_runtime" / "logs",
        PROMPT_LOG_NAME,
        [encode_prompt_record(r) for r in records],
    )
    root = str(tmp_path)
    assert main(["metrics", "--workspace", root, "--by", "model", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    tiny = next(group for group in report["groups"] if group["model"] == "local/tiny")
    for key in (
        "prompt_tokens",
        "completion_tokens",
        "cached_prompt_tokens",
        "cached_ratio",
        "cost_usd",
        "full_history_prompt_tokens_estimate",
        "full_history_cost_usd_estimate",
        "saved_cost_usd_estimate",
    ):
        assert tiny[key] is None, key
    assert (tiny["priced_calls"], tiny["prompts_with_usage"]) == (0, 0)
    totals = report["totals"]
    # The ratio is over the one call that said what was cached, not diluted by the others.
    assert (totals["prompts_with_cached_tokens"], totals["cached_ratio"]) == (1, 300 / 900)
    assert (totals["prompt_tokens"], totals["cost_usd"]) == (1800, pytest.approx(0.02))
    [request] = report["requests"]
    assert (request["calls"], request["calls_with_usage"], request["priced_calls"]) == (3, 2, 2)
    done = aggregate(
        log_files(tmp_path / ".teams_runtime" / "logs"),
        Filters(),
        ["model"],
        rate_cards={"openai/big": RateCard(input_per_million_usd=1, output_per_million_usd=2)},
        status_of=lambda request_id: "completed",
    )
    assert done.completed_requests.prompt_tokens == 1800
    assert (done.completed_requests.calls, done.completed_requests.calls_with_usage) == (3, 2)
    table = render_report(done)
    row = next(line for line in table.splitlines() if line.startswith("local/tiny")).split()
    assert row[-5:-2] == ["-", "-", "-"]  # tokens in/out, cached in, cost
    assert "$0.0000" not in table
    assert (
        "Partial sums: 2 of 3 calls reported usage, 1 of 3 calls said what was cached, "
        "2 of 3 calls priced." in table
    )
    assert "each call's own tokens per character, 2 of 3 calls), $" in table
    assert (
        "Per completed request (1): 1,800 input tokens, $0.0200 (2 of 3 calls reported usage, "
        "2 of 3 calls priced)." in table
    )


def test_one_call_reads_as_a_word(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    used = prompt_record(prompt_tokens=250, completion_tokens=10)
    _write(logs, PROMPT_LOG_NAME, [encode_prompt_record(used)])
    table = render_report(aggregate(log_files(logs), Filters(), ["role"]))
    assert "(estimated from each call's own tokens per character, 1 call)." in table


def test_a_dry_run_has_no_tokens_and_no_cost_not_zero_ones(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    _write(
        logs,
        PROMPT_LOG_NAME,
        [encode_prompt_record(prompt_record(model="dry_run/dry_run"))] * 3,
    )
    report = aggregate(log_files(logs), Filters(), ["role"], status_of=lambda _: "completed")
    assert report.totals.prompt_tokens is None and report.totals.cost_usd is None
    done = report.completed_requests
    assert (done.prompt_tokens, done.mean_prompt_tokens, done.cost_usd) == (None,) * 3
    table = render_report(report)
    assert "Per completed request (1): input tokens unknown (0 of 3 calls reported usage)." in (
        table
    )


@pytest.mark.parametrize(
    ("filters", "prompts"),
    [
        pytest.param(Filters(role="planner"), 3, id="role"),
        pytest.param(Filters(purpose="role_task"), 101, id="purpose"),
        pytest.param(Filters(request_id="r2"), 3, id="request"),
        pytest.param(Filters(since="2026-11-30T08:30:00+00:00"), 4, id="since-with-offsets"),
        pytest.param(Filters(role="designer"), 0, id="nothing"),
    ],
)
def test_filters(logs: Path, filters: Filters, prompts: int) -> None:
    assert aggregate(log_files(logs), filters, ["role"]).totals.prompts == prompts


def test_by_enabled_compares_per_prompt(logs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = str(logs.parent.parent)
    assert main(["metrics", "--workspace", root, "--by", "enabled"]) == 0
    out = capsys.readouterr().out
    assert "Per prompt, compaction on:" in out and "off: 4,000 chars and 40.0 events" in out
    assert main(["metrics", "--workspace", root, "--by", "enabled", "--json"]) == 0
    groups = {g["enabled"]: g for g in json.loads(capsys.readouterr().out)["groups"]}
    assert groups[False]["mean_prompt_chars"] == 4000
    assert groups[True]["mean_included_events"] == 12


def test_json_has_the_documented_shape(logs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["metrics", "--workspace", str(logs.parent.parent), "--json", "--by", "day"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert {"schema_version", "filters", "totals", "groups", "skipped_lines"} <= set(report)
    assert {
        "prompts",
        "eligible",
        "compacted",
        "total_events",
        "included_events",
        "omitted_events",
        "prompt_chars",
        "full_history_chars",
    } <= set(report["totals"])
    assert [g["day"] for g in report["groups"]] == ["2026-11-30"]
    assert report["skipped_lines"] == 3 and report["no_data"] is False


def test_no_data_is_exit_0_with_a_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "team_runtime.yaml").write_text("")  # a workspace that has logged nothing yet
    assert main(["metrics", "--workspace", str(tmp_path)]) == 0
    assert capsys.readouterr().out.startswith("no data: no prompt records match")


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param(["--hours", "0"], id="hours-zero"),
        pytest.param(["--hours", "x"], id="hours-text"),
        pytest.param(["--since", "yesterday"], id="since-text"),
        pytest.param(["--hours", "1", "--since", "2026-11-30T00:00:00"], id="both"),
        pytest.param(["--by", "colour"], id="by"),
        pytest.param(["--purpose", "poetry"], id="purpose"),
    ],
)
def test_bad_arguments_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["metrics", "--workspace", str(tmp_path), *argv])
    assert exit_.value.code == 2
    assert "teams-runtime: error: " in capsys.readouterr().err


MARKERS = ("MARKER-SCOPE-7d1", "MARKER-BODY-7d1", "MARKER-PAYLOAD-7d1", "MARKER-ANSWER-7d1")


async def test_logs_never_hold_prompt_or_payload_text(
    fake_model: Path,
    team_workspace: Callable[..., Workspace],
    seed: Callable[..., None],
    run_once: RunOnce,
) -> None:
    workspace = team_workspace("invalid_once")
    assert fake_model.exists()
    seed(workspace, "req-1", "planner", events=40)
    FileWorkQueue(workspace).put(
        MessageEnvelope(
            request_id="req-1",
            sender="user",
            target="qa",
            scope=MARKERS[0],
            body=MARKERS[1],
            params={"x": MARKERS[2]},
        )
    )
    configure_logging(workspace, console_level="ERROR")
    try:
        summary = await run_once(workspace)
    finally:
        stop_logging()
    assert any(r.purpose == "contract_repair" for r in summary.prompts)
    texts = [path.read_text() for path in workspace.logs_dir.iterdir()]
    assert any("prompt_context_compacted" in text for text in texts)
    for text in texts:
        for marker in MARKERS:
            assert marker not in text
        assert "Current request" not in text and "insight" not in text


async def test_compaction_is_logged_in_the_role_log(
    team_workspace: Callable[..., Workspace], seed: Callable[..., None], run_once: RunOnce
) -> None:
    workspace = team_workspace()
    seed(workspace, "req-1", "qa", events=40)
    configure_logging(workspace, console_level="ERROR")
    try:
        await run_once(workspace)
    finally:
        stop_logging()
    lines = (workspace.logs_dir / "qa.log").read_text().splitlines()
    compacted = [line for line in lines if "prompt_context_compacted" in line]
    assert len(compacted) == 1
    assert compacted[0].endswith(
        "[qa] prompt_context_compacted request_id=req-1 purpose=role_task total_events=40 "
        "included_events=12 omitted_events=28 recent_events=8 max_events=16"
    )
    text = (workspace.logs_dir / PROMPT_LOG_NAME).read_text()
    records = [json.loads(line) for line in text.splitlines()]
    assert [(r["role"], r["omitted_events"], r["eligible"]) for r in records] == [("qa", 28, True)]
    others = [path.name for path in workspace.logs_dir.glob("*.log") if path.name != "qa.log"]
    for name in others:  # each role's lines go to its own log only
        assert "prompt_context_compacted" not in (workspace.logs_dir / name).read_text()


def test_by_enabled_rows_read_enabled_and_disabled(
    logs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["metrics", "--workspace", str(logs.parent.parent), "--by", "enabled"]) == 0
    labels = [line.split()[0] for line in capsys.readouterr().out.splitlines()[1:3]]
    assert labels == ["disabled", "enabled"]


@pytest.mark.parametrize(
    ("full_history_chars", "shown"),
    [
        pytest.param(4000, "75.0", id="a-saving"),
        pytest.param(1000, "0.0", id="no-saving"),
        pytest.param(0, "0.0", id="nothing-to-compare"),
    ],
)
def test_saving_percent_is_always_a_number(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], full_history_chars: int, shown: str
) -> None:
    record = prompt_record(prompt_chars=1000, full_history_chars=full_history_chars)
    (tmp_path / "team_runtime.yaml").write_text("prompt_context: {}\n", encoding="utf-8")
    _write(tmp_path / ".teams_runtime" / "logs", PROMPT_LOG_NAME, [encode_prompt_record(record)])
    assert main(["metrics", "--workspace", str(tmp_path), "--json"]) == 0
    text = capsys.readouterr().out
    assert text.count(f'"saving_percent": {shown}') == 2  # the totals and the one group
    assert main(["metrics", "--workspace", str(tmp_path)]) == 0
    assert f"  {shown}%" in capsys.readouterr().out


def _metrics(capsys: pytest.CaptureFixture[str], logs: Path, *flags: str) -> tuple[int, str, str]:
    status = main(["metrics", "--workspace", str(logs.parent.parent), *flags])
    out, err = capsys.readouterr()
    return status, out, err


def test_what_is_named_like_a_log_but_is_no_regular_file_is_passed_over(
    logs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A folder and a link to an endless device, named like rotated logs; a link to a real log.
    (logs / "prompt_context.2026-11-01_00-00-00_000001.jsonl").mkdir()
    (logs / "prompt_context.2026-11-02_00-00-00_000001.jsonl").symlink_to("/dev/zero")
    (logs / "prompt_context.2026-11-03_00-00-00_000001.jsonl").symlink_to(logs / PROMPT_LOG_NAME)
    status, out, err = _metrics(capsys, logs, "--json")
    assert status == 0 and "Traceback" not in err
    assert json.loads(out)["totals"]["prompts"] == 104  # as without them


def test_a_log_removed_while_metrics_reads_is_passed_over(logs: Path) -> None:
    files = log_files(logs)
    files[0].unlink()  # rotated away between the listing and the read
    assert aggregate(files, Filters(), ["role"]).totals.prompts == 4


def test_a_line_too_long_to_be_a_record_is_skipped_without_holding_it(logs: Path) -> None:
    with (logs / PROMPT_LOG_NAME).open("ab") as log:
        log.write(b"x" * (3 * 1024 * 1024) + b"\n")  # no record: a line of 3 MiB
        log.write(encode_prompt_record(prompt_record(role="after")).encode() + b"\n")
    tracemalloc.start()
    try:
        report = aggregate(log_files(logs), Filters(), ["role"])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1024 * 1024  # read past in pieces, never held whole
    assert report.skipped_lines == 3 + 1
    assert "after" in [group.values["role"] for group in report.groups]


def test_control_characters_of_a_log_line_are_not_printed_in_text(
    logs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A role written by hand into the log: clear the screen, set the window title, ring.
    hostile = "qa\x1b[2J\x1b]0;pwned\x07\r\x9b"
    with (logs / PROMPT_LOG_NAME).open("a") as log:
        log.write(encode_prompt_record(prompt_record(role=hostile)) + "\n")
    status, out, _ = _metrics(capsys, logs, "--by", "role")
    assert status == 0
    assert not re.search(r"[\x00-\x1f\x7f-\x9f]", out.replace("\n", ""))
    assert "qa[2J]0;pwned" in out
    status, out, _ = _metrics(capsys, logs, "--by", "role", "--json")
    assert hostile in [group["role"] for group in json.loads(out)["groups"]]  # JSON: exact


def test_metrics_shows_how_far_the_budgets_estimates_were_from_the_servers(
    tmp_path: Path,
) -> None:
    logs = tmp_path / "logs"
    plain = [prompt_record(model="local/qwen", prompt_tokens=100) for _ in range(3)]
    _write(logs, PROMPT_LOG_NAME, [encode_prompt_record(r) for r in plain])
    without = aggregate(log_files(logs), Filters(), ["role"])
    assert "estimates" not in without.as_json()  # no estimate: the report as before
    assert "Token estimates" not in render_report(without)
    estimated = [
        prompt_record(model="local/qwen", prompt_tokens=counted, prompt_tokens_estimate=estimate,
                max_prompt_tokens=4000, token_count_method="learned")
        for estimate, counted in [(105, 100), (102, 100), (98, 100), (130, 100)]
    ]  # fmt: skip
    _write(logs, PROMPT_LOG_NAME, [encode_prompt_record(r) for r in plain + estimated])
    report = aggregate(log_files(logs), Filters(), ["role"])
    assert report.as_json()["estimates"] == [
        {"model": "local/qwen", "calls": 4, "error_p50_pct": 5.0, "error_p95_pct": 30.0,
         "under": 1}
    ]  # fmt: skip
    assert (
        "  local/qwen: 4 calls, off by 5% (p50), 30% (p95); 1 under the count"
        in render_report(report).splitlines()
    )
