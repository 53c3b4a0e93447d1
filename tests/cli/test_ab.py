"""``teams-runtime ab``: both arms from one workspace's config, compaction off then on, on
the dry-run backend and on the fake OpenAI server on loopback; the workspace is untouched."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from teams_runtime.cli._ab_arms import arm_config_text, fingerprint
from teams_runtime.codecs.config import parse_team_config

from ..support.cli_in_process import run_cli
from ..support.fake_openai_server import FakeOpenAIServer

CARDS = (
    "telemetry:\n  rate_cards:\n"
    "    openai/mid-8b: {input_per_million_usd: 2, cached_input_per_million_usd: 0.5, "
    "output_per_million_usd: 8}\n"
)


def _workspace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    root = tmp_path / "ws"
    assert run_cli(capsys, "init", str(root))[0] == 0
    return root


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def test_the_arms_differ_only_in_enabled() -> None:
    source = (
        "prompt_context: {recent_events: 4, max_events: 6}\n"
        "backend: {kind: nats, nats: {url: 'nats://127.0.0.1:1'}}\n"
        "model: {backend: dry_run}\n"
    )
    before = parse_team_config(arm_config_text(source, False), "before")
    after = parse_team_config(arm_config_text(source, True), "after")
    assert (before.prompt_context.enabled, after.prompt_context.enabled) == (False, True)
    assert before.prompt_context.max_events == after.prompt_context.max_events == 6
    assert before.backend.kind == after.backend.kind == "file"  # never the workspace's NATS
    assert fingerprint(before) == fingerprint(after)
    other = parse_team_config(arm_config_text(source.replace("6}", "7}"), True), "other")
    assert fingerprint(other) != fingerprint(after)


def test_a_dry_run_prints_both_arms_and_the_compaction_evidence(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _workspace(tmp_path, capsys)
    untouched = _files(root)
    status, out, err = run_cli(capsys, "ab", "--dry-run", "--workspace", str(root))
    assert status == 0, err
    assert "before: " in out and "after: " in out
    fingerprints = [line.rsplit(" ", 1)[-1] for line in out.splitlines()[1:3]]
    assert fingerprints[0] == fingerprints[1] and len(fingerprints[0]) == 16
    assert "Configs: identical but for prompt_context.enabled." in out
    assert "Compaction in the after arm: yes" in out
    rows = {line.split("  ")[1].strip(): line.split() for line in out.splitlines()[5:18]}
    assert rows["compacted calls"][-1] == rows["calls"][-2]  # every after call compacted
    assert _files(root) == untouched  # its requests, logs and queue never touched

    status, out, _ = run_cli(capsys, "ab", "--dry-run", "--workspace", str(root), "--json")
    report = json.loads(out)
    before, after = report["arms"]["before"], report["arms"]["after"]
    assert report["same_config"] and report["after_compacted"]["compacted"]
    assert before["compacted_calls"] == 0 and before["omitted_events"] == 0
    assert after["compacted_calls"] == after["calls"] == before["calls"] > 0
    assert after["mean_prompt_chars"] < before["mean_prompt_chars"]
    assert before["completed_requests"] == after["completed_requests"] == 2


def test_ab_on_a_local_server_compares_tokens_and_cost(
    tmp_path: Path, openai_server: FakeOpenAIServer, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "team_runtime.yaml").write_text(
        "model:\n  backend: openai\n  openai:\n"
        f"    base_url: {openai_server.base_url}\n    model: mid-8b\n    timeout_seconds: 10\n"
        + CARDS
    )
    openai_server.cached_tokens = 200
    keep = tmp_path / "arms"
    status, out, err = run_cli(
        capsys, "ab", "--workspace", str(root), "--keep", str(keep), "--json"
    )
    assert status == 0, err
    report = json.loads(out)
    before, after = report["arms"]["before"], report["arms"]["after"]
    assert before["calls_with_usage"] == before["calls"] > 0
    assert after["input_tokens_per_call"] < before["input_tokens_per_call"]
    per_request = "input_tokens_per_completed_request"
    assert after[per_request] < before[per_request]
    assert after["cost_usd"] < before["cost_usd"]
    for arm in (before, after):
        expected = (
            (arm["input_tokens"] - arm["cached_input_tokens"]) * 2
            + arm["cached_input_tokens"] * 0.5
            + arm["output_tokens"] * 8
        ) / 1e6
        assert arm["cost_usd"] == pytest.approx(expected)
        assert arm["latency_p95_ms"] > 0
        assert (arm["repairs"], arm["failures"]) == (0, 0)
    # Every request the server saw came from the arms: half with full history.
    assert len(openai_server.requests) == before["calls"] + after["calls"]
    # The kept arms are workspaces of their own, for metrics.
    status, out, _ = run_cli(capsys, "metrics", "--workspace", str(keep / "after"), "--json")
    assert json.loads(out)["totals"]["cost_usd"] == pytest.approx(after["cost_usd"])
    status, _, err = run_cli(capsys, "ab", "--workspace", str(root), "--keep", str(keep))
    assert status == 2 and "already exists" in err


def test_a_keep_folder_that_cannot_be_made_is_said_without_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "ws"
    assert run_cli(capsys, "init", str(root))[0] == 0
    (tmp_path / "a-file").write_text("")  # in the way: no folder can be made under it
    for keep in ("/proc/x", str(tmp_path / "a-file" / "arms")):
        status, _, err = run_cli(capsys, "ab", "--workspace", str(root), "--keep", keep)
        assert status == 2 and "Traceback" not in err, err
        assert f"--keep {keep}: the folder cannot be made" in err


def test_a_bad_config_runs_no_arm(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _workspace(tmp_path, capsys)
    (root / "team_runtime.yaml").write_text("telemetry: {enabled: 1}\n")
    keep = tmp_path / "arms"
    status, out, err = run_cli(
        capsys, "ab", "--dry-run", "--workspace", str(root), "--keep", str(keep)
    )
    assert status == 2 and out == ""
    assert err.startswith("teams-runtime: error: ") and "telemetry.enabled must be a boolean" in err
    assert not keep.exists()


def test_counts_read_as_words(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """One request through one role: `1 of 1 call compacted`, not `1 of 1 calls`."""
    root = _workspace(tmp_path, capsys)
    (root / "team_runtime.yaml").write_text("model: {dry_run: {route: [planner]}}\n")
    status, out, err = run_cli(
        capsys, "ab", "--dry-run", "--requests", "1", "--workspace", str(root)
    )
    assert status == 0, err
    [line] = [line for line in out.splitlines() if line.startswith("Compaction in the after")]
    assert line.startswith("Compaction in the after arm: yes (1 of 1 call compacted, ")
    assert line.endswith(" events omitted).")


def test_an_arm_whose_requests_failed_is_named_not_compared(
    tmp_path: Path, openai_server: FakeOpenAIServer, capsys: pytest.CaptureFixture[str]
) -> None:
    """The full histories of the before arm do not fit the server's context: its requests fail
    (a 400 about the context length) while the after arm's complete. Once this printed both
    arms' figures side by side with their changes (a p95 latency of the failed calls against
    the answered ones, `+224094%`) and exited 0."""
    root = tmp_path / "ws"
    root.mkdir()
    (root / "team_runtime.yaml").write_text(
        "model:\n  backend: openai\n  attempts: 1\n  openai:\n"
        f"    base_url: {openai_server.base_url}\n    model: mid-8b\n    timeout_seconds: 10\n"
    )
    openai_server.n_ctx_chars = 20_000  # the after arm's prompts fit; the full histories do not
    status, out, err = run_cli(capsys, "ab", "--workspace", str(root), "--requests", "2")
    assert status == 1, err
    assert "The before arm did not run to the end: 2 of 2 requests did not complete." in out
    failed = [line for line in out.splitlines() if line.startswith("  ab-backfill-")]
    assert len(failed) == 2
    assert all(": failed: planner's prompt does not fit: the prompt does not fit" in line
               for line in failed)  # fmt: skip
    assert "The after arm did not run" not in out
    assert "No comparison: an arm that did not run to the end measured what stopped it" in out
    assert "%" not in out  # no change, no ratio
    assert ["before", "after"] in [line.split() for line in out.splitlines()]  # no "change"
    status, out, err = run_cli(capsys, "ab", "--workspace", str(root), "--requests", "1",
                               "--json")  # fmt: skip
    assert status == 1, err
    report = json.loads(out)
    before, after = report["arms"]["before"], report["arms"]["after"]
    assert (report["both_ran"], before["ran"], after["ran"]) == (False, False, True)
    [request] = before["requests"]
    assert request["status"] == "failed" and request["role"] == "planner"
    assert request["outcome"].startswith("failed: planner's prompt does not fit: ")
    assert [r["status"] for r in after["requests"]] == ["completed"]


def test_an_arm_stopped_at_a_person_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A team whose qa is a person: both arms stop at qa's inbox; neither ran to the end."""
    root = _workspace(tmp_path, capsys)
    (root / "team_runtime.yaml").write_text(
        "model: {dry_run: {route: [planner, qa]}}\nroles: {qa: {model: {backend: human}}}\n"
    )
    status, out, err = run_cli(
        capsys, "ab", "--dry-run", "--requests", "1", "--workspace", str(root)
    )
    assert status == 1, err
    for arm in ("before", "after"):
        assert f"The {arm} arm did not run to the end: 1 of 1 request did not complete." in out
    stopped = [line for line in out.splitlines() if line.startswith("  ab-backfill-1: ")]
    assert stopped == ["  ab-backfill-1: stopped at a person: qa waits for an answer"] * 2
    assert "%" not in out
    status, out, err = run_cli(  # --layout: exit 0 only once both arms ran
        capsys, "ab", "--dry-run", "--layout", "--requests", "1", "--workspace", str(root)
    )
    assert status == 1, err
    assert "The after arm did not run to the end: 1 of 1 request did not complete." in out


def test_the_layout_arms_differ_only_in_the_layout() -> None:
    source = "prompt_context: {layout: shared_prefix, step: 4, max_events: 20}\n"
    before = parse_team_config(arm_config_text(source, True, "upstream"), "before")
    after = parse_team_config(arm_config_text(source, True, "shared_prefix"), "after")
    assert (before.prompt_context.layout, after.prompt_context.layout) == (
        "upstream",
        "shared_prefix",
    )
    assert before.prompt_context.enabled and after.prompt_context.enabled
    assert after.prompt_context.step == 4  # the workspace's own step, kept
    assert before.prompt_context.max_events == after.prompt_context.max_events == 20
    assert fingerprint(before) == fingerprint(after)


def test_ab_layout_runs_both_layouts_with_compaction_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _workspace(tmp_path, capsys)
    keep = tmp_path / "arms"
    status, out, err = run_cli(
        capsys, "ab", "--dry-run", "--layout", "--workspace", str(root), "--keep", str(keep)
    )
    assert status == 0, err
    assert "compaction on, the upstream layout (before) then shared_prefix (after)" in out
    assert "Configs: identical but for prompt_context.layout." in out
    layouts = {
        arm: [json.loads(line).get("layout") for line in log.read_text().splitlines()]
        for arm in ("before", "after")
        for log in [keep / arm / ".teams_runtime" / "logs" / "prompt_context.jsonl"]
    }
    assert set(layouts["before"]) == {None} and set(layouts["after"]) == {"shared_prefix"}
    status, out, _ = run_cli(capsys, "ab", "--dry-run", "--layout", "--workspace", str(root),
                             "--json")  # fmt: skip
    report = json.loads(out)
    before, after = report["arms"]["before"], report["arms"]["after"]
    assert (before["layout"], after["layout"]) == ("upstream", "shared_prefix")
    assert before["compacted_calls"] > 0 and after["compacted_calls"] > 0
    assert status == 0 and report["same_config"]
