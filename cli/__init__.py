"""The ``teams-runtime`` command line.

User errors exit 2 with ``teams-runtime: error: <message>`` on stderr and nothing on stdout.
``_parser`` lists the commands. Each is declared (its flags) and run by the module of its
family, imported only when it is given: ``_config`` (init, config), ``_records`` (project,
explain, prompt), ``_requests`` (submit, append, cancel, retry), ``_run`` (run, demo),
``_status`` (status, purge-strays), ``_inbox`` (inbox, answer), ``_metrics``, ``_migrate``
(export, import), ``_ab`` and ``_serve`` (the web console of ``console/``). ``_flags`` holds
what their flags share, ``_output`` the user error and JSON output.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence

from teams_runtime.cli._parser import PROG, build_parser
from teams_runtime.exceptions import TeamsRuntimeError

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit status."""
    args = build_parser().parse_args(argv)  # --version and --help end here
    # Imported once a command is given, as its own module was: --version needs no flag's check.
    from teams_runtime.cli._flags import settle

    handler: Callable[..., int] = args.handler
    try:
        settle(args)
        return handler(args)
    except TeamsRuntimeError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    except BaseExceptionGroup as group:
        # A refusal inside a task group (a linked queue folder, say) arrives wrapped.
        ours, rest = group.split(TeamsRuntimeError)
        if ours is None or rest is not None:
            raise
        print(f"{PROG}: error: {_first(ours)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader (e.g. `| head`) went away: stop quietly, as other Unix tools do.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


def _first(group: BaseExceptionGroup[TeamsRuntimeError]) -> BaseException:
    error: BaseException = group
    while isinstance(error, BaseExceptionGroup):
        error = error.exceptions[0]
    return error
