"""The ``teams-runtime`` command line.

User errors exit 2 with ``teams-runtime: error: <message>`` on stderr and nothing on stdout.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from functools import partial
from importlib import metadata
from pathlib import Path
from typing import Any, NoReturn

import anyio
import msgspec
from loguru import logger

from teams_runtime import demo
from teams_runtime.actors.context import open_context
from teams_runtime.actors.roles import preview_prompt
from teams_runtime.actors.team import Team
from teams_runtime.codecs.config import (
    CONFIG_FILE_NAME,
    DEFAULT_CONFIG_TEXT,
    PromptContextConfig,
    load_team_config,
)
from teams_runtime.codecs.records import RecordFields, decode_event_head, decode_record
from teams_runtime.exceptions import (
    ConfigError,
    RecordError,
    TeamsRuntimeError,
    UnknownRequestError,
)
from teams_runtime.intake import submit
from teams_runtime.logs import configure_logging, stop_logging
from teams_runtime.metrics import GROUP_KEYS, Filters, log_files, render_report, summarise
from teams_runtime.projection import (
    explain_decisions,
    notice_text,
    project_fields,
    role_of_raw,
)
from teams_runtime.prompts import PROMPT_KINDS, PURPOSES, kind_for_role
from teams_runtime.roles import PUBLIC_ROLES, ROLES
from teams_runtime.workspace import Workspace

__all__ = ["main"]

PROG = "teams-runtime"


class _UserError(TeamsRuntimeError):
    """A mistake in how the command was called."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(2, f"{PROG}: error: {message}\n")


def _version() -> str:
    try:
        return metadata.version("teams-runtime")
    except metadata.PackageNotFoundError:  # running from a source tree without installing
        return "unknown"


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be a positive integer")
    return value


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r} must be a positive number")
    return value


def _timestamp(text: str) -> str:
    """An ISO-8601 time; without an offset it is taken as local time."""
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not an ISO-8601 time (e.g. 2026-11-30T08:00:00+01:00)"
        ) from None
    if moment.tzinfo is None:
        moment = moment.astimezone()
    return moment.isoformat()


def _add_workspace(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--workspace",
        type=Path,
        default=Path("."),
        metavar="DIR",
        help="the workspace folder (default: the current folder)",
    )


def _add_selector(parser: argparse.ArgumentParser) -> None:
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
    _add_workspace(parser)
    parser.add_argument(
        "--recent-events",
        type=_positive_int,
        metavar="N",
        help="override prompt_context.recent_events",
    )
    parser.add_argument(
        "--max-events", type=_positive_int, metavar="N", help="override prompt_context.max_events"
    )
    parser.add_argument(
        "--disable",
        action="store_true",
        help="project as with prompt_context.enabled: false (full history)",
    )


def _build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog=PROG,
        description="Run teams of model-backed roles with bounded prompt context.",
        epilog="Start with `teams-runtime demo`, then `teams-runtime init DIR`. Docs: docs/cli.md. "
        "Exit status 2 means the command was used wrongly.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    commands = parser.add_subparsers(
        dest="command", required=True, metavar="COMMAND", parser_class=_Parser
    )

    init = commands.add_parser("init", help="create a workspace with a default team_runtime.yaml")
    init.add_argument(
        "directory",
        nargs="?",
        type=Path,
        default=Path("."),
        metavar="DIR",
        help="the workspace folder (created if missing; default: current folder)",
    )
    init.set_defaults(handler=_cmd_init)

    check = commands.add_parser(
        "config", help="check team_runtime.yaml and print the configuration in force"
    )
    _add_workspace(check)
    check.set_defaults(handler=_cmd_config)

    project = commands.add_parser(
        "project", help="print a request as a prompt would embed it (notice + projected record)"
    )
    _add_selector(project)
    project.add_argument(
        "--json",
        action="store_true",
        help="print one JSON object with the notice, counts and record",
    )
    project.set_defaults(handler=_cmd_project)

    explain = commands.add_parser(
        "explain", help="say for every event whether the projection keeps it, and why"
    )
    _add_selector(explain)
    explain.set_defaults(handler=_cmd_explain)

    append = commands.add_parser(
        "append",
        help="append events to a request record (locked, atomic; never loses an event)",
        description="Append one event given by flags, or JSON-lines events from a file or stdin. "
        "Every line is checked before anything is written.",
    )
    append.add_argument("request_id", metavar="REQUEST_ID")
    _add_workspace(append)
    append.add_argument("--type", dest="event_type", metavar="T", help="the event type")
    append.add_argument("--actor", metavar="A", help="who did it (a role name)")
    append.add_argument("--summary", metavar="S", help="one line saying what happened")
    append.add_argument("--payload", metavar="JSON", help="a JSON object with details")
    append.add_argument(
        "--from",
        dest="source",
        metavar="FILE",
        help="read JSON-lines events from FILE ('-' for stdin)",
    )
    append.set_defaults(handler=_cmd_append)

    submit = commands.add_parser(
        "submit",
        help="queue work for a role (creates the request record if it is new)",
        description="Create a request (status queued, events created + delegated) or add a "
        "delegated event to an existing one, and queue an envelope for ROLE. "
        "`teams-runtime run` handles it.",
    )
    _add_workspace(submit)
    submit.add_argument(
        "--role",
        required=True,
        choices=PUBLIC_ROLES,
        metavar="ROLE",
        help=f"who gets the work: {', '.join(PUBLIC_ROLES)}",
    )
    submit.add_argument("--scope", required=True, metavar="TEXT", help="what is asked, in a line")
    submit.add_argument("--body", default="", metavar="TEXT", help="details")
    submit.add_argument("--intent", default="", metavar="I", help="e.g. implement, review, fix")
    submit.add_argument("--urgency", default="normal", metavar="U", help="default: normal")
    submit.add_argument(
        "--request-id",
        metavar="ID",
        help="an existing or new id (default: a new req-YYYYMMDD-HHMMSS-xxxx)",
    )
    submit.set_defaults(handler=_cmd_submit)

    run = commands.add_parser(
        "run",
        help="run the team: every role handles its queued envelopes",
        description="Start the ContextActor and one actor per role. With --once, handle all "
        "queued work (and the work it creates), then exit 0; without, run until Ctrl-C or "
        "SIGTERM (envelopes in flight stay queued for the next run).",
    )
    _add_workspace(run)
    run.add_argument("--once", action="store_true", help="exit when the queue is empty")
    run.add_argument("--verbose", action="store_true", help="debug lines on stderr")
    run.set_defaults(handler=_cmd_run)

    prompt = commands.add_parser(
        "prompt", help="print the prompt a role would get for a request, as it would be sent"
    )
    prompt.add_argument("request_id", metavar="REQUEST_ID")
    prompt.add_argument(
        "--role", required=True, choices=ROLES, metavar="ROLE", help=f"one of: {', '.join(ROLES)}"
    )
    prompt.add_argument(
        "--kind",
        choices=PROMPT_KINDS,
        help="the prompt kind (default: the role's own: research_decision for "
        "research, version_control for version_controller, else task)",
    )
    _add_workspace(prompt)
    prompt.add_argument(
        "--disable",
        action="store_true",
        help="as with prompt_context.enabled: false (full history)",
    )
    prompt.add_argument(
        "--json",
        action="store_true",
        help="print the prompt text, the notice and the counts as JSON",
    )
    prompt.set_defaults(handler=_cmd_prompt)

    metrics = commands.add_parser(
        "metrics",
        help="aggregate the prompt records in the logs: compaction counts, sizes, savings",
        description="Read every .teams_runtime/logs/prompt_context*.jsonl file (rotated ones "
        "too) and aggregate the prompt records per group. See docs/monitoring.md.",
    )
    _add_workspace(metrics)
    window = metrics.add_mutually_exclusive_group()
    window.add_argument("--hours", type=_positive_float, metavar="H", help="only the last H hours")
    window.add_argument(
        "--since",
        type=_timestamp,
        metavar="ISO",
        help="only records at or after this time (e.g. 2026-11-30T08:00+01:00)",
    )
    metrics.add_argument("--role", choices=ROLES, metavar="R", help="only this role")
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
        help="group by role, purpose, enabled or day; repeat to combine "
        "(default: --by role --by purpose)",
    )
    metrics.add_argument("--json", action="store_true", help="print the report as JSON")
    metrics.set_defaults(handler=_cmd_metrics)

    run_demo = commands.add_parser(
        "demo", help="run a team (dry run, no model) on requests with long histories"
    )
    run_demo.add_argument(
        "--keep",
        type=Path,
        metavar="DIR",
        help="build the demo workspace in DIR and keep it (must not exist)",
    )
    run_demo.set_defaults(handler=_cmd_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit status."""
    args = _build_parser().parse_args(argv)
    handler: Callable[[argparse.Namespace], int] = args.handler
    try:
        return handler(args)
    except TeamsRuntimeError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader (e.g. `| head`) went away: stop quietly, as other Unix tools do.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


def _cmd_init(args: argparse.Namespace) -> int:
    workspace = Workspace(args.directory)
    if workspace.config_path.exists():
        raise _UserError(
            f"{workspace.config_path} already exists; not overwriting it "
            "(edit it, or remove it first to start over)."
        )
    try:
        workspace.requests_dir.mkdir(parents=True, exist_ok=True)
        with workspace.config_path.open("x", encoding="utf-8") as handle:
            handle.write(DEFAULT_CONFIG_TEXT)
    except OSError as exc:
        raise _UserError(f"cannot create the workspace in {workspace.root}: {exc}") from exc
    print(f"Initialised workspace {workspace.root} ({CONFIG_FILE_NAME}, .teams_runtime/requests/).")
    return 0


def _cmd_config(args: argparse.Namespace) -> int:
    config = load_team_config(args.workspace)
    sys.stdout.write(msgspec.json.format(msgspec.json.encode(config), indent=2).decode() + "\n")
    return 0


def _selected_config(args: argparse.Namespace) -> PromptContextConfig:
    """The workspace's prompt_context, with the command's flags on top."""
    workspace = Workspace(args.workspace)
    if args.record is not None and not workspace.config_path.exists():
        base = PromptContextConfig()
    else:
        base = load_team_config(workspace.root).prompt_context
    overrides: dict[str, Any] = {}
    if args.recent_events is not None:
        overrides["recent_events"] = args.recent_events
    if args.max_events is not None:
        overrides["max_events"] = args.max_events
    if args.disable:
        overrides["enabled"] = False
    if not overrides:
        return base
    try:
        return msgspec.structs.replace(base, **overrides)
    except ConfigError:
        raise _UserError(
            f"recent_events {overrides.get('recent_events', base.recent_events)} is greater than "
            f"max_events {overrides.get('max_events', base.max_events)}: max_events must be "
            "greater than or equal to recent_events (change --recent-events or --max-events)."
        ) from None


def _record_source(args: argparse.Namespace) -> Path:
    if args.record is not None:
        return Path(args.record)
    return Workspace(args.workspace).request_path(args.request_id)


def _selected_record(args: argparse.Namespace) -> RecordFields:
    """The decoded fields of the selected record file (read and decoded once)."""
    path = _record_source(args)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        if args.record is not None:
            raise RecordError(f"{path}: no such record file.") from None
        raise UnknownRequestError(
            f"no request {args.request_id!r} in {path.parent} (expected {path.name}); "
            "check the id and --workspace."
        ) from None
    except OSError as exc:
        raise RecordError(f"{path}: cannot be read ({exc.strerror}).") from exc
    return decode_record(data, str(path))


def _cmd_project(args: argparse.Namespace) -> int:
    config = _selected_config(args)
    projection = project_fields(_selected_record(args), config)
    if args.json:
        output = {
            "notice": projection.notice,
            "total_events": projection.total_events,
            "included_events": projection.included_events,
            "omitted_events": projection.omitted_events,
            "compacted": projection.compacted,
            "selected_indices": projection.selected_indices,
            "backfilled": projection.backfilled,
            "request": projection.fields,
        }
        sys.stdout.write(msgspec.json.format(msgspec.json.encode(output), indent=2).decode())
        sys.stdout.write("\n")
        return 0
    notice = notice_text(projection)
    if notice:
        sys.stdout.write(notice + "\n\n")
    sys.stdout.write("Current request:\n")
    sys.stdout.write(b"".join(projection.iter_record_json()).decode())
    sys.stdout.write("\n")
    return 0


def _cmd_explain(args: argparse.Namespace) -> int:
    config = _selected_config(args)
    fields = _selected_record(args)
    source = _record_source(args)
    projection = project_fields(fields, config)
    events = fields.get("events")
    if not isinstance(events, list):
        print(f"{source}: `events` is not a list; the record passes through unchanged.")
        return 0
    roles = [role_of_raw(raw) for raw in events]
    decisions = explain_decisions(projection, roles)
    print(
        f"{source}: {projection.total_events} events, {projection.included_events} included, "
        f"{projection.omitted_events} omitted (recent_events={config.recent_events}, "
        f"max_events={config.max_events}, enabled={str(config.enabled).lower()})"
    )
    print(f"{'index':>5}  {'type':<26}  {'role':<20}  decision")
    for index, (raw, role, decision) in enumerate(zip(events, roles, decisions, strict=True)):
        print(f"{index:>5}  {_event_type(raw):<26}  {role or '-':<20}  {decision}")
    return 0


def _event_type(raw: msgspec.Raw) -> str:
    try:
        head = decode_event_head(raw)
    except msgspec.DecodeError:
        return "(unreadable)"
    if head is None:
        return "(not an object)"
    for value in (head.type, head.event_type):
        if isinstance(value, str) and value.strip():
            return value.strip()[:26]
    return "(no type)"


def _events_from_flags(args: argparse.Namespace) -> list[dict[str, Any]]:
    missing = [flag for flag, value in (("--type", args.event_type), ("--actor", args.actor),
               ("--summary", args.summary)) if value is None]  # fmt: skip
    if missing:
        raise _UserError(f"append needs --from, or --type, --actor and --summary (missing: "
                         f"{', '.join(missing)}).")  # fmt: skip
    event: dict[str, Any] = {"type": args.event_type, "actor": args.actor, "summary": args.summary}
    if args.payload is not None:
        try:
            payload = msgspec.json.decode(args.payload)
        except msgspec.DecodeError as exc:
            raise _UserError(f"--payload is not valid JSON ({exc}).") from None
        if not isinstance(payload, dict):
            raise _UserError("--payload must be a JSON object.")
        event["payload"] = payload
    return [event]


def _events_from_lines(source: str) -> list[dict[str, Any]]:
    name = "stdin" if source == "-" else source
    try:
        if source == "-":
            lines = sys.stdin.buffer.read().splitlines()
        else:
            lines = Path(source).read_bytes().splitlines()
    except OSError as exc:
        raise _UserError(f"{name}: cannot be read ({exc.strerror}).") from None
    events = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            event = msgspec.json.decode(line)
        except msgspec.DecodeError as exc:
            raise _UserError(f"{name} line {number}: not valid JSON ({exc}); nothing was "
                             "appended.") from None  # fmt: skip
        if not isinstance(event, dict):
            raise _UserError(f"{name} line {number}: an event must be a JSON object; nothing "
                             "was appended.")  # fmt: skip
        events.append(event)
    if not events:
        raise _UserError(f"{name}: no events to append.")
    return events


def _cmd_append(args: argparse.Namespace) -> int:
    flags = (args.event_type, args.actor, args.summary, args.payload)
    if args.source is not None and any(value is not None for value in flags):
        raise _UserError("give either --from or --type/--actor/--summary/--payload, not both.")
    events = _events_from_lines(args.source) if args.source else _events_from_flags(args)
    workspace = Workspace(args.workspace)
    workspace.request_path(args.request_id)  # an unsafe id is an error before any I/O

    async def append() -> int:
        async with open_context(workspace.root) as context:
            return await context.append_events(args.request_id, events)

    count = anyio.run(append)
    print(f"Appended {len(events)} event(s) to {args.request_id}; it now has {count} events.")
    return 0


def _cmd_submit(args: argparse.Namespace) -> int:
    load_team_config(args.workspace)  # a broken or missing config is an error before any write
    done = anyio.run(
        partial(
            submit,
            args.workspace,
            role=args.role,
            scope=args.scope,
            body=args.body,
            intent=args.intent,
            urgency=args.urgency,
            request_id=args.request_id,
        )
    )
    state = "new request" if done.created else "existing request"
    print(f"Queued {done.request_id} for {args.role} ({state}); run `teams-runtime run --once`.")
    return 0


async def _run_until_signal(team: Team) -> None:
    async with anyio.create_task_group() as group:

        async def stop_on_signal() -> None:
            with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
                async for received in signals:
                    logger.warning("{} received: stopping the team", signal.Signals(received).name)
                    group.cancel_scope.cancel()
                    return

        group.start_soon(stop_on_signal)
        await team.run(once=False)


def _cmd_run(args: argparse.Namespace) -> int:
    workspace = Workspace(args.workspace)
    team = Team(workspace.root, load_team_config(workspace.root))
    configure_logging(workspace, console_level="DEBUG" if args.verbose else "INFO")
    try:
        if args.once:
            summary = anyio.run(partial(team.run, once=True))
            print(
                f"Handled {summary.handled} envelope(s): {summary.failed} failed, "
                f"{summary.deferred} left queued, {summary.rejected} rejected; "
                f"{summary.prompts_sent} prompts sent."
            )
        else:
            anyio.run(_run_until_signal, team)
            print(f"Stopped; {team.queue.pending_count()} envelope(s) queued for the next run.")
    finally:
        stop_logging()
    return 0


def _cmd_prompt(args: argparse.Namespace) -> int:
    workspace = Workspace(args.workspace)
    config = load_team_config(workspace.root).prompt_context
    if args.disable:
        config = msgspec.structs.replace(config, enabled=False)
    kind = args.kind or kind_for_role(args.role)
    bundle = anyio.run(partial(preview_prompt, workspace, args.request_id, args.role, kind, config))
    if args.json:
        projection = bundle.projection
        output = {
            "role": bundle.role,
            "kind": bundle.kind,
            "purpose": bundle.purpose,
            "notice": projection.notice,
            "total_events": projection.total_events,
            "included_events": projection.included_events,
            "omitted_events": projection.omitted_events,
            "compacted": projection.compacted,
            "prompt": bundle.text(),
        }
        sys.stdout.write(msgspec.json.format(msgspec.json.encode(output), indent=2).decode())
        sys.stdout.write("\n")
        return 0
    for chunk in bundle.iter_chunks():
        sys.stdout.write(chunk)
    return 0


def _cmd_metrics(args: argparse.Namespace) -> int:
    workspace = Workspace(args.workspace)
    since = args.since
    if args.hours is not None:
        since = (datetime.now().astimezone() - timedelta(hours=args.hours)).isoformat()
    filters = Filters(since=since, role=args.role, purpose=args.purpose, request_id=args.request_id)
    files = log_files(workspace.logs_dir)
    report = summarise(files, filters, args.by or ["role", "purpose"])
    if args.json:
        output = {**msgspec.structs.asdict(report), "no_data": report.totals["prompts"] == 0}
        sys.stdout.write(msgspec.json.format(msgspec.json.encode(output), indent=2).decode())
        sys.stdout.write("\n")
    elif report.totals["prompts"] == 0:
        print(
            f"no data: no prompt records match (read {len(files)} log file(s) in "
            f"{workspace.logs_dir}; {report.skipped_lines} skipped lines)."
        )
    else:
        print(render_report(report))
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    return demo.run(keep=args.keep)
