"""Commands on a workspace and its team: ``init``, ``submit``, ``run``, ``metrics``, ``demo``
(``config`` is ``config_command``)."""

from __future__ import annotations

import argparse
import sys
from datetime import datetime, timedelta
from pathlib import Path

import msgspec

from teams_runtime.cli._output import UserError, write_json
from teams_runtime.cli._parser import PROG
from teams_runtime.codecs.config import (
    CONFIG_FILE_NAME,
)
from teams_runtime.codecs.formats import count_of
from teams_runtime.monitoring import (
    Filters,
    aggregate,
    log_files,
    rate_cards_of,
    render_report,
    statuses_of,
)
from teams_runtime.storage import Workspace

__all__ = ["cmd_metrics"]


def cmd_metrics(args: argparse.Namespace) -> int:
    if args.per is not None and not args.chart:
        raise UserError("--per goes with --chart (a bar pair per day or hour).")
    if args.chart and (args.json or args.by):
        raise UserError("--chart draws bars: give it without --json and --by.")
    # --workspace may be repeated (one folder per host); none given: the one found from here.
    folders = args.workspace if isinstance(args.workspace, list) else [args.workspace]
    workspaces = _distinct_workspaces(folders)
    for workspace in workspaces:
        if not workspace.config_path.exists():
            # Without this check a mistyped folder would read as a quiet workspace: "no data".
            raise UserError(
                f"{workspace.root} is not a workspace (it has no {CONFIG_FILE_NAME}); pass the "
                "folder holding it with --workspace DIR."
            )
    since = args.since
    if args.hours is not None:
        since = (datetime.now().astimezone() - timedelta(hours=args.hours)).isoformat()
    filters = Filters(since=since, role=args.role, purpose=args.purpose, request_id=args.request_id)
    files = [path for workspace in workspaces for path in log_files(workspace.logs_dir)]
    if args.chart:
        from teams_runtime.cli.metrics_chart import render_chart

        print(render_chart(files, filters, args.per or "day"))
        return 0
    with statuses_of(workspaces) as status_of:
        report = aggregate(
            files,
            filters,
            args.by or ["role", "purpose"],
            rate_cards=rate_cards_of(workspaces),
            status_of=status_of,
        )
    if args.json:
        output = {**msgspec.structs.asdict(report), "no_data": report.totals["prompts"] == 0}
        write_json(output)
    elif report.totals["prompts"] == 0:
        print(
            f"no data: no prompt records match (read {count_of(len(files), 'log file')} in "
            f"{', '.join(str(w.logs_dir) for w in workspaces)}; "
            f"{report.skipped_lines} skipped lines)."
        )
    else:
        print(render_report(report))
    return 0


def _distinct_workspaces(folders: list[Path]) -> list[Workspace]:
    """The workspaces of ``folders``, each once: a folder named twice (the same path, or
    another leading to it: ``..``, a link) would count its prompts twice. Says so on stderr."""
    first_named: dict[Path, Path] = {}
    workspaces = []
    for folder in folders:
        place = Path(folder).resolve()
        if place in first_named:
            print(
                f"{PROG}: note: --workspace {folder} is the folder already given as "
                f"{first_named[place]}; its logs are read once.",
                file=sys.stderr,
            )
            continue
        first_named[place] = Path(folder)
        workspaces.append(Workspace(folder))
    return workspaces
