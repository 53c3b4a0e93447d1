"""The commands about one request: project, explain, append, prompt, cancel, retry, export,
import."""

from __future__ import annotations

from pathlib import Path

from teams_runtime.cli.common_flags import (
    Commands,
    add_json,
    add_overrides,
    add_selector,
    add_workspace,
)
from teams_runtime.cli.flag_types import not_empty, prompt_kind, role_name
from teams_runtime.cli.lazy_command import LazyCommand

__all__ = [
    "add_append",
    "add_cancel",
    "add_explain",
    "add_export",
    "add_import",
    "add_project",
    "add_prompt",
    "add_retry",
]


def add_project(commands: Commands) -> None:
    """Declare ``project`` and its flags."""
    project = commands.add_parser(
        "project",
        help="print a request as a prompt would embed it (notice + projected record)",
        description="Print the request as a role's prompt embeds it: the compaction notice "
        "(only when events were omitted), then `Current request:` and the projected record. "
        "The flags override prompt_context; the record is only read.",
    )
    add_selector(project)
    add_json(project, "print one JSON object with the notice, counts and record")
    project.set_defaults(handler=LazyCommand("teams_runtime.cli.record_commands", "cmd_project"))


def add_explain(commands: Commands) -> None:
    """Declare ``explain`` and its flags."""
    explain = commands.add_parser(
        "explain",
        help="say for every event whether the projection keeps it, and why",
        description="One line per event: its index, type, role identity and the projection's "
        "decision (tail, backfill for a role, or why it is omitted), under a line with the "
        "record's counts and the config used.",
    )
    add_selector(explain)
    add_json(explain)
    explain.set_defaults(handler=LazyCommand("teams_runtime.cli.record_commands", "cmd_explain"))


def add_append(commands: Commands) -> None:
    """Declare ``append`` and its flags."""
    append = commands.add_parser(
        "append",
        help="append events to a request record (locked, atomic; never loses an event)",
        description="Append one event given by flags, or JSON-lines events from a file or stdin. "
        "Every line is checked before anything is written.",
    )
    append.add_argument("request_id", metavar="REQUEST_ID")
    add_workspace(append)
    append.add_argument(
        "--type", dest="event_type", type=not_empty, metavar="T", help="the event type"
    )
    append.add_argument("--actor", type=not_empty, metavar="A", help="who did it (a role name)")
    append.add_argument(
        "--summary", type=not_empty, metavar="S", help="one line saying what happened"
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
    add_json(append)
    append.set_defaults(handler=LazyCommand("teams_runtime.cli.record_commands", "cmd_append"))


def add_cancel(commands: Commands) -> None:
    """Declare ``cancel`` and its flags."""
    cancel = commands.add_parser(
        "cancel",
        help="cancel a request: drop its queued envelopes and mark it cancelled",
        description="Drop the request's queued envelopes and mark it `cancelled` with an "
        "event. An envelope a worker holds finishes its model call; its outcome is then "
        "recorded without handing the request on.",
    )
    cancel.add_argument("request_id", metavar="REQUEST_ID")
    add_workspace(cancel)
    add_json(cancel)
    cancel.set_defaults(handler=LazyCommand("teams_runtime.cli.status", "cmd_cancel"))


def add_retry(commands: Commands) -> None:
    """Declare ``retry`` and its flags."""
    retry = commands.add_parser(
        "retry",
        help="queue a failed request's last step again, or put rejected envelopes back",
        description="Queue again the envelope of the step that failed REQUEST_ID (the record "
        "gets a `retried` event and is in progress again), or, with --rejected, put rejected "
        "envelopes back in their queues as they were (REQUEST_ID's, or every one). `status` "
        "lists failed requests and rejected envelopes.",
    )
    retry.add_argument(
        "request_id", nargs="?", metavar="REQUEST_ID", help="the request (optional with --rejected)"
    )
    retry.add_argument(
        "--rejected",
        action="store_true",
        help="put rejected envelopes back in their queues (after fixing their cause)",
    )
    add_workspace(retry)
    add_json(retry)
    retry.set_defaults(handler=LazyCommand("teams_runtime.cli.retry_command", "cmd_retry"))


def add_prompt(commands: Commands) -> None:
    """Declare ``prompt`` and its flags."""
    prompt = commands.add_parser(
        "prompt",
        help="print the prompt a role would get for a request, as it would be sent",
        description="Print the prompt ROLE would be sent for the request now, through the "
        "projection a running role uses. Nothing is sent and nothing is written.",
    )
    prompt.add_argument("request_id", metavar="REQUEST_ID")
    prompt.add_argument(
        "--role",
        required=True,
        type=role_name,
        metavar="ROLE",
        help="a role of the team (`config --graph` lists them)",
    )
    prompt.add_argument(
        "--kind",
        type=prompt_kind,
        metavar="KIND",
        help="the prompt kind, named as in the logs: the role's own (its prompt_kind: "
        "research_decision for research, version_control for version_controller, else "
        "role_task; the default) or contract_repair",
    )
    add_workspace(prompt)
    add_overrides(prompt)
    add_json(prompt, "print the prompt text, the notice and the counts as JSON")
    prompt.set_defaults(handler=LazyCommand("teams_runtime.cli.record_commands", "cmd_prompt"))


def add_export(commands: Commands) -> None:
    """Declare ``export`` and its flags."""
    export = commands.add_parser(
        "export",
        help="write a request as its canonical record file (the bytes the file backend holds)",
        description="Write the request as its canonical record file, from either backend: to "
        "standard output, or atomically to --out FILE. `import` loads it elsewhere.",
    )
    export.add_argument("request_id", metavar="REQUEST_ID", help="the request to export")
    export.add_argument(
        "--out", type=Path, metavar="FILE", help="write to FILE (default: standard output)"
    )
    add_workspace(export)
    export.set_defaults(handler=LazyCommand("teams_runtime.cli.migrate", "cmd_export"))


def add_import(commands: Commands) -> None:
    """Declare ``import`` and its flags."""
    load = commands.add_parser(
        "import",
        help="load record files into the workspace's backend (migration between backends)",
        description="Load record files (each <request id>.json, as `export` writes them) into "
        "the workspace's backend. Every file is checked first: nothing is written if one is "
        "not a record, names another request, or clashes with what the backend holds.",
    )
    load.add_argument(
        "files", nargs="+", type=Path, metavar="FILE", help="record files (<request id>.json)"
    )
    add_workspace(load)
    load.set_defaults(handler=LazyCommand("teams_runtime.cli.migrate", "cmd_import"))
