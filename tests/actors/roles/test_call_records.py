"""Prompt records schema 2: each call's model key, attempt kind, timings, cached tokens, cost
and outcome, from real calls to the fake OpenAI server on loopback (and schema-1 lines)."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio
import pytest

from teams_runtime.actors.team._team import RunSummary, Team
from teams_runtime.codecs.config import ModelConfig, OpenAIConfig, RateCard, TelemetryConfig
from teams_runtime.codecs.model._openai_wire import decode_chunk
from teams_runtime.codecs.model._replies import TokenUsage
from teams_runtime.codecs.prompt_records import PROMPT_RECORD_SCHEMA, decode_prompt_record
from teams_runtime.policy.pricing import call_cost, card_for, rate_key
from teams_runtime.storage import Workspace
from teams_runtime.storage.server_files import servers_away

from ...support.cli_in_process import run_cli
from ...support.fake_openai_server import PROMPT_TOKENS_PER_CHAR, FakeOpenAIServer, Status, Text
from ...support.waiting import eventually

pytestmark = pytest.mark.anyio

RunOnce = Callable[..., Awaitable[RunSummary]]
Seed = Callable[..., None]
CARD = RateCard(
    input_per_million_usd=2.0, cached_input_per_million_usd=0.5, output_per_million_usd=8.0
)


def _config(server: FakeOpenAIServer, *, provider: str = "", cards: str = "") -> str:
    provider_line = f"    provider: {provider}\n" if provider else ""
    return (
        "model:\n  backend: openai\n  attempts: 2\n  openai:\n"
        f"    base_url: {server.base_url}\n    model: mid-8b\n    timeout_seconds: 10\n"
        f"    max_retries: 0\n{provider_line}"
        "roles:\n  qa:\n    model:\n      openai: {model: small-1b}\n"
        + (f"telemetry:\n  rate_cards:\n{cards}" if cards else "")
    )


def test_the_rate_key_of_each_backend() -> None:
    openai = OpenAIConfig(base_url="http://127.0.0.1:1/v1", model="llama3.1")
    assert rate_key(ModelConfig(backend="openai", openai=openai)) == "openai/llama3.1"
    ollama = OpenAIConfig(base_url="http://127.0.0.1:1/v1", model="llama3.1", provider="ollama")
    assert rate_key(ModelConfig(backend="openai", openai=ollama)) == "ollama/llama3.1"
    assert rate_key(ModelConfig(backend="command", command=["x"], name="m")) == "command/m"
    assert rate_key(ModelConfig(backend="command", command=["x"])) == "command/default"
    assert rate_key(ModelConfig()) == "dry_run/dry_run"


def test_costs_by_token_and_per_invocation_cards() -> None:
    usage = TokenUsage(prompt_tokens=1000, completion_tokens=100, cached_prompt_tokens=400)
    assert call_cost(CARD, usage, answered=True) == pytest.approx(
        (600 * 2.0 + 400 * 0.5 + 100 * 8.0) / 1e6
    )
    no_cached_rate = RateCard(input_per_million_usd=2.0, output_per_million_usd=8.0)
    assert call_cost(no_cached_rate, usage, answered=True) == pytest.approx(2800 / 1e6)
    assert call_cost(CARD, None, answered=True) is None  # no usage: unknown, not free
    assert call_cost(None, usage, answered=True) is None
    per_call = RateCard(per_invocation_usd=0.01)
    assert call_cost(per_call, None, answered=True) == 0.01
    assert call_cost(per_call, None, answered=False) is None
    model = ModelConfig(
        backend="openai", openai=OpenAIConfig(base_url="http://127.0.0.1:1/v1", model="m")
    )
    cards = {"openai/m": CARD}
    assert card_for(TelemetryConfig(rate_cards=cards), model) == CARD
    assert card_for(TelemetryConfig(enabled=False, rate_cards=cards), model) is None


def test_cached_tokens_are_read_from_the_usage_details() -> None:
    def usage(details: object) -> TokenUsage | None:
        body = {"choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": 2}}
        if details is not None:
            body["usage"]["prompt_tokens_details"] = details  # type: ignore[index]
        return decode_chunk(json.dumps(body).encode()).token_usage()

    assert usage({"cached_tokens": 4}) == TokenUsage(
        prompt_tokens=10, completion_tokens=2, cached_prompt_tokens=4
    )
    assert usage(None) == TokenUsage(prompt_tokens=10, completion_tokens=2)
    assert usage({"cached_tokens": "4"}) == TokenUsage(prompt_tokens=10, completion_tokens=2)
    assert usage({"cached_tokens": 11}) == TokenUsage(prompt_tokens=10, completion_tokens=2)
    assert usage([1]) == TokenUsage(prompt_tokens=10, completion_tokens=2)


def test_a_schema_1_line_still_reads() -> None:
    line = (
        b'{"schema_version":1,"timestamp":"2026-11-02T09:00:00+00:00","role":"qa",'
        b'"purpose":"role_task","request_id":"r","enabled":true,"recent_events":8,'
        b'"max_events":16,"total_events":3,"included_events":3,"omitted_events":0,'
        b'"compacted":false,"eligible":false,"backfilled_roles":[],"prompt_chars":10,'
        b'"full_history_chars":10,"prompt_tokens":5,"completion_tokens":1,"answer_read":"as_is"}'
    )
    record = decode_prompt_record(line)
    assert record.schema_version == 1 and record.prompt_tokens == 5
    assert (record.model, record.cost_usd, record.outcome, record.latency_ms) == (None,) * 4


async def test_records_carry_model_timings_cached_tokens_cost_and_outcome(
    tmp_path: Path, openai_server: FakeOpenAIServer, seed: Seed, run_once: RunOnce
) -> None:
    cards = (
        "    openai/mid-8b: {input_per_million_usd: 2, cached_input_per_million_usd: 0.5, "
        "output_per_million_usd: 8}\n"
    )
    (tmp_path / "team_runtime.yaml").write_text(_config(openai_server, cards=cards))
    openai_server.cached_tokens = 100
    workspace = Workspace(tmp_path)
    seed(workspace, "req-1", "developer", events=30)
    # developer: a failed call, a retry with garbage (invalid), a repair that passes; qa: fine.
    openai_server.then(Status(400), Text("not json at all"))
    summary = await run_once(workspace)
    assert summary.failed == 0
    records = sorted(summary.prompts, key=lambda r: r.timestamp)
    developer = [r for r in records if r.role == "developer"]
    assert [(r.attempt_kind, r.outcome) for r in developer] == [
        ("primary", "failed"),
        ("retry", "invalid"),
        ("contract_repair", "completed"),
    ]
    for record in records:
        assert record.schema_version == PROMPT_RECORD_SCHEMA == 3
        assert record.latency_ms is not None and record.latency_ms > 0
    failed, invalid, repaired = developer
    assert failed.prompt_tokens is None and failed.cost_usd is None
    assert failed.first_token_ms is None
    for record in (invalid, repaired):
        assert record.model == "openai/mid-8b"
        assert record.prompt_tokens == record.prompt_chars // PROMPT_TOKENS_PER_CHAR
        assert record.cached_prompt_tokens == 100
        assert record.first_token_ms is not None
        assert 0 <= record.first_token_ms <= record.latency_ms  # type: ignore[operator]
        assert record.completion_tokens is not None and record.prompt_tokens is not None
        expected = (
            (record.prompt_tokens - 100) * 2 + 100 * 0.5 + record.completion_tokens * 8
        ) / 1e6
        assert record.cost_usd == pytest.approx(expected)
    qa = [r for r in records if r.role == "qa"]
    assert qa and all(r.model == "openai/small-1b" and r.cost_usd is None for r in qa)  # no card
    assert all(r.outcome == "completed" and r.attempt_kind == "primary" for r in qa)


async def test_a_configured_provider_keys_the_card(
    tmp_path: Path, openai_server: FakeOpenAIServer, seed: Seed, run_once: RunOnce
) -> None:
    cards = "    ollama/mid-8b: {per_invocation_usd: 0.25}\n"
    (tmp_path / "team_runtime.yaml").write_text(
        _config(openai_server, provider="ollama", cards=cards)
    )
    workspace = Workspace(tmp_path)
    seed(workspace, "req-1", "developer", events=3)
    summary = await run_once(workspace)
    developer = [r for r in summary.prompts if r.role == "developer"]
    assert [(r.model, r.cost_usd) for r in developer] == [("ollama/mid-8b", 0.25)]


def test_metrics_prices_tokens_by_the_rate_cards_per_model(
    tmp_path: Path,
    openai_server: FakeOpenAIServer,
    seed: Seed,
    capsys: pytest.CaptureFixture[str],
) -> None:
    cards = (
        "    openai/mid-8b: {input_per_million_usd: 2, cached_input_per_million_usd: 0.5, "
        "output_per_million_usd: 8}\n"
        "    openai/small-1b: {input_per_million_usd: 0.1, output_per_million_usd: 0.4}\n"
    )
    (tmp_path / "team_runtime.yaml").write_text(_config(openai_server, cards=cards))
    openai_server.cached_tokens = 50
    workspace = Workspace(tmp_path)
    seed(workspace, "req-long", "developer", events=40)
    assert run_cli(capsys, "run", "--once", "--workspace", str(tmp_path))[0] == 0
    status, out, _ = run_cli(
        capsys, "metrics", "--workspace", str(tmp_path), "--by", "model", "--json"
    )
    assert status == 0
    report = json.loads(out)
    groups = {group["model"]: group for group in report["groups"]}
    assert set(groups) == {"openai/mid-8b", "openai/small-1b"}
    rates = {"openai/mid-8b": (2.0, 0.5, 8.0), "openai/small-1b": (0.1, 0.1, 0.4)}
    for model, group in groups.items():
        input_rate, cached_rate, output_rate = rates[model]
        cached = group["cached_prompt_tokens"]
        expected = (
            (group["prompt_tokens"] - cached) * input_rate
            + cached * cached_rate
            + group["completion_tokens"] * output_rate
        ) / 1e6
        assert group["cost_usd"] == pytest.approx(expected, rel=1e-12)
        assert group["priced_calls"] == group["prompts"] == group["prompts_with_usage"]
        assert cached == 50 * group["prompts"]
        assert group["cached_ratio"] == cached / group["prompt_tokens"]
        assert 0 < group["latency_p50_ms"] <= group["latency_p95_ms"] <= group["latency_max_ms"]
        assert group["first_token_p50_ms"] is not None
        assert (group["repairs"], group["retries"], group["failures"]) == (0, 0, 0)
    totals = report["totals"]
    assert totals["cost_usd"] == pytest.approx(sum(g["cost_usd"] for g in groups.values()))
    # The developer's prompt over 40 events was compacted: its full history is estimated
    # from its own tokens per character, and so is what that would have cost.
    assert totals["saved_prompt_tokens_estimate"] > 0
    assert totals["full_history_cost_usd_estimate"] > totals["cost_usd"]
    [request] = report["requests"]
    assert request["request_id"] == "req-long" and request["status"] == "completed"
    assert report["completed_requests"]["prompt_tokens"] == totals["prompt_tokens"]
    assert report["completed_requests"]["cost_usd"] == pytest.approx(totals["cost_usd"])
    table = run_cli(capsys, "metrics", "--workspace", str(tmp_path), "--by", "model")[1]
    assert "openai/small-1b" in table and "Compaction saved about" in table
    assert "Per completed request (1)" in table


def _notes(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("teams-runtime: note: ")]


def test_config_notes_a_card_no_role_uses_and_roles_no_card_prices(
    tmp_path: Path, openai_server: FakeOpenAIServer, capsys: pytest.CaptureFixture[str]
) -> None:
    """configuration.md's old example: a `local/...` card while the provider is `openai` by
    default never prices anything; `config` says so, naming the keys the calls use."""
    cards = (
        "    local/mid-8b: {per_invocation_usd: 0}\n    openai/small-1b: {per_invocation_usd: 1}\n"
    )
    (tmp_path / "team_runtime.yaml").write_text(_config(openai_server, cards=cards))
    status, out, err = run_cli(capsys, "config", "--workspace", str(tmp_path))
    assert status == 0 and json.loads(out)["telemetry"]["rate_cards"]
    assert _notes(err) == [
        "teams-runtime: note: team_runtime.yaml telemetry.rate_cards local/mid-8b matches no "
        "role's model: the roles' calls use openai/mid-8b, openai/small-1b (a key is "
        "<provider>/<model>, model.openai.provider openai unless set).",
        "teams-runtime: note: team_runtime.yaml telemetry.rate_cards has no card for "
        "openai/mid-8b (every role but qa): their calls' cost_usd is null.",
    ]
    # With the provider the card names, it prices every role: nothing to say.
    (tmp_path / "team_runtime.yaml").write_text(
        _config(openai_server, provider="local", cards=cards.replace("openai/", "local/"))
    )
    assert _notes(run_cli(capsys, "config", "--workspace", str(tmp_path))[2]) == []


def test_without_rate_cards_config_says_nothing_of_them(
    tmp_path: Path, openai_server: FakeOpenAIServer, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "team_runtime.yaml").write_text(_config(openai_server))
    status, _, err = run_cli(capsys, "config", "--workspace", str(tmp_path))
    assert status == 0 and _notes(err) == []


async def test_a_call_waiting_for_an_away_server_when_the_run_stops_stays_server_away(
    openai_workspace: Callable[..., Workspace], openai_server: FakeOpenAIServer, seed: Seed
) -> None:
    """Stopped while it waits for its server: the server's absence is what held it, so the
    record says ``server_away`` (a call cut mid-answer is ``stopped``: test_stopped_calls)."""
    workspace = openai_workspace()
    seed(workspace, "req-1", "qa", events=3)
    openai_server.down()
    team = Team(workspace.root, keep_prompt_records=True)
    with anyio.fail_after(60):
        async with anyio.create_task_group() as group:
            await group.start(team.run)
            await eventually(lambda: bool(servers_away(workspace)), "the server away", 30)
            group.cancel_scope.cancel()
    assert [record.outcome for record in team.summary.prompts] == ["server_away"]
