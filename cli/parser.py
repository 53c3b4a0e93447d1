"""The ``teams-runtime`` argument parser: one function per command."""

from __future__ import annotations

import argparse
import sys
import unicodedata
from collections.abc import Sequence
from datetime import datetime
from importlib import metadata
from pathlib import Path
from typing import Any, NoReturn

from teams_runtime.cli.migrate import cmd_export, cmd_import
from teams_runtime.cli.output import PROG
from teams_runtime.cli.record_commands import cmd_append, cmd_explain, cmd_project, cmd_prompt
from teams_runtime.cli.status import cmd_cancel, cmd_status
from teams_runtime.cli.team_commands import (
    cmd_config,
    cmd_demo,
    cmd_init,
    cmd_metrics,
    cmd_run,
    cmd_submit,
)
from teams_runtime.codecs.config import BACKEND_KINDS, EVENT_COUNT_LIMIT, event_count_problem
from teams_runtime.codecs.roles import PUBLIC_ROLES, ROLES
from teams_runtime.monitoring import GROUP_KEYS
from teams_runtime.policy.prompts import KIND_NAMES, PURPOSES, PromptKind

__all__ = ["build_parser"]

_Commands = Any  # argparse's subparsers action (a private type)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(2, f"{PROG}: error: {message}\n")

    def parse_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> argparse.Namespace:
        """Parse like argparse, but an unknown flag is reported by the command it was given to
        (with that command's usage), not by the top-level parser."""
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            command = self._command_parser(getattr(parsed, "command", None))
            command.error(f"unrecognized arguments: {' '.join(extras)}")
        return parsed

    def _command_parser(self, name: str | None) -> argparse.ArgumentParser:
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction) and name in action.choices:
                chosen: argparse.ArgumentParser = action.choices[name]
                return chosen
        return self


_JSON_HELP = "print one JSON object (see docs/cli.md)"


def _version() -> str:
    try:
        return metadata.version("teams-runtime")
    except metadata.PackageNotFoundError:  # running from a source tree without installing
        return "unknown"


def _event_count(text: str) -> int:
    """--recent-events, --max-events: checked as the config's counts are (one rule, one
    message)."""
    try:
        value = int(text)
    except ValueError:
        digits = text.strip().lstrip("+-")
        if not (digits.isascii() and digits.isdigit()):
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        # More digits than int() reads: far beyond any bound, on the side of its sign.
        value = -1 if text.strip().startswith("-") else EVENT_COUNT_LIMIT + 1
    problem = event_count_problem(value)
    if problem is not None:
        raise argparse.ArgumentTypeError(f"{text!r} {problem}")
    return value


# --hours: a century of logs is more than any workspace holds; past it the time would overflow.
_MOST_HOURS = 876_000


def _hours(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be a positive number")
    if not value <= _MOST_HOURS:
        raise argparse.ArgumentTypeError(f"{text!r} must be at most {_MOST_HOURS} (a century)")
    return value


# Unicode's default-ignorable code points outside the format category (Cf), which are checked by
# category: fillers and selectors that show as nothing (Hangul fillers, variation selectors,
# the combining grapheme joiner, Khmer inherent vowels, Mongolian selectors), and the braille
# blank, which shows as a space.
_INVISIBLE = frozenset(
    [
        *(0x034F, 0x115F, 0x1160, 0x17B4, 0x17B5, 0x2800, 0x3164, 0xFFA0),
        *range(0x180B, 0x1810),
        *range(0xFE00, 0xFE10),
        *range(0xE0100, 0xE01F0),
    ]
)


def _is_blank(text: str) -> bool:
    """Whether ``text`` shows as nothing: whitespace, format characters (Cf: zero-width space,
    joiners, BOM, bidi marks) and the other invisible code points."""
    return all(
        char.isspace() or ord(char) in _INVISIBLE or unicodedata.category(char) == "Cf"
        for char in text
    )


def _not_empty(text: str) -> str:
    if _is_blank(text):
        raise argparse.ArgumentTypeError("must not be empty or blank")
    return text


def _prompt_kind(text: str) -> PromptKind:
    try:
        return KIND_NAMES[text]
    except KeyError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a prompt kind: {', '.join(PURPOSES.values())} "
            "(task and repair are accepted for role_task and contract_repair)"
        ) from None


def _timestamp(text: str) -> str:
    """An ISO-8601 time; without an offset it is taken as local time."""
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not an ISO-8601 time (e.g. 2026-11-30T08:00:00+01:00)"
        ) from None
    try:
        if moment.tzinfo is None:
            moment = moment.astimezone()
        moment.astimezone()  # the local time of it must exist too: filters compare in it
    except (OverflowError, ValueError, OSError):
        raise argparse.ArgumentTypeError(
            f"{text!r} is too far in the past or future to compare (e.g. 2026-11-30T08:00:00+01:00)"
        ) from None
    return moment.isoformat()


def _role_list(text: str) -> list[str]:
    roles = [part.strip() for part in text.split(",") if part.strip()]
    unknown = [role for role in roles if role not in ROLES]
    if not roles or unknown:
        raise argparse.ArgumentTypeError(
            f"{text!r} must be a comma-separated list of roles: {', '.join(ROLES)}"
        )
    return roles


def _add_json(parser: argparse.ArgumentParser, what: str = _JSON_HELP) -> None:
    parser.add_argument("--json", action="store_true", help=what)


# Where a command works when --workspace is not given (cli/workspace_option.py finds it).
_FOUND_WORKSPACE = "the current folder or the nearest one above it holding team_runtime.yaml"


def _add_workspace(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--workspace",
        type=Path,
        default=None,
        metavar="DIR",
        help=f"the workspace folder (default: {_FOUND_WORKSPACE})",
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
    _add_overrides(parser)


def _add_overrides(parser: argparse.ArgumentParser) -> None:
    """The flags that override prompt_context for one command (project, explain, prompt)."""
    parser.add_argument(
        "--recent-events",
        type=_event_count,
        metavar="N",
        help=f"override prompt_context.recent_events (1 to {EVENT_COUNT_LIMIT})",
    )
    parser.add_argument(
        "--max-events",
        type=_event_count,
        metavar="N",
        help=f"override prompt_context.max_events (1 to {EVENT_COUNT_LIMIT})",
    )
    parser.add_argument(
        "--disable",
        action="store_true",
        help="project as with prompt_context.enabled: false (full history)",
    )


def _add_init(commands: _Commands) -> None:
    init = commands.add_parser("init", help="create a workspace with a default team_runtime.yaml")
    init.add_argument(
        "directory",
        nargs="?",
        type=Path,
        default=Path("."),
        metavar="DIR",
        help="the workspace folder (created if missing; default: current folder)",
    )
    init.add_argument(
        "--backend",
        choices=BACKEND_KINDS,
        default="file",
        help="where requests and the queue live: file (this folder, the default) or nats "
        "(a NATS JetStream server shared by hosts; see docs/scaling.md)",
    )
    init.add_argument(
        "--nats-url",
        metavar="URL",
        help="the NATS server for --backend nats (default: nats://127.0.0.1:4222)",
    )
    init.set_defaults(handler=cmd_init)


def _add_config(commands: _Commands) -> None:
    check = commands.add_parser(
        "config", help="check team_runtime.yaml and print the configuration in force"
    )
    _add_workspace(check)
    check.set_defaults(handler=cmd_config)


def _add_project(commands: _Commands) -> None:
    project = commands.add_parser(
        "project", help="print a request as a prompt would embed it (notice + projected record)"
    )
    _add_selector(project)
    _add_json(project, "print one JSON object with the notice, counts and record")
    project.set_defaults(handler=cmd_project)


def _add_explain(commands: _Commands) -> None:
    explain = commands.add_parser(
        "explain", help="say for every event whether the projection keeps it, and why"
    )
    _add_selector(explain)
    _add_json(explain)
    explain.set_defaults(handler=cmd_explain)


def _add_append(commands: _Commands) -> None:
    append = commands.add_parser(
        "append",
        help="append events to a request record (locked, atomic; never loses an event)",
        description="Append one event given by flags, or JSON-lines events from a file or stdin. "
        "Every line is checked before anything is written.",
    )
    append.add_argument("request_id", metavar="REQUEST_ID")
    _add_workspace(append)
    append.add_argument(
        "--type", dest="event_type", type=_not_empty, metavar="T", help="the event type"
    )
    append.add_argument("--actor", type=_not_empty, metavar="A", help="who did it (a role name)")
    append.add_argument(
        "--summary", type=_not_empty, metavar="S", help="one line saying what happened"
    )
    append.add_argument("--payload", metavar="JSON", help="a JSON object with details")
    append.add_argument(
        "--from",
        dest="source",
        metavar="FILE",
        help="read JSON-lines events from FILE ('-' for stdin)",
    )
    append.add_argument(
        "--key",
        metavar="K",
        help="an idempotency key: run the same command again (after a timeout, say) and the "
        "events are not written twice",
    )
    _add_json(append)
    append.set_defaults(handler=cmd_append)


def _add_submit(commands: _Commands) -> None:
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
    submit.add_argument(
        "--scope", required=True, type=_not_empty, metavar="TEXT", help="what is asked, in a line"
    )
    submit.add_argument("--body", default="", metavar="TEXT", help="details")
    submit.add_argument("--intent", default="", metavar="I", help="e.g. implement, review, fix")
    submit.add_argument("--urgency", default="normal", metavar="U", help="default: normal")
    submit.add_argument(
        "--request-id",
        metavar="ID",
        help="an existing or new id (default: a new req-YYYYMMDD-HHMMSS-xxxx)",
    )
    _add_json(submit)
    submit.set_defaults(handler=cmd_submit)


def _add_run(commands: _Commands) -> None:
    run = commands.add_parser(
        "run",
        help="run the team: every role handles its queued envelopes",
        description="Start the ContextActor and one actor per role. Several `run` processes "
        "(on one machine or several sharing the folder) share the queue: each envelope is "
        "claimed by one worker. With --once, handle all queued work (and the work it creates), "
        "then exit 0; without, run until Ctrl-C or SIGTERM (envelopes in flight stay queued).",
    )
    _add_workspace(run)
    run.add_argument(
        "--once",
        action="store_true",
        help="exit when no envelope is waiting or claimed for any role, by any worker",
    )
    run.add_argument(
        "--roles",
        type=_role_list,
        metavar="R1,R2",
        help=f"serve only these roles (default: all: {','.join(ROLES)})",
    )
    run.add_argument("--verbose", action="store_true", help="debug lines on stderr")
    run.add_argument(
        "--plain",
        action="store_true",
        help="plain log lines on stderr even on a terminal (no live view)",
    )
    _add_json(run, "print the final summary as one JSON object (see docs/cli.md)")
    run.set_defaults(handler=cmd_run)


def _add_status(commands: _Commands) -> None:
    status = commands.add_parser(
        "status",
        help="requests, queued and claimed envelopes per role, and the workers alive",
        description="Per request: status, current role, hops, events, last event time; per "
        "role: envelopes waiting, claimed and deferred; per worker: its lease and what it "
        "holds. See docs/cli.md for the --json shape.",
    )
    _add_workspace(status)
    _add_json(status, "print one JSON object")
    status.set_defaults(handler=cmd_status)


def _add_cancel(commands: _Commands) -> None:
    cancel = commands.add_parser(
        "cancel",
        help="cancel a request: drop its queued envelopes and mark it cancelled",
        description="Drop the request's queued envelopes and mark it `cancelled` with an "
        "event. An envelope a worker holds finishes its model call; its outcome is then "
        "recorded without handing the request on.",
    )
    cancel.add_argument("request_id", metavar="REQUEST_ID")
    _add_workspace(cancel)
    _add_json(cancel)
    cancel.set_defaults(handler=cmd_cancel)


def _add_prompt(commands: _Commands) -> None:
    prompt = commands.add_parser(
        "prompt", help="print the prompt a role would get for a request, as it would be sent"
    )
    prompt.add_argument("request_id", metavar="REQUEST_ID")
    prompt.add_argument(
        "--role", required=True, choices=ROLES, metavar="ROLE", help=f"one of: {', '.join(ROLES)}"
    )
    prompt.add_argument(
        "--kind",
        type=_prompt_kind,
        metavar="KIND",
        help="the prompt kind, named as in the logs: the role's own (research_decision for "
        "research, version_control for version_controller, else role_task; the default) or "
        "contract_repair",
    )
    _add_workspace(prompt)
    _add_overrides(prompt)
    _add_json(prompt, "print the prompt text, the notice and the counts as JSON")
    prompt.set_defaults(handler=cmd_prompt)


def _add_metrics(commands: _Commands) -> None:
    metrics = commands.add_parser(
        "metrics",
        help="aggregate the prompt records in the logs: compaction counts, sizes, savings",
        description="Read every .teams_runtime/logs/prompt_context*.jsonl file (rotated ones "
        "too) and aggregate the prompt records per group. See docs/monitoring.md.",
    )
    metrics.add_argument(
        "--workspace",
        type=Path,
        action="append",
        metavar="DIR",
        help=f"a workspace folder whose logs to read (default: {_FOUND_WORKSPACE}); repeat "
        "it to add up several hosts' folders",
    )
    window = metrics.add_mutually_exclusive_group()
    window.add_argument("--hours", type=_hours, metavar="H", help="only the last H hours")
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
    _add_json(metrics, "print the report as JSON")
    metrics.set_defaults(handler=cmd_metrics)


def _add_export(commands: _Commands) -> None:
    export = commands.add_parser(
        "export",
        help="write a request as its canonical record file (the bytes the file backend holds)",
    )
    export.add_argument("request_id", metavar="REQUEST_ID", help="the request to export")
    export.add_argument(
        "--out", type=Path, metavar="FILE", help="write to FILE (default: standard output)"
    )
    _add_workspace(export)
    export.set_defaults(handler=cmd_export)


def _add_import(commands: _Commands) -> None:
    load = commands.add_parser(
        "import",
        help="load record files into the workspace's backend (migration between backends)",
    )
    load.add_argument(
        "files", nargs="+", type=Path, metavar="FILE", help="record files (<request id>.json)"
    )
    _add_workspace(load)
    load.set_defaults(handler=cmd_import)


def _add_demo(commands: _Commands) -> None:
    run_demo = commands.add_parser(
        "demo", help="run a team (dry run, no model) on requests with long histories"
    )
    run_demo.add_argument(
        "--keep",
        type=Path,
        metavar="DIR",
        help="build the demo workspace in DIR and keep it (must not exist)",
    )
    run_demo.add_argument(
        "--plain",
        action="store_true",
        help="no live view on stderr even on a terminal",
    )
    run_demo.set_defaults(handler=cmd_demo)


def build_parser() -> argparse.ArgumentParser:
    """The parser of every command; each command's ``handler`` is set as a default."""
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
    _add_init(commands)
    _add_config(commands)
    _add_project(commands)
    _add_explain(commands)
    _add_append(commands)
    _add_submit(commands)
    _add_run(commands)
    _add_status(commands)
    _add_cancel(commands)
    _add_prompt(commands)
    _add_metrics(commands)
    _add_export(commands)
    _add_import(commands)
    _add_demo(commands)
    return parser
