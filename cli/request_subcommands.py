"""The commands about one request: project, explain, append, prompt, cancel, retry, export,
import."""

from __future__ import annotations

import argparse
from pathlib import Path

from teams_runtime.cli._flags import (
    add_json,
    add_workspace,
    not_empty,
)
from teams_runtime.cli.lazy_command import LazyCommand

__all__ = [
    "declare_append",
    "declare_cancel",
    "declare_export",
    "declare_import",
    "declare_retry",
]


def declare_append(append: argparse.ArgumentParser) -> None:
    """Declare ``append``: its description, flags and handler."""
    append.description = (
        "Append one event given by flags, or JSON-lines events from a file or stdin. "
        "Every line is checked before anything is written."
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


def declare_cancel(cancel: argparse.ArgumentParser) -> None:
    """Declare ``cancel``: its description, flags and handler."""
    cancel.description = (
        "Drop the request's queued envelopes and mark it `cancelled` with an "
        "event. An envelope a worker holds finishes its model call; its outcome is then "
        "recorded without handing the request on."
    )
    cancel.add_argument("request_id", metavar="REQUEST_ID")
    add_workspace(cancel)
    add_json(cancel)
    cancel.set_defaults(handler=LazyCommand("teams_runtime.cli.status", "cmd_cancel"))


def declare_retry(retry: argparse.ArgumentParser) -> None:
    """Declare ``retry``: its description, flags and handler."""
    retry.description = (
        "Queue again the envelope of the step that failed REQUEST_ID (the record "
        "gets a `retried` event and is in progress again), or, with --rejected, put rejected "
        "envelopes back in their queues as they were (REQUEST_ID's, or every one). `status` "
        "lists failed requests and rejected envelopes."
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


def declare_export(export: argparse.ArgumentParser) -> None:
    """Declare ``export``: its description, flags and handler."""
    export.description = (
        "Write the request as its canonical record file, from either backend: to "
        "standard output, or atomically to --out FILE. `import` loads it elsewhere."
    )
    export.add_argument("request_id", metavar="REQUEST_ID", help="the request to export")
    export.add_argument(
        "--out", type=Path, metavar="FILE", help="write to FILE (default: standard output)"
    )
    add_workspace(export)
    export.set_defaults(handler=LazyCommand("teams_runtime.cli.migrate", "cmd_export"))


def declare_import(load: argparse.ArgumentParser) -> None:
    """Declare ``import``: its description, flags and handler."""
    load.description = (
        "Load record files (each <request id>.json, as `export` writes them) into "
        "the workspace's backend. Every file is checked first: nothing is written if one is "
        "not a record, names another request, or clashes with what the backend holds."
    )
    load.add_argument(
        "files", nargs="+", type=Path, metavar="FILE", help="record files (<request id>.json)"
    )
    add_workspace(load)
    load.set_defaults(handler=LazyCommand("teams_runtime.cli.migrate", "cmd_import"))
