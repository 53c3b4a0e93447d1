"""Commands on a running team's state: ``status`` and ``cancel``."""

from __future__ import annotations

import argparse
import time
from typing import TYPE_CHECKING, Any

from teams_runtime.cli.output import UserError, write_json
from teams_runtime.cli.status_hints import hint_lines, rejected_rows
from teams_runtime.cli.status_strays import stray_lines, stray_rows
from teams_runtime.cli.waiting_view import waiting_rows
from teams_runtime.codecs.config import TeamConfig
from teams_runtime.codecs.formats import count_of, iso_of
from teams_runtime.codecs.request_records import EVENTS_KEY, decode_any
from teams_runtime.codecs.statuses import ENDED
from teams_runtime.exceptions import TeamsRuntimeError
from teams_runtime.storage import (
    IndexedParts,
    QueueSnapshot,
    Workspace,
    load_team_config,
)
from teams_runtime.storage.backends import blocking_backend
from teams_runtime.storage.server_files import servers_away

if TYPE_CHECKING:
    from teams_runtime.storage.blocking import BlockingRecordStore

__all__ = ["DEFAULT_INTERVAL", "cmd_cancel", "cmd_status", "report_lines", "status_report"]

DEFAULT_INTERVAL = 2.0  # seconds between the redraws of `status --watch`


def _text(fields: dict[str, Any], key: str) -> str:
    value = fields.get(key)
    return value if isinstance(value, str) else ""


def _request_row(store: BlockingRecordStore, request_id: str) -> dict[str, Any]:
    try:
        read = store.read(request_id, tail=1)
    except TeamsRuntimeError as exc:
        return {"request_id": request_id, "status": "unreadable", "error": str(exc)}
    if isinstance(read, IndexedParts):
        count, last = read.count, read.tail[-1:]
    else:
        events = read.fields.get(EVENTS_KEY)
        history = events if isinstance(events, list) else []
        count, last = len(history), history[-1:]
    last_event = decode_any(last[0]) if last else None
    hops = read.fields.get("hops")
    return {
        "request_id": request_id,
        "status": _text(read.fields, "status"),
        "current_role": _text(read.fields, "current_role"),
        "hops": hops if type(hops) is int else 0,
        "events": count,
        "last_event_at": _text(last_event, "timestamp") if isinstance(last_event, dict) else "",
    }


def _servers_away(
    workspace: Workspace, config: TeamConfig, snapshot: QueueSnapshot
) -> list[dict[str, Any]]:
    """The model servers a running worker waits for (``model_servers``' files), each with the
    roles it serves and their envelopes, counted as the ``roles`` block counts them: waiting
    (no worker took them: none will while it is away) and claimed (held by calls that wait)."""
    served: dict[str, list[str]] = {}  # base_url -> the roles whose model is on that server
    for role in config.cast.names:
        model = config.model_for(role)
        if model.backend == "openai" and model.openai is not None:
            served.setdefault(model.openai.base_url, []).append(role)
    rows = []
    for away in servers_away(workspace):
        roles = served.get(away.base_url, [])
        rows.append(
            {
                "base_url": away.base_url,
                "away_since": away.away_since,
                "roles": roles,
                "waiting": sum(snapshot.waiting[role] for role in roles),
                "claimed": sum(snapshot.claimed[role] for role in roles),
            }
        )
    return rows


def status_report(workspace: Workspace) -> dict[str, Any]:
    """Every request's state, every role's envelopes, every worker's lease: one object."""
    config = load_team_config(workspace.root)
    with blocking_backend(workspace, config) as backend:  # NATS connects, then closes
        snapshot = backend.queue.snapshot()
        rows = [_request_row(backend.store, request_id) for request_id in backend.store.list_ids()]
        strays = stray_rows(workspace, backend)
        rejected = rejected_rows(backend.rejected)
        waiting = backend.inbox.items()
    now = time.time()
    # Read only: an answer whose request ended waits no more (`inbox` removes it).
    ended = {row["request_id"] for row in rows if row["status"] in ENDED}
    return {
        "workspace": str(workspace.root.resolve()),
        "requests": rows,
        "max_hops": config.team.max_hops,  # a failed request at it needs it raised to retry
        "roles": {
            role: {
                "waiting": snapshot.waiting[role],
                "claimed": snapshot.claimed[role],
                "deferred": snapshot.deferred[role],
            }
            for role in config.cast.names
        },
        "model_servers_away": _servers_away(workspace, config, snapshot),
        "waiting_answers": waiting_rows([i for i in waiting if i.request_id not in ended], now),
        "deferred": [
            {
                "role": deferred.role,
                "request_id": deferred.request_id,
                "envelope_id": deferred.envelope_id,
                "deferrals": deferred.deferrals,
                "next_attempt_at": iso_of(deferred.next_attempt),
                "due_in_seconds": round(max(deferred.next_attempt - now, 0.0), 1),
            }
            for deferred in snapshot.deferred_envelopes
        ],
        "rejected": rejected,
        "workers": [
            {
                "worker": worker.worker,
                "alive": worker.alive,
                "lease_age_seconds": None
                if worker.lease_age is None
                else round(worker.lease_age, 1),
                "holds": worker.holds,
            }
            for worker in snapshot.workers
        ],
        "strays": strays,
    }


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
        lines.append(
            f"model server {server['base_url']} away since {server['away_since']}: its roles "
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


def cmd_status(args: argparse.Namespace) -> int:
    if args.watch and args.json:
        raise UserError("--watch redraws text: give it without --json.")
    if not args.watch and (args.count is not None or args.interval is not None):
        raise UserError("--interval and --count go with --watch.")
    if args.watch:
        from teams_runtime.cli.status_watch import watch_status  # rich only when watching

        interval = args.interval if args.interval is not None else DEFAULT_INTERVAL
        workspace = Workspace(args.workspace)
        return watch_status(lambda: report_lines(status_report(workspace)), interval, args.count)
    report = status_report(Workspace(args.workspace))
    if args.json:
        write_json(report)
    else:
        print("\n".join(report_lines(report)))
    return 0


def cmd_cancel(args: argparse.Namespace) -> int:
    # Imported here: `status` needs neither anyio nor the actors, and starts faster without.
    import anyio

    from teams_runtime.actors.intake import cancel

    load_team_config(args.workspace)  # a broken or missing config is an error before any write
    done = anyio.run(cancel, args.workspace, args.request_id)
    dropped = count_of(done.dropped, "queued envelope")
    if args.json:
        write_json(
            {
                "request_id": done.request_id,
                "already_cancelled": done.already,
                "dropped": done.dropped,
            }
        )
    elif done.already:
        print(f"{done.request_id} was already cancelled; dropped {dropped}.")
    else:
        print(
            f"Cancelled {done.request_id}; dropped {dropped}. A role working on it now "
            "finishes its call; its outcome is recorded without handing it on."
        )
    return 0
