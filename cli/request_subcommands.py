"""The commands about one request: project, explain, append, prompt, cancel, retry, export,
import."""

from __future__ import annotations

import argparse
from pathlib import Path

from teams_runtime.cli._flags import (
    add_workspace,
)
from teams_runtime.cli.lazy_command import LazyCommand

__all__ = [
    "declare_export",
    "declare_import",
]


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
