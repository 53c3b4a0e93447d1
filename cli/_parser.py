"""The ``teams-runtime`` argument parser: the commands in the order ``--help`` lists them.

Building it imports no command: each is listed with its line in ``--help`` and the module of its
family, which declares its flags and runs it (``declare_<command>``). That module is imported
when the command is given (to run it, or to show its ``--help``), never before, so
``teams-runtime --version`` or ``status`` loads nothing another command needs.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from contextvars import ContextVar
from typing import Any, NamedTuple, NoReturn

from teams_runtime._lazy import imported

__all__ = ["COMMANDS", "PROG", "Command", "build_parser", "command_parsers", "parse_refusing"]

# Set while ``parse_refusing`` parses: a bad flag is raised, not printed with an exit.
_REFUSING: ContextVar[bool] = ContextVar("refusing", default=False)

PROG = "teams-runtime"


class Command(NamedTuple):
    """A command: its name, its module in ``cli/`` and its line in ``teams-runtime --help``."""

    name: str
    family: str
    summary: str


COMMANDS = (
    Command("init", "_config", "create a workspace with a default team_runtime.yaml"),
    Command("config", "_config", "check team_runtime.yaml and print the configuration in force"),
    Command(
        "project",
        "_records",
        "print a request as a prompt would embed it (notice + projected record)",
    ),
    Command("explain", "_records", "say for every event whether the projection keeps it, and why"),
    Command(
        "append",
        "_requests",
        "append events to a request record (locked, atomic; never loses an event)",
    ),
    Command(
        "submit", "_requests", "queue work for a role (creates the request record if it is new)"
    ),
    Command("run", "_run", "run the team: every role handles its queued envelopes"),
    Command(
        "status",
        "_status",
        "requests, queued and claimed envelopes per role, and the workers alive",
    ),
    Command(
        "cancel", "_requests", "cancel a request: drop its queued envelopes and mark it cancelled"
    ),
    Command(
        "purge-strays",
        "_status",
        "set aside the envelopes no role reads (status lists them as strays)",
    ),
    Command(
        "retry",
        "_requests",
        "queue a failed request's last step again, or put rejected envelopes back",
    ),
    Command(
        "inbox", "_inbox", "what waits for a person's answer (roles with model.backend: human)"
    ),
    Command(
        "answer", "_inbox", "record a person's answer to a waiting envelope (the role's result)"
    ),
    Command(
        "prompt", "_records", "print the prompt a role would get for a request, as it would be sent"
    ),
    Command(
        "metrics",
        "_metrics",
        "aggregate the prompt records in the logs: compaction, tokens, cost, latency",
    ),
    Command(
        "replay",
        "_metrics",
        "replay the recorded model calls under other policies and layouts (no model called)",
    ),
    Command(
        "export",
        "_migrate",
        "write a request as its canonical record file (the bytes the file backend holds)",
    ),
    Command(
        "import",
        "_migrate",
        "load record files into the workspace's backend (migration between backends)",
    ),
    Command("demo", "_run", "run a team (dry run, no model) on requests with long histories"),
    Command(
        "ab", "_ab", "run the same long-history requests with compaction off, then on; compare"
    ),
    Command("serve", "_serve", "serve the web console: the team, requests, inbox and metrics"),
)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        if _REFUSING.get():
            from teams_runtime.cli._output import UserError

            raise UserError(message)
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


class _CommandParser(_Parser):
    """One command's parser. Its description, flags and ``handler`` are declared by its
    family's module the first time it is used: parsed, or asked for its usage or help."""

    def __init__(self, *, command: Command, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._command: Command | None = command

    def declared(self) -> _CommandParser:
        """This parser, once its family's module has declared the command in it."""
        if self._command is not None:
            name, family, _ = self._command
            self._command = None
            declare = imported(f"teams_runtime.cli.{family}", "declare_" + name.replace("-", "_"))
            declare(self)
        return self

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        self.declared()
        return super().parse_known_args(args, namespace)

    def format_usage(self) -> str:
        self.declared()
        return super().format_usage()

    def format_help(self) -> str:
        self.declared()
        return super().format_help()


def _version() -> str:
    """The installed version: the ``Version:`` header of the first ``teams_runtime-*.dist-info``
    on ``sys.path``, the file ``importlib.metadata`` reads. It is read here directly because
    importing ``importlib.metadata`` (email, zipfile, csv) costs more than the rest of
    ``--version`` (about 10 ms); any other install layout is still asked of it."""
    for folder in sys.path:
        try:
            names = os.listdir(folder or ".")
        except OSError:  # a zip file, a folder that is gone
            continue
        for name in names:
            if name.startswith(_DIST_INFO) and name.endswith(".dist-info"):
                version = _version_header(os.path.join(folder or ".", name, "METADATA"))
                if version is not None:
                    return version
    from importlib import metadata

    try:
        return metadata.version("teams-runtime")
    except metadata.PackageNotFoundError:  # running from a source tree without installing
        return "unknown"


_DIST_INFO = "teams_runtime-"  # the distribution's folder name, as wheels and pip write it


def _version_header(path: str) -> str | None:
    """The ``Version:`` of a ``METADATA`` file (among the headers before the first blank line)."""
    try:
        with open(path, encoding="utf-8") as metadata:
            for line in metadata:
                if not line.strip():
                    break
                if line.startswith("Version:"):
                    return line.removeprefix("Version:").strip()
    except OSError:
        pass
    return None


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
    """The parser of every command; the given command's ``handler`` is set as a default."""
    parser = _Parser(
        prog=PROG,
        description="Run teams of model-backed roles with bounded prompt context.",
        epilog="Start with `teams-runtime demo`, then `teams-runtime init DIR`. Docs: docs/cli.md. "
        "Exit status 2 means the command was used wrongly.",
    )
    parser.add_argument("--version", action=_PrintVersion)
    # prog given, not computed: argparse would build a help formatter for it, and with it
    # import shutil (and bz2, lzma) on every start.
    commands = parser.add_subparsers(
        dest="command", required=True, metavar="COMMAND", parser_class=_CommandParser, prog=PROG
    )
    for command in COMMANDS:
        commands.add_parser(command.name, help=command.summary, command=command)
    return parser


def command_parsers() -> dict[str, argparse.ArgumentParser]:
    """Every command's parser, declared (what its ``--help`` shows), by name."""
    for action in build_parser()._actions:
        if isinstance(action, argparse._SubParsersAction):
            return {name: parser.declared() for name, parser in action.choices.items()}
    raise AssertionError("the parser has no commands")


def parse_refusing(argv: Sequence[str]) -> argparse.Namespace:
    """``argv`` parsed as the command line parses it, a bad flag or value raised as
    ``UserError`` (argparse's message) instead of printed with an exit: for a caller that is
    not the command line (the console's ``/api/...`` query, checked as the flags are)."""
    refusing = _REFUSING.set(True)
    try:
        return build_parser().parse_args(list(argv))
    finally:
        _REFUSING.reset(refusing)
