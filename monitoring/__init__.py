"""Monitoring: the CLI's log sinks (``log_sinks``), and ``teams-runtime metrics`` over the
prompt records (``metrics_report`` reads and groups them, ``call_groups`` sums a group,
``estimates`` measures a token budget's estimates, ``learned`` seeds a run's token ratios from
them, ``report_table`` draws the table)."""

from __future__ import annotations

from teams_runtime.codecs.prompt_names import GROUP_KEYS
from teams_runtime.monitoring._call_groups import full_history_tokens
from teams_runtime.monitoring._learned import SEED_BYTES, seeded_ratios
from teams_runtime.monitoring._log_sinks import (
    PROMPT_LOG_NAME,
    configure_logging,
    log_to_workspace,
    stop_logging,
)
from teams_runtime.monitoring._metrics_report import (
    Filters,
    MetricsReport,
    Skipped,
    aggregate,
    group_value,
    log_files,
    matching_records,
    read_records,
)
from teams_runtime.monitoring._report_table import render_report
from teams_runtime.monitoring._workspace_facts import rate_cards_of, statuses_of

__all__ = [
    "GROUP_KEYS",
    "PROMPT_LOG_NAME",
    "SEED_BYTES",
    "Filters",
    "MetricsReport",
    "Skipped",
    "aggregate",
    "configure_logging",
    "full_history_tokens",
    "group_value",
    "log_files",
    "log_to_workspace",
    "matching_records",
    "rate_cards_of",
    "read_records",
    "render_report",
    "seeded_ratios",
    "statuses_of",
    "stop_logging",
]
