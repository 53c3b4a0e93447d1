"""``teams-runtime status REQUEST_ID``: one request as its reader wants it: its status, hand-offs,
the role that answered last, why it failed (``status``'s own reason), and its deliverable
(``result.output``) whole.

Read only, like ``status``: the store alone, no actor, no queue.
"""

from __future__ import annotations

import argparse
import time

from teams_runtime.cli._output import write_json
from teams_runtime.cli._status_report import _request_row, retry_hint, waiting_rows
from teams_runtime.codecs.formats import JsonObject, count_of, pretty_json
from teams_runtime.codecs.model import OUTPUT_KEY, has_output
from teams_runtime.codecs.request_ids import check_request_id
from teams_runtime.storage import Workspace, load_team_config
from teams_runtime.storage.opening import blocking_storage

__all__ = ["cmd_request_status", "request_status"]


def _text(fields: JsonObject, key: str) -> str:
    value = fields.get(key)
    return value if isinstance(value, str) else ""


def request_status(workspace: Workspace, request_id: str) -> JsonObject:
    """The request's row as ``status`` reports it (with its failure's reason, when it failed),
    the role that gave its latest result (``last_role``), that result's summary, and its
    deliverable (``output``: ``None`` when it has none). ``UnknownRequestError`` when there is
    no such request."""
    config = load_team_config(workspace.root)
    with blocking_storage(workspace, config) as storage:
        read = storage.store.read(request_id, tail=1)  # no such request: raised here
        row, _ = _request_row(storage.store, request_id, read)
        waiting = [item for item in storage.inbox.items() if item.request_id == request_id]
    result = read.fields.get("result")
    result = result if isinstance(result, dict) else {}
    output = result.get(OUTPUT_KEY)
    return {
        **row,
        "failure": row.get("failure"),  # why it failed, as `status` says it (None: it did not)
        "last_role": _text(result, "role"),
        "summary": _text(result, "summary"),
        # The answers a person owes it, as `inbox --json` shows them (none: []).
        "waiting_answers": waiting_rows(waiting, time.time()),
        OUTPUT_KEY: output if has_output(output) else None,
    }


def report_text(report: JsonObject) -> str:
    """What ``status REQUEST_ID`` prints: a few lines about the request, then its output whole."""
    request_id = report["request_id"]
    hops, events = report.get("hops", 0), report.get("events", 0)
    counts = f"{count_of(hops, 'hand-off')}, {count_of(events, 'event')}"
    last_at = report.get("last_event_at")
    head = f"request {request_id}: {report['status'] or 'no status'}, {counts}"
    lines = [head + (f", last at {last_at}" if last_at else "")]
    last, current = report["last_role"], report.get("current_role") or ""
    now_with = f" (now with {current})" if current and current != last else ""
    lines.append(f"last role: {last or 'none yet'}{now_with}")
    if report["summary"]:
        lines.append(f"summary: {report['summary']}")
    for waiting in report["waiting_answers"]:
        due = " (overdue)" if waiting["overdue"] else ""
        lines.append(
            f"waiting for an answer from {waiting['role']} since {waiting['since']}{due} "
            f"(`teams-runtime inbox show {request_id}`)"
        )
    failure = report["failure"]
    if failure is not None:
        lines.append(f"failed: {failure['reason']}")
    if report["status"] == "failed":
        lines.append(retry_hint(request_id, failure))
    output = report[OUTPUT_KEY]
    if output is None:
        lines.append("output: none")
    else:
        shown = output if isinstance(output, str) else pretty_json(output)
        lines += ["output:", shown.rstrip("\n")]
    return "\n".join(lines)


def cmd_request_status(args: argparse.Namespace) -> int:
    """``status REQUEST_ID``: the request's report, as text or ``--json``."""
    report = request_status(Workspace(args.workspace), check_request_id(args.request_id))
    if args.json:
        write_json(report)
    else:
        print(report_text(report))
    return 0
