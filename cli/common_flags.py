"""Flags several commands share: --json, --workspace, and a request's selector and overrides."""

from __future__ import annotations

import argparse
from pathlib import Path

from teams_runtime.cli.flag_types import event_count
from teams_runtime.codecs.config import EVENT_COUNT_LIMIT

__all__ = [
    "FOUND_WORKSPACE",
    "add_json",
    "add_overrides",
    "add_selector",
    "add_workspace",
]

JSON_HELP = "print one JSON object (see docs/cli.md)"


def add_json(parser: argparse.ArgumentParser, what: str = JSON_HELP) -> None:
    """Add --json, with ``what`` as its help."""
    parser.add_argument("--json", action="store_true", help=what)


# Where a command works when --workspace is not given (cli/workspace_option.py finds it).
FOUND_WORKSPACE = "the current folder or the nearest one above it holding team_runtime.yaml"


def add_workspace(parser: argparse.ArgumentParser) -> None:
    """Add --workspace (found from the current folder when not given)."""
    parser.add_argument(
        "--workspace",
        type=Path,
        default=None,
        metavar="DIR",
        help=f"the workspace folder (default: {FOUND_WORKSPACE})",
    )


def add_selector(parser: argparse.ArgumentParser) -> None:
    """Add the request a command reads (an id, or --record PATH) and its overrides."""
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument(
        "request_id",
        nargs="?",
        metavar="REQUEST_ID",
        help="a request in the workspace's .teams_runtime/requests/",
    )
    which.add_argument(
        "--record",
        type=Path,
        metavar="PATH",
        help="a request record file anywhere (defaults apply without a config)",
    )
    add_workspace(parser)
    add_overrides(parser)


def add_overrides(parser: argparse.ArgumentParser) -> None:
    """The flags that override prompt_context for one command (project, explain, prompt)."""
    parser.add_argument(
        "--recent-events",
        type=event_count,
        metavar="N",
        help=f"override prompt_context.recent_events (1 to {EVENT_COUNT_LIMIT})",
    )
    parser.add_argument(
        "--max-events",
        type=event_count,
        metavar="N",
        help=f"override prompt_context.max_events (1 to {EVENT_COUNT_LIMIT})",
    )
    parser.add_argument(
        "--disable",
        action="store_true",
        help="project as with prompt_context.enabled: false (full history)",
    )
