"""``teams-runtime metrics`` and ``replay``: the prompt records in the logs added up per group
(compaction, tokens, cost, latency), or drawn as bars with ``--chart``; and the calls they show
replayed under other policies and layouts (``monitoring.replay``, no model called).

The table is ``monitoring``'s. The chart (``--chart``): per day (or hour), the input tokens sent
with compaction on against what the full history would have cost. Its records are the table's
own: filtered (and skipped) by ``matching_records``, bucketed by ``group_value`` (a bar pair is
a ``--by day`` or ``--by hour`` group), and estimated by ``full_history_tokens``, each call from
its own tokens per character (its ``prompt_tokens`` over its ``prompt_chars``, times its
``full_history_chars``), as docs/monitoring.md says. Only calls whose server reported tokens
are counted; when none did, the chart is in characters, and says so. Records with compaction
off are left out (counted in a note): they have nothing to compare. Its own sums are a few per
bucket, so it reads a large log faster than the table.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from teams_runtime.cli._flags import (
    FOUND_WORKSPACE,
    add_json,
    add_workspace,
    cache_ttl,
    event_count,
    hours,
    role_name,
    timestamp,
)
from teams_runtime.cli._migrate import records_by_id
from teams_runtime.cli._output import UserError, write_json
from teams_runtime.cli._parser import PROG
from teams_runtime.codecs.config import CONFIG_FILE_NAME, DEFAULT_STEP
from teams_runtime.codecs.formats import JsonObject, count_of
from teams_runtime.codecs.prompt_names import GROUP_KEYS, PURPOSES
from teams_runtime.codecs.request_ids import check_request_id
from teams_runtime.exceptions import TeamsRuntimeError
from teams_runtime.monitoring import (
    Filters,
    MetricsReport,
    Skipped,
    aggregate,
    full_history_tokens,
    group_value,
    log_files,
    matching_records,
    rate_cards_of,
    read_records,
    render_report,
    statuses_of,
)
from teams_runtime.monitoring.replay import (
    DEFAULT_CACHE_TTL,
    DEFAULT_POLICIES,
    LAYOUTS,
    POLICY_FORMS,
    Policy,
    ReplaySetup,
    asked_layouts,
    asked_policies,
    parse_policy,
    render_replay_chart,
    render_replay_table,
    replay,
    replay_json,
)
from teams_runtime.policy.token_counts import LearnedRatios
from teams_runtime.storage import Workspace, load_team_config
from teams_runtime.storage.opening import blocking_storage

__all__ = [
    "BAR_WIDTH",
    "cmd_metrics",
    "cmd_replay",
    "declare_metrics",
    "declare_replay",
    "metrics_filters",
    "metrics_json",
    "metrics_report",
    "render_chart",
]

BAR_WIDTH = 40  # characters of the longest bar


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
    metrics.set_defaults(handler=cmd_metrics)


def metrics_filters(args: argparse.Namespace) -> Filters:
    """What ``metrics``'s flags keep of the prompt records: a window (--hours, --since), a
    role, a purpose, a request."""
    since = args.since
    if args.hours is not None:
        since = (datetime.now().astimezone() - timedelta(hours=args.hours)).isoformat()
    return Filters(since=since, role=args.role, purpose=args.purpose, request_id=args.request_id)


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
    filters = metrics_filters(args)
    files = [path for workspace in workspaces for path in log_files(workspace.logs_dir)]
    if args.chart:
        print(render_chart(files, filters, args.per or "day"))
        return 0
    report = metrics_report(workspaces, files, filters, args.by or ["role", "purpose"])
    if args.json:
        write_json(metrics_json(report))
    elif report.totals.prompts == 0:
        print(
            f"no data: no prompt records match (read {count_of(len(files), 'log file')} in "
            f"{', '.join(str(w.logs_dir) for w in workspaces)}; "
            f"{report.skipped_lines} skipped lines)."
        )
    else:
        print(render_report(report))
    return 0


def metrics_report(
    workspaces: list[Workspace], files: list[Path], filters: Filters, by: list[str]
) -> MetricsReport:
    """The prompt records of ``files`` (the logs of ``workspaces``) that pass ``filters``, added
    up per group of ``by``, priced with the workspaces' rate cards."""
    with statuses_of(workspaces) as status_of:
        return aggregate(
            files, filters, by, rate_cards=rate_cards_of(workspaces), status_of=status_of
        )


def metrics_json(report: MetricsReport) -> JsonObject:
    """What ``metrics --json`` prints for ``report``."""
    return {**report.as_json(), "no_data": report.totals.prompts == 0}


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


# --- metrics --chart ------------------------------------------------------------------------------


@dataclass
class _Bucket:
    sent_tokens: float = 0.0
    full_tokens: float = 0.0
    sent_chars: int = 0
    full_chars: int = 0


def _bar(value: float, most: float) -> str:
    filled = round(BAR_WIDTH * value / most) if most > 0 else 0
    return "█" * filled + "·" * (BAR_WIDTH - filled)


def render_chart(files: Iterable[Path], filters: Filters, per: str) -> str:
    """The chart of the records in ``files`` that pass ``filters``, a bar pair per ``per``
    (``day`` or ``hour``)."""
    buckets: dict[str, _Bucket] = {}
    with_tokens = without_tokens = disabled = 0
    skipped = Skipped()
    for record in matching_records(files, filters, skipped):
        if not record.enabled:
            disabled += 1
            continue
        bucket = buckets.setdefault(str(group_value(record, per)), _Bucket())  # a day, an hour
        bucket.sent_chars += record.prompt_chars
        bucket.full_chars += record.full_history_chars
        full = full_history_tokens(record)
        if full is None or record.prompt_tokens is None:
            without_tokens += 1
            continue
        with_tokens += 1
        bucket.sent_tokens += record.prompt_tokens
        bucket.full_tokens += full
    if not buckets:
        return "no data: no prompt records with compaction on match."
    in_tokens = with_tokens > 0
    unit = "input tokens" if in_tokens else "prompt characters"
    rows = {  # the labels sort as the times they name
        label: (b.sent_tokens, b.full_tokens) if in_tokens else (b.sent_chars, b.full_chars)
        for label, b in sorted(buckets.items())
    }
    most = max(full for _, full in rows.values())
    width = max(len(label) for label in rows)
    lines = [f"{unit} per {per}: sent (compaction on) against the full-history estimate"]
    for label, (sent, full) in rows.items():
        saved = f"  saved {100 * (1 - sent / full):.1f}%" if full > 0 else ""
        lines.append(f"{label:<{width}}  sent {_bar(sent, most)} {round(sent):>12,}")
        lines.append(f"{'':<{width}}  full {_bar(full, most)} {round(full):>12,}{saved}")
    if not in_tokens:
        lines.append("note: no server reported tokens for these prompts: shown in characters.")
    elif without_tokens:
        lines.append(
            f"note: {count_of(without_tokens, 'prompt')} without reported tokens not counted."
        )
    if disabled:
        lines.append(f"note: {count_of(disabled, 'prompt')} with compaction off not shown.")
    if skipped.lines:
        lines.append(f"note: {count_of(skipped.lines, 'skipped line')}.")
    return "\n".join(lines)


# --- replay ---------------------------------------------------------------------------------------


def _policy(text: str) -> Policy:
    try:
        return parse_policy(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def declare_replay(replay: argparse.ArgumentParser) -> None:
    """Declare ``replay``: its description, flags and handler."""
    replay.description = (
        "Rebuild, approximately, the prompt of every model call the prompt records show, under "
        "each policy and layout asked for (no model is called), and compare them: tokens, cost, "
        "the prefix a prompt cache could serve, evidence kept, budget overflows. See "
        "docs/monitoring.md, deciding with replay."
    )
    replay.add_argument(
        "--policy",
        action="append",
        type=_policy,
        metavar="P",
        help=f"a policy to replay, repeatable: {POLICY_FORMS} "
        f"(default: {', '.join(DEFAULT_POLICIES)})",
    )
    replay.add_argument(
        "--layout",
        action="append",
        choices=LAYOUTS,
        help=f"a prompt layout, repeatable (default: each of {', '.join(LAYOUTS)})",
    )
    replay.add_argument(
        "--step",
        type=event_count,
        metavar="N",
        help="the events the shared_prefix layout's tail grows by before it re-anchors "
        f"(default: the config's prompt_context.step, else {DEFAULT_STEP}); the recorded "
        "policy keeps each call's own",
    )
    replay.add_argument(
        "--cache-ttl",
        type=cache_ttl,
        default=DEFAULT_CACHE_TTL,
        metavar="SECONDS",
        help=f"how long a prompt cache keeps a prompt (default: {DEFAULT_CACHE_TTL:g})",
    )
    replay.add_argument(
        "--request", action="append", metavar="ID", help="only this request, repeatable"
    )
    replay.add_argument(
        "--from",
        dest="records_from",
        action="append",
        type=Path,
        metavar="FILE",
        help="a request record file (teams-runtime export) to replay instead of the stored "
        "record, repeatable; its calls are read from the workspace's logs",
    )
    add_workspace(replay)
    add_json(replay, 'print {"policies": [a row per policy and layout]} as JSON')
    replay.add_argument("--chart", action="store_true", help="draw the rows as bars")
    replay.set_defaults(handler=cmd_replay)


def cmd_replay(args: argparse.Namespace) -> int:
    if args.chart and args.json:
        raise UserError("--chart draws bars: give it without --json.")
    workspace = Workspace(args.workspace)
    if not workspace.config_path.exists():
        raise UserError(
            f"{workspace.root} is not a workspace (it has no {CONFIG_FILE_NAME}); pass the "
            "folder holding it with --workspace DIR."
        )
    config = load_team_config(workspace.root)
    given = records_by_id(args.records_from or [], "--from")
    wanted = {check_request_id(item) for item in args.request or []} | set(given)
    records = list(read_records(log_files(workspace.logs_dir), Skipped()))
    ratios = LearnedRatios()
    for record in records:
        if record.model is not None and record.prompt_tokens is not None:
            ratios.observe(record.model, record.prompt_tokens, record.prompt_chars)
    if wanted:
        records = [record for record in records if record.request_id in wanted]
        missing = sorted(wanted - {record.request_id for record in records})
        if missing:
            flag = "--from" if missing[0] in given else "--request"
            raise UserError(
                f"{flag}: no prompt records of request {missing[0]} in {workspace.logs_dir}."
            )
    try:
        layouts = asked_layouts(args.layout or LAYOUTS, args.step)
    except ValueError as exc:
        raise UserError(str(exc)) from None
    setup = ReplaySetup(config, config.telemetry.rate_cards, ratios, args.cache_ttl)
    policies = asked_policies(args.policy)
    with blocking_storage(workspace) as storage:

        def load(request_id: str) -> bytes | None:
            if request_id in given:
                return given[request_id]
            try:
                return storage.store.load(request_id)
            except (TeamsRuntimeError, OSError):
                return None

        report = replay(records, load, policies, layouts, setup)
    if args.json:
        write_json(replay_json(report))
    elif args.chart:
        print(render_replay_chart(report, args.cache_ttl))
    else:
        print(render_replay_table(report, args.cache_ttl))
    return 0
