"""``teams-runtime replay`` on the demo's workspace: what compaction keeps and costs, and every
figure equal to a recount from the raw files by plain code of its own; its errors."""

from __future__ import annotations

import json
import math
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from teams_runtime.codecs.config import PromptContextConfig, TeamConfig
from teams_runtime.codecs.envelopes import MessageEnvelope
from teams_runtime.codecs.model import validate_reply
from teams_runtime.policy.projection import project_request
from teams_runtime.policy.prompts import KIND_NAMES, build_prompt
from teams_runtime.storage import load_team_config

from ..support.cli_in_process import run_cli

_CARD = """
telemetry:
  rate_cards:
    dry_run/dry_run:
      input_per_million_usd: 3.0
      cached_input_per_million_usd: 0.3
      output_per_million_usd: 15.0
"""


@pytest.fixture
def demo(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    """The demo's workspace, kept, with a rate card for its calls (so they are priced)."""
    folder = tmp_path / "demo"
    assert run_cli(capsys, "demo", "--keep", str(folder))[0] == 0
    with open(folder / "team_runtime.yaml", "a", encoding="utf-8") as config:
        config.write(_CARD)
    return folder


def _rows(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, dict[str, Any]]:
    status, out, err = run_cli(capsys, "replay", "--json", *argv)
    assert status == 0, err
    shown = json.loads(out)
    assert list(shown) == ["policies"]
    return {row["policy"]: row for row in shown["policies"]}


def test_compaction_on_the_demo_keeps_every_roles_newest_report_for_fewer_tokens(
    demo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = _rows(capsys, "--workspace", str(demo), "--layout", "upstream")
    assert list(rows) == ["configured", "recent_only", "full"]  # the default policies
    configured, recent, full = rows["configured"], rows["recent_only"], rows["full"]
    for row in rows.values():
        assert row["prompts"] == 14 and row["layout"] == "upstream"
    # 8 backfill slots for at most 7 missing roles: every role's newest report is there.
    assert configured["evidence_kept"] == 1.0
    assert recent["evidence_kept"] < 1.0
    assert full["prompt_tokens_estimate"] > configured["prompt_tokens_estimate"]
    assert full["cost_usd"] > configured["cost_usd"] > 0


def _evidence_role(event: Any) -> str | None:
    """Spec section 4's role evidence, written out plainly."""
    if not isinstance(event, dict):
        return None
    kinds = {str(event.get(k, "")).strip().lower() for k in ("type", "event_type")}
    payload = event.get("payload")
    by_payload = (
        isinstance(payload, dict)
        and isinstance(payload.get("role"), str)
        and payload["role"].strip()
        and isinstance(payload.get("status"), str)
        and payload["status"].strip()
    )
    if "role_report" not in kinds and not by_payload:
        return None
    for role in (payload.get("role") if isinstance(payload, dict) else None, event.get("actor")):
        if isinstance(role, str) and role.strip():
            return role.strip().lower()
    return None


def _select(events: list[Any], recent: int, most: int, step: int | None = None) -> list[int]:
    """The five steps of the policy, on decoded events; with ``step`` (shared_prefix), the
    tail starting at a multiple of it and the missing roles those of its first ``recent``."""
    if len(events) <= most:
        return list(range(len(events)))
    start = len(events) - recent
    if step is not None:
        start = start // step * step
    tail = list(range(start, len(events)))
    seen = {_evidence_role(events[i]) for i in tail[:recent]} - {None}
    kept: list[int] = []
    for index in range(start - 1, -1, -1):
        if len(kept) + recent >= most:
            break
        role = _evidence_role(events[index])
        if role is not None and role not in seen:
            seen.add(role)
            kept.append(index)
    return sorted(kept) + tail


def _plain_prefix(first: str, second: str) -> int:
    """The common prefix's length, a character at a time."""
    length = 0
    for mine, theirs in zip(first, second, strict=False):
        if mine != theirs:
            break
        length += 1
    return length


def _recount(
    folder: Path, recent: int, most: int, ttl: float, step: int | None = None
) -> dict[str, Any]:
    """The replay of the configured policy recounted from the raw files by plain code: JSON
    read with ``json``, the selection and evidence as the spec says, every earlier prompt
    compared whole; only the prompt text is laid out by the package's own ``build_prompt``
    (in the shared_prefix layout with ``step``)."""
    config: TeamConfig = load_team_config(folder)
    context = config.prompt_context
    if step is not None:
        context = PromptContextConfig(
            recent_events=recent, max_events=most, layout="shared_prefix", step=step
        )
    logs = folder / ".teams_runtime" / "logs" / "prompt_context.jsonl"
    calls = [json.loads(line) for line in logs.read_text().splitlines()]
    calls.sort(key=lambda call: datetime.fromisoformat(call["timestamp"]))
    sent: list[tuple[float, str]] = []
    totals = {"tokens": 0, "cacheable": 0, "pairs": 0, "kept": 0, "cost": 0.0}
    for call in calls:
        path = folder / ".teams_runtime" / "requests" / f"{call['request_id']}.json"
        record = json.loads(path.read_text())
        events = record["events"][: call["total_events"]]
        selected = _select(events, recent, most, step)
        projection = project_request({**record, "events": events}, context)
        assert list(projection.selected_indices) == selected
        role = call["role"]
        envelope = MessageEnvelope(
            request_id=record["request_id"],
            sender=record.get("current_role") or "orchestrator",
            target=role,
            intent=record.get("intent", ""),
            urgency=record.get("urgency", "normal"),
            scope=record.get("scope", ""),
            artifacts=record.get("artifacts", []),
            params=record.get("params", {}),
            body=record.get("body", ""),
        )
        kind = KIND_NAMES[call["purpose"]]
        repairing = config.cast.prompt_kind_of(role)
        errors = []
        if kind == "repair":
            errors = validate_reply(
                "{}", kind="task", request_id=record["request_id"], role=role
            ).issues
        bundle = build_prompt(
            kind,
            role=role,
            projection=projection,
            envelope=envelope,
            repairing=repairing,
            errors=errors,
            previous="{}",
            cast=config.cast,
        )
        text = bundle.text()
        sizes = bundle.sizes()
        parts = [sizes.brief, sizes.record, sizes.envelope, sizes.notice, *sizes.events]
        tokens = sum(math.ceil(size / 2.5) for size in parts if size > 0)
        when = datetime.fromisoformat(call["timestamp"]).timestamp()
        prefix = max(
            (_plain_prefix(text, earlier) for at, earlier in sent if at >= when - ttl),
            default=0,
        )
        sent.append((when, text))
        cacheable = min(math.ceil(len(text[:prefix].encode()) / 2.5), tokens)
        totals["tokens"] += tokens
        totals["cacheable"] += cacheable
        totals["cost"] += ((tokens - cacheable) * 3.0 + cacheable * 0.3) / 1e6
        newest: dict[str, int] = {}
        for index, event in enumerate(events):
            if (owner := _evidence_role(event)) is not None:
                newest[owner] = index
        totals["pairs"] += len(newest)
        totals["kept"] += sum(index in selected for index in newest.values())
    return totals


@pytest.mark.parametrize(
    ("layout", "step"), [("upstream", None), ("shared_prefix", None), ("shared_prefix", 3)]
)
@pytest.mark.parametrize("ttl", [300.0, 0.0])
def test_the_figures_equal_a_recount_from_the_raw_files(
    demo: Path, capsys: pytest.CaptureFixture[str], ttl: float, layout: str, step: int | None
) -> None:
    argv = ["--policy", "configured", "--cache-ttl", f"{ttl:g}", "--layout", layout]
    if step is not None:
        argv += ["--step", str(step)]
    row = _rows(capsys, "--workspace", str(demo), *argv)["configured"]
    assert row["layout"] == layout
    laid_out = None if layout == "upstream" else step or 8  # the config's step: the default
    recount = _recount(demo, 8, 16, ttl, laid_out)
    assert row["prompt_tokens_estimate"] == recount["tokens"]
    assert row["cacheable_prompt_tokens"] == recount["cacheable"]
    assert row["evidence_pairs"] == recount["pairs"]
    assert row["evidence_kept"] == recount["kept"] / recount["pairs"]
    assert row["cost_usd"] == pytest.approx(recount["cost"], rel=1e-12)
    if ttl == 0:
        assert row["cacheable_prompt_tokens"] <= 2 * 14  # prompts sent in the same instant only


def test_on_the_demo_shared_prefix_keeps_far_more_for_the_cache_and_every_report(
    demo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, err = run_cli(capsys, "replay", "--json", "--workspace", str(demo))
    assert status == 0, err
    rows = {(row["policy"], row["layout"]): row for row in json.loads(out)["policies"]}
    assert len(rows) == 6  # each default policy with either layout

    def share(row: dict[str, Any]) -> float:
        return float(row["cacheable_prompt_tokens"] / row["prompt_tokens_estimate"])

    upstream, shared = rows["configured", "upstream"], rows["configured", "shared_prefix"]
    assert share(upstream) < 0.05 and share(shared) > 0.4  # 0.8% and 55.7% on 2026-12-06
    assert shared["evidence_kept"] == upstream["evidence_kept"] == 1.0
    # Across roles: each hop's role differs from the last one's, the record first is shared.
    assert (
        shared["cacheable_cross_role_prompt_tokens"] > shared["cacheable_same_role_prompt_tokens"]
    )
    for policy in ("recent_only", "full"):
        assert share(rows[policy, "shared_prefix"]) > 10 * share(rows[policy, "upstream"])


def test_the_table_and_the_chart_show_every_policy_and_say_what_is_approximate(
    demo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ("replay", "--workspace", str(demo), "--policy", "configured", "--policy", "4/6")
    status, table, _ = run_cli(capsys, *argv)
    assert status == 0
    lines = table.splitlines()
    assert lines[0].split()[:4] == ["policy", "layout", "prompts", "tokens"]
    assert [line.split()[:3] for line in lines[1:5]] == [
        ["configured", "upstream", "14"],
        ["configured", "shared_prefix", "14"],  # each policy with either layout
        ["4/6", "upstream", "14"],
        ["4/6", "shared_prefix", "14"],
    ]
    assert "Approximate:" in table and "No model was called." in table
    assert "Tokens of dry_run/dry_run: the default, 2.5 characters a token." in table
    status, chart, _ = run_cli(capsys, *argv, "--chart")
    assert status == 0
    bars = [line for line in chart.splitlines() if "evidence kept" in line]
    assert len(bars) == 4 and bars[1].startswith("configured  shared_prefix")
    assert "█" in chart


def test_from_an_exported_record_and_one_request(
    demo: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    exported = tmp_path / "req-long.json"
    assert (
        run_cli(capsys, "export", "req-long", "--workspace", str(demo), "--out", str(exported))[0]
        == 0
    )
    from_file = _rows(capsys, "--workspace", str(demo), "--from", str(exported))
    stored = _rows(capsys, "--workspace", str(demo), "--request", "req-long")
    assert from_file == stored
    assert stored["configured"]["prompts"] == 3  # req-long's three calls


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        pytest.param(
            ["--policy", "most"],
            "argument --policy: unknown policy 'most'; valid policies: configured, recent_only",
            id="policy",
        ),
        pytest.param(["--cache-ttl", "-1"], "argument --cache-ttl: '-1' must be from 0", id="ttl"),
        pytest.param(["--layout", "sideways"], "argument --layout: invalid choice", id="layout"),
        pytest.param(["--step", "0"], "argument --step: '0' must be a positive integer", id="step"),
        pytest.param(
            ["--step", "1000001"], "argument --step: '1000001' must be at most", id="step-too-large"
        ),
        pytest.param(
            ["--layout", "upstream", "--step", "4"],
            "--step applies only with the shared_prefix layout",
            id="step-upstream",
        ),
        pytest.param(
            ["--request", "req-none"],
            "--request: no prompt records of request req-none",
            id="request",
        ),
        pytest.param(["--from", "nowhere.json"], "nowhere.json: no such record file.", id="from"),
        pytest.param(["--json", "--chart"], "--chart draws bars", id="json-and-chart"),
    ],
)
def test_bad_flags_exit_2_naming_the_flag_or_file(
    demo: Path, capsys: pytest.CaptureFixture[str], argv: list[str], says: str
) -> None:
    status, out, err = run_cli(capsys, "replay", "--workspace", str(demo), *argv)
    assert status == 2 and out == ""
    assert "teams-runtime: error: " in err and says in err


def test_a_folder_that_is_not_a_workspace(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, _, err = run_cli(capsys, "replay", "--workspace", str(tmp_path))
    assert status == 2 and "is not a workspace" in err


def test_what_a_new_user_misread_is_said_under_the_table(
    demo: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    where = ("--workspace", str(demo))
    argv = ("replay", *where, "--policy", "max_prompt_tokens:1500", "--policy", "full")
    status, table, _ = run_cli(capsys, *argv, "--policy", "full", "--layout", "shared_prefix")
    assert status == 0
    lines = table.splitlines()
    rows = [line.split()[:2] for line in lines[1 : lines.index("")]]  # the table, to its end
    assert rows == [["max_prompt_tokens:1500", "shared_prefix"], ["full", "shared_prefix"]]
    assert "shared_prefix step 8." in table  # the step used
    tight = _rows(capsys, *where, "--policy", "max_prompt_tokens:1500")
    if tight["max_prompt_tokens:1500"]["too_large"]:  # the demo's version_controller prompt
        assert "cannot fit the budget even without events" in table
    shown = json.loads(run_cli(capsys, "replay", "--json", *where, "--step", "4")[1])
    assert {row["layout"]: row["step"] for row in shown["policies"]} == {
        "upstream": None, "shared_prefix": 4,
    }  # fmt: skip
    empty = tmp_path / "empty"
    assert run_cli(capsys, "init", str(empty))[0] == 0
    status, table, _ = run_cli(capsys, "replay", "--workspace", str(empty))
    assert status == 0 and "No prompt records yet: run the team" in table
