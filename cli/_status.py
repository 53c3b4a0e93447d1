"""``teams-runtime status`` and ``purge-strays``: what a team is doing, as text, JSON or a view
redrawn (``--watch``), and the strays it names set aside.

The report itself is ``_status_report``'s; this module says it a line at a time, each failed
request and rejected envelope with the command that tries it again (``teams-runtime retry``;
a stray set aside is never tried again), each stray with why it is skipped (docs/cli.md,
``status``). ``status`` reads the store, the queue and the leases only: it loads no actor, no
anyio and no loguru, and starts fast.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from typing import Any

from teams_runtime.cli._flags import add_json, add_workspace, positive_count, seconds
from teams_runtime.cli._output import UserError, write_json
from teams_runtime.cli._request_status import cmd_request_status
from teams_runtime.cli._status_report import retry_hint, status_report
from teams_runtime.codecs.formats import count_of
from teams_runtime.storage import Workspace, load_team_config
from teams_runtime.storage.opening import blocking_storage

__all__ = [
    "DEFAULT_INTERVAL",
    "SHOWN_STRAYS",
    "cmd_purge_strays",
    "cmd_status",
    "declare_purge_strays",
    "declare_status",
    "report_lines",
    "watch_status",
]

DEFAULT_INTERVAL = 2.0  # seconds between the redraws of `status --watch`


def declare_status(status: argparse.ArgumentParser) -> None:
    """Declare ``status``: its description, flags and handler."""
    status.description = (
        "Per request: status, current role, hops, events, last event time; per "
        "role: envelopes waiting, claimed and deferred; per worker: its lease and what it "
        "holds. See docs/cli.md for the --json shape."
    )
    status.add_argument(
        "request_id",
        nargs="?",
        metavar="REQUEST_ID",
        help="one request alone: its status, hand-offs, last role, why it failed, its output",
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
    status.set_defaults(handler=cmd_status)


def cmd_status(args: argparse.Namespace) -> int:
    if args.request_id is not None and (args.watch or args.count or args.interval):
        raise UserError("--watch redraws the whole team: give it without REQUEST_ID.")
    if args.request_id is not None:
        return cmd_request_status(args)
    if args.watch and args.json:
        raise UserError("--watch redraws text: give it without --json.")
    if not args.watch and (args.count is not None or args.interval is not None):
        raise UserError("--interval and --count go with --watch.")
    if args.watch:
        interval = args.interval if args.interval is not None else DEFAULT_INTERVAL
        workspace = Workspace(args.workspace)
        return watch_status(lambda: report_lines(status_report(workspace)), interval, args.count)
    report = status_report(Workspace(args.workspace))
    if args.json:
        write_json(report)
    else:
        print("\n".join(report_lines(report)))
    return 0


def report_lines(report: dict[str, Any]) -> list[str]:
    """The text ``status`` prints for ``report``, a line each."""
    lines = []
    requests = report["requests"]
    lines.append(f"{count_of(len(requests), 'request')} in {report['workspace']}")
    if requests:
        lines.append(
            f"  {'request':<28} {'status':<12} {'role':<19} {'hops':>4} {'events':>6}  last event"
        )
    for row in requests:
        lines.append(
            f"  {row['request_id']:<28} {row['status']:<12} {row.get('current_role', ''):<19} "
            f"{row.get('hops', 0):>4} {row.get('events', 0):>6}  {row.get('last_event_at', '')}"
        )
    busy = {role: counts for role, counts in report["roles"].items() if any(counts.values())}
    lines.append("envelopes: " + (", ".join(
        f"{role} {c['waiting']} waiting/{c['claimed']} claimed/{c['deferred']} deferred"
        for role, c in busy.items()) or "none queued"))  # fmt: skip
    for server in report["model_servers_away"]:
        # "waiting" and "claimed" as in the envelopes line above: the same envelopes.
        what = f"model server {server['base_url']}"
        if server["model"] is not None:  # only that model's limits are reached
            what = f"model {server['model']} on {what}"
        lines.append(
            f"{what} away since {server['away_since']}: its roles "
            f"({', '.join(server['roles']) or 'none'}) take no new work; "
            f"{count_of(server['waiting'], 'envelope')} waiting, {server['claimed']} claimed"
        )
    for waiting in report["waiting_answers"]:
        due = " (overdue)" if waiting["overdue"] else ""
        lines.append(
            f"waiting for an answer: {waiting['role']}:{waiting['request_id']} from "
            f"{waiting['from_role']} since {waiting['since']}{due} (`teams-runtime inbox`)"
        )
    for deferred in report["deferred"]:
        due = deferred["due_in_seconds"]
        lines.append(
            f"deferred {deferred['role']}:{deferred['request_id']} "
            f"({count_of(deferred['deferrals'], 'deferral')}): next attempt at "
            f"{deferred['next_attempt_at']} ({f'in {due:g} s' if due else 'due now'})"
        )
    for worker in report["workers"]:
        state = "alive" if worker["alive"] else "lease expired"
        holds = ", ".join(worker["holds"]) or "nothing"
        lines.append(f"worker {worker['worker']}: {state}, holds {holds}")
    lines += hint_lines(report, report["max_hops"])  # what a person can try again, and how
    return lines + stray_lines(report["strays"])


_REASON_SHOWN = 200  # characters of a reason on its line (--json has it whole)


def _shortened(reason: str) -> str:
    return reason if len(reason) <= _REASON_SHOWN else reason[: _REASON_SHOWN - 3] + "..."


def _failed_line(row: dict[str, Any], max_hops: int) -> str:
    request_id = row["request_id"]
    said = f"failed {request_id} ({row.get('current_role') or 'no role'})"
    retry = f"`teams-runtime retry {request_id}`"
    if row.get("hops", 0) >= max_hops:  # a retry is refused until the limit is raised
        return (
            f"{said} at the hop limit ({count_of(row['hops'], 'hand-off')}, team.max_hops "
            f"{max_hops}): "
            f"raise team.max_hops in team_runtime.yaml, then {retry} queues its last step again"
        )
    failure = row.get("failure")
    if failure is not None:  # why, in one line (--json has the reason whole)
        said += f": {_shortened(failure['reason'])};"
    else:
        said += ":"
    return f"{said} {retry_hint(request_id, failure)}"


def hint_lines(report: dict[str, Any], max_hops: int) -> list[str]:
    """A line per failed request and per rejected envelope of ``report``, saying how to
    try it again (a request at ``max_hops``, the team's limit, needs it raised first); a
    stray set aside is not tried again."""
    lines = [_failed_line(row, max_hops) for row in report["requests"] if row["status"] == "failed"]
    for rejected in report["rejected"]:
        request_id = rejected["request_id"]
        reason = _shortened(rejected["reason"] or "no reason kept")
        if rejected["stray"]:  # put back, it would wait again where no role reads it
            lines.append(
                f"set aside stray{f' of {request_id}' if request_id else ''} ({reason}): no "
                "role reads where it came from, so `teams-runtime retry --rejected` leaves it; "
                "remove it by hand (`status --json` names it)"
            )
            continue
        again = "teams-runtime retry --rejected" + (f" {request_id}" if request_id else "")
        lines.append(
            f"rejected {rejected['role']}:{request_id or '?'} ({reason}): fix the cause, then "
            f"`{again}` puts it back"
        )
    return lines


SHOWN_STRAYS = 20  # lines of text at most; `--json` lists every one


def stray_lines(rows: list[dict[str, Any]]) -> list[str]:
    """One line per stray (the first ``SHOWN_STRAYS``, then how many more)."""
    lines = []
    for row in rows[:SHOWN_STRAYS]:
        if row["envelopes"]:
            lines.append(
                f"stray {row['where']} ({count_of(row['envelopes'], 'envelope')}): "
                f"{row['reason']}; `teams-runtime purge-strays` sets them aside"
            )
        else:
            lines.append(f"stray {row['where']}: {row['reason']}")
    if len(rows) > SHOWN_STRAYS:
        lines.append(
            f"... and {count_of(len(rows) - SHOWN_STRAYS, 'more stray')} (--json lists all)"
        )
    return lines


# --- status --watch -------------------------------------------------------------------------------
# The team's state redrawn every --interval seconds, for an operator on another terminal. On a
# terminal it is redrawn in place (rich, imported only then); otherwise each report is printed
# in turn under a line with its time, so a log or a pipe reads it too. Ctrl-C ends it (exit 0).


# What is drawn each time: the lines of a fresh status report.
Report = Callable[[], list[str]]


def _screen(report: Report, interval: float) -> str:
    from datetime import datetime  # only --watch: plain status prints no time

    at = datetime.now().astimezone().isoformat(timespec="seconds")
    lines = report()
    return "\n".join([f"teams-runtime status at {at} (every {interval:g} s; Ctrl-C ends)", *lines])


def watch_status(report: Report, interval: float, count: int | None) -> int:
    """Redraw ``report`` every ``interval`` seconds, ``count`` times (or until
    Ctrl-C)."""
    try:
        if sys.stdout.isatty():
            _watch_live(report, interval, count)
        else:
            _watch_plain(report, interval, count)
    except KeyboardInterrupt:
        pass
    return 0


def _drawn(count: int | None) -> range | _Forever:
    return range(count) if count is not None else _Forever()


class _Forever:
    def __iter__(self) -> _Forever:
        return self

    def __next__(self) -> int:
        return 0


def _watch_plain(report: Report, interval: float, count: int | None) -> None:
    for shown, _ in enumerate(_drawn(count)):
        if shown:
            time.sleep(interval)  # a human pace: what is watched changes on its own
            print()
        print(_screen(report, interval), flush=True)


def _watch_live(report: Report, interval: float, count: int | None) -> None:
    from rich.console import Console
    from rich.live import Live
    from rich.text import Text

    console = Console()
    with Live(console=console, auto_refresh=False, screen=False) as live:
        for shown, _ in enumerate(_drawn(count)):
            if shown:
                time.sleep(interval)
            live.update(Text(_screen(report, interval)), refresh=True)


# --- purge-strays ---------------------------------------------------------------------------------


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
    purge.set_defaults(handler=cmd_purge_strays)


def cmd_purge_strays(args: argparse.Namespace) -> int:
    workspace = Workspace(args.workspace)
    config = load_team_config(workspace.root)
    with blocking_storage(workspace, config) as storage:
        moved = storage.queue.set_aside_strays()
    if config.backend.kind == "nats":
        where = f"the stream {config.backend.nats.prefix}_rejected"
    else:
        where = str(workspace.queue_dir / "rejected")
    if args.json:
        write_json({"set_aside": moved, "rejected": where})
    else:
        print(f"Set aside {count_of(moved, 'stray envelope')} (no role reads them) in {where}.")
    return 0
