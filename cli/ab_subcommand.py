"""The flags of ``ab``: an A/B run of compaction off and on (``ab_command``)."""

from __future__ import annotations

import argparse
from pathlib import Path

from teams_runtime.cli._flags import add_json, add_workspace, role_name
from teams_runtime.cli.lazy_command import LazyCommand

__all__ = ["declare_ab"]

_MOST_REQUESTS = 50


def _request_count(text: str) -> int:
    try:
        count = int(text)
    except ValueError:
        count = 0
    if not 1 <= count <= _MOST_REQUESTS:
        raise argparse.ArgumentTypeError(
            f"must be a whole number from 1 to {_MOST_REQUESTS}, not {text!r}"
        )
    return count


def declare_ab(ab: argparse.ArgumentParser) -> None:
    """Declare ``ab``: its description, flags and handler."""
    ab.description = (
        "Seed 48-event requests into two fresh workspaces made from this one's "
        "config (prompt_context.enabled false, then true; nothing else changed), run each on "
        "the configured models and compare tokens, cost, repairs, failures and p95 latency. "
        "The workspace's own requests are never touched. Exit status 1 when the after arm did "
        "not compact. See docs/monitoring.md."
    )
    add_workspace(ab)
    ab.add_argument(
        "--dry-run", action="store_true", help="answer with the dry-run backend (no model)"
    )
    ab.add_argument(
        "--keep",
        type=Path,
        metavar="DIR",
        help="make the arms in DIR/before and DIR/after and keep them (DIR must not exist)",
    )
    ab.add_argument(
        "--requests",
        type=_request_count,
        default=2,
        metavar="N",
        help="requests per arm (default 2)",
    )
    ab.add_argument(
        "--role",
        type=role_name,
        metavar="R",
        help="the role of the team the requests are queued for (default planner, or the "
        "team's first role that takes new work when it has no planner)",
    )
    add_json(ab, "print both arms as JSON")
    ab.set_defaults(handler=LazyCommand("teams_runtime.cli.ab_command", "cmd_ab"))
