"""``run`` starts a budgeted role's model from the ratio learned in the workspace's prompt log,
as ``prompt`` shows it; without a budget the log is not read (``cli._run``, ``_budget_view``)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
import yaml

from teams_runtime.cli._budget_view import run_ratios
from teams_runtime.codecs.prompt_records import PromptRecord, encode_prompt_record
from teams_runtime.monitoring import PROMPT_LOG_NAME
from teams_runtime.policy.token_counts import LEARNED_MARGIN
from teams_runtime.storage import Workspace, load_team_config

from ..support.cli_in_process import run_cli

Seed = Callable[..., None]


def _learned_log(workspace: Workspace, ratio: float, calls: int = 5) -> None:
    record = PromptRecord(
        timestamp="2026-11-30T08:00:00+00:00",
        role="qa",
        purpose="role_task",
        request_id="req-0",
        enabled=True,
        recent_events=8,
        max_events=16,
        total_events=40,
        included_events=16,
        omitted_events=24,
        compacted=True,
        eligible=True,
        backfilled_roles=[],
        prompt_chars=10_000,
        full_history_chars=40_000,
        model="openai/fake-coder",
        prompt_tokens=int(10_000 * ratio),
    )
    workspace.logs_dir.mkdir(parents=True, exist_ok=True)
    line = encode_prompt_record(record) + "\n"
    (workspace.logs_dir / PROMPT_LOG_NAME).write_text(line * calls)


def _budgeted(workspace: Workspace, budget: Any) -> Workspace:
    config = yaml.safe_load(workspace.config_path.read_text())
    config["roles"] = {"qa": {"prompt_context": {"max_prompt_tokens": budget}}}
    workspace.config_path.write_text(yaml.safe_dump(config, sort_keys=False))
    return workspace


def _records(workspace: Workspace) -> list[dict[str, Any]]:
    lines = (workspace.logs_dir / PROMPT_LOG_NAME).read_text().splitlines()
    return [json.loads(line) for line in lines]


def test_a_run_counts_from_the_first_call_at_the_ratio_the_log_learned(
    openai_workspace: Callable[..., Workspace], seed: Seed, capsys: pytest.CaptureFixture[str]
) -> None:
    workspace = _budgeted(openai_workspace(), 3_000)
    _learned_log(workspace, 0.25)  # the fake server's own count: 4 characters a token
    seed(workspace, "req-1", "qa", events=40)
    status, _, _ = run_cli(
        capsys, "run", "--once", "--plain", "--roles", "qa", "--workspace", str(workspace.root)
    )
    assert status == 0
    (first,) = _records(workspace)[5:]
    assert (first["token_count_method"], first["max_prompt_tokens"]) == ("learned", 3_000)
    # Learned, not the default's 2.5 characters a token: the estimate is the count + 5%.
    assert first["prompt_tokens"] <= first["prompt_tokens_estimate"]
    assert first["prompt_tokens_estimate"] <= first["prompt_tokens"] * (1 + LEARNED_MARGIN) + 16


def test_without_a_budget_the_log_is_not_read(
    openai_workspace: Callable[..., Workspace],
) -> None:
    workspace = openai_workspace()
    _learned_log(workspace, 0.25)
    config = load_team_config(workspace.root)
    assert run_ratios(workspace, config, config.cast.names) is None
    budgeted = load_team_config(_budgeted(workspace, "auto").root)
    ratios = run_ratios(workspace, budgeted, ["qa"])
    assert ratios is not None and ratios.rate("openai/fake-coder").method == "learned"
    assert run_ratios(workspace, budgeted, ["planner"]) is None  # qa is not served
