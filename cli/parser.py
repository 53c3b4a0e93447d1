"""The ``teams-runtime`` argument parser: the commands in the order ``--help`` lists them.

Each command's flags are declared in ``request_subcommands``, ``team_subcommands`` or
``inbox_subcommands``; the flags several share in ``common_flags``, and the checks of their
values in ``flag_types``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from teams_runtime.cli.ab_subcommand import add_ab
from teams_runtime.cli.inbox_subcommands import add_answer, add_inbox
from teams_runtime.cli.output import PROG
from teams_runtime.cli.request_subcommands import (
    add_append,
    add_cancel,
    add_explain,
    add_export,
    add_import,
    add_project,
    add_prompt,
    add_retry,
)
from teams_runtime.cli.team_subcommands import (
    add_config,
    add_demo,
    add_init,
    add_metrics,
    add_purge_strays,
    add_run,
    add_status,
    add_submit,
)

__all__ = ["build_parser"]


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


def _version() -> str:
    # Imported here: reading the installed metadata costs ~10 ms, paid only by --version.
    from importlib import metadata

    try:
        return metadata.version("teams-runtime")
    except metadata.PackageNotFoundError:  # running from a source tree without installing
        return "unknown"


class _PrintVersion(argparse.Action):
    """--version, as argparse's own action prints it, with the version looked up only when
    the flag is given rather than each time the parser is built."""

    def __init__(self, option_strings: Sequence[str], dest: str, **_: object) -> None:
        super().__init__(
            option_strings,
            dest=argparse.SUPPRESS,
            default=argparse.SUPPRESS,
            nargs=0,
            help="show program's version number and exit",
        )

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        print(f"{parser.prog} {_version()}")
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    """The parser of every command; each command's ``handler`` is set as a default."""
    parser = _Parser(
        prog=PROG,
        description="Run teams of model-backed roles with bounded prompt context.",
        epilog="Start with `teams-runtime demo`, then `teams-runtime init DIR`. Docs: docs/cli.md. "
        "Exit status 2 means the command was used wrongly.",
    )
    parser.add_argument("--version", action=_PrintVersion)
    commands = parser.add_subparsers(
        dest="command", required=True, metavar="COMMAND", parser_class=_Parser
    )
    add_init(commands)
    add_config(commands)
    add_project(commands)
    add_explain(commands)
    add_append(commands)
    add_submit(commands)
    add_run(commands)
    add_status(commands)
    add_cancel(commands)
    add_purge_strays(commands)
    add_retry(commands)
    add_inbox(commands)
    add_answer(commands)
    add_prompt(commands)
    add_metrics(commands)
    add_export(commands)
    add_import(commands)
    add_demo(commands)
    add_ab(commands)
    return parser
