"""The commands about a workspace and its team: init, config, submit, run, status, metrics, demo."""

from __future__ import annotations

import argparse
from pathlib import Path

from teams_runtime.cli._flags import (
    FOUND_WORKSPACE,
    add_json,
    add_workspace,
    hours,
    positive_count,
    role_name,
    seconds,
    timestamp,
)
from teams_runtime.cli.lazy_command import LazyCommand
from teams_runtime.codecs.prompt_names import GROUP_KEYS, PURPOSES

__all__ = [
    "declare_metrics",
    "declare_purge_strays",
    "declare_status",
]


def declare_status(status: argparse.ArgumentParser) -> None:
    """Declare ``status``: its description, flags and handler."""
    status.description = (
        "Per request: status, current role, hops, events, last event time; per "
        "role: envelopes waiting, claimed and deferred; per worker: its lease and what it "
        "holds. See docs/cli.md for the --json shape."
    )
    add_workspace(status)
    add_json(status, "print one JSON object")
    status.add_argument(
        "--watch",
        action="store_true",
        help="redraw it every --interval seconds until Ctrl-C (in place on a terminal)",
    )
    status.add_argument(
        "--interval",
        type=seconds,
        metavar="S",
        help="seconds between redraws with --watch (default: 2)",
    )
    status.add_argument(
        "--count", type=positive_count, metavar="N", help="with --watch: stop after N redraws"
    )
    status.set_defaults(handler=LazyCommand("teams_runtime.cli.status", "cmd_status"))


def declare_purge_strays(purge: argparse.ArgumentParser) -> None:
    """Declare ``purge-strays``: its description, flags and handler."""
    purge.description = (
        "Move every envelope no role of the team reads out of the queue, to the "
        "rejected ones with the reason: on files, those in a queue folder named by no role "
        "(into .teams_runtime/queue/rejected/); on NATS, those on a queue subject no role "
        "consumer reads, or one the runtime never writes (into the PREFIX_rejected stream). "
        "Nothing a role reads is touched; other strays `status` names (files, KV keys) are "
        "left for you to remove."
    )
    add_workspace(purge)
    add_json(purge)
    purge.set_defaults(handler=LazyCommand("teams_runtime.cli.strays_command", "cmd_purge_strays"))


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
