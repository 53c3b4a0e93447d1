"""The commands about a workspace and its team: init, config, submit, run, status, metrics, demo."""

from __future__ import annotations

import argparse
from pathlib import Path

from teams_runtime.cli._flags import (
    FOUND_WORKSPACE,
    add_json,
    hours,
    role_name,
    timestamp,
)
from teams_runtime.cli.lazy_command import LazyCommand
from teams_runtime.codecs.prompt_names import GROUP_KEYS, PURPOSES

__all__ = [
    "declare_metrics",
]


def declare_metrics(metrics: argparse.ArgumentParser) -> None:
    """Declare ``metrics``: its description, flags and handler."""
    metrics.description = (
        "Read every .teams_runtime/logs/prompt_context*.jsonl file (rotated ones "
        "too) and aggregate the prompt records per group. See docs/monitoring.md."
    )
    metrics.add_argument(
        "--workspace",
        type=Path,
        action="append",
        metavar="DIR",
        help=f"a workspace folder whose logs to read (default: {FOUND_WORKSPACE}); repeat "
        "it to add up several hosts' folders",
    )
    window = metrics.add_mutually_exclusive_group()
    window.add_argument("--hours", type=hours, metavar="H", help="only the last H hours")
    window.add_argument(
        "--since",
        type=timestamp,
        metavar="ISO",
        help="only records at or after this time (e.g. 2026-11-30T08:00+01:00)",
    )
    metrics.add_argument("--role", type=role_name, metavar="R", help="only this role")
    metrics.add_argument(
        "--purpose",
        choices=sorted(PURPOSES.values()),
        metavar="P",
        help="only this purpose: " + ", ".join(sorted(PURPOSES.values())),
    )
    metrics.add_argument("--request-id", metavar="ID", help="only this request")
    metrics.add_argument(
        "--by",
        action="append",
        choices=GROUP_KEYS,
        metavar="KEY",
        help="group by role, purpose, enabled, model (the rate card key), day or hour; repeat "
        "to combine (default: --by role --by purpose)",
    )
    add_json(metrics, "print the report as JSON")
    metrics.add_argument(
        "--chart",
        action="store_true",
        help="draw input tokens with compaction on against the full-history estimate, as bars",
    )
    metrics.add_argument(
        "--per",
        choices=("day", "hour"),
        default=None,
        help="with --chart: a bar pair per day (the default) or per hour",
    )
    metrics.set_defaults(handler=LazyCommand("teams_runtime.cli.team_commands", "cmd_metrics"))
