"""Monitoring: the CLI's log sinks (``log_sinks``), and ``teams-runtime metrics`` over the
prompt records (``metrics_report`` reads and groups them, ``call_groups`` sums a group,
``report_table`` draws the table)."""

from __future__ import annotations

from teams_runtime.codecs.prompt_names import GROUP_KEYS
from teams_runtime.monitoring.log_sinks import PROMPT_LOG_NAME, configure_logging, stop_logging
from teams_runtime.monitoring.metrics_report import (
    Filters,
    MetricsReport,
    aggregate,
    log_files,
    read_records,
)
from teams_runtime.monitoring.report_table import render_report

__all__ = [
    "GROUP_KEYS",
    "PROMPT_LOG_NAME",
    "Filters",
    "MetricsReport",
    "aggregate",
    "configure_logging",
    "log_files",
    "read_records",
    "render_report",
    "stop_logging",
]
