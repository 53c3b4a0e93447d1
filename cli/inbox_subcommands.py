"""The commands of a person's role (``model.backend: human``): inbox and answer."""

from __future__ import annotations

import argparse

from teams_runtime.cli._flags import add_json, add_workspace, not_empty, role_name
from teams_runtime.cli.lazy_command import LazyCommand
from teams_runtime.codecs.statuses import RESULT_STATUSES

__all__ = ["declare_answer", "declare_inbox"]

_COMMANDS = "teams_runtime.cli.inbox_commands"


def declare_inbox(inbox: argparse.ArgumentParser) -> None:
    """Declare ``inbox``: its description, flags and handler."""
    inbox.description = (
        "List the envelopes of people's roles waiting for an answer: request, "
        "role, from which role, since when, until when (answer_within). `inbox show ID` "
        "prints the prompt a model of that role would get for it. Reading the inbox tidies "
        "it: answered and ended requests leave it; an overdue one is handled by its role's "
        "model.on_failure."
    )
    inbox.add_argument(
        "words",
        nargs="*",
        metavar="show ID",
        help="show ID: the prompt of one waiting answer (ID: a request id, or an envelope id)",
    )
    inbox.add_argument(
        "--role",
        type=role_name,
        metavar="ROLE",
        help="with show: the role, when several wait on one request",
    )
    add_workspace(inbox)
    add_json(inbox)
    inbox.set_defaults(handler=LazyCommand(_COMMANDS, "cmd_inbox"))


def declare_answer(answer: argparse.ArgumentParser) -> None:
    """Declare ``answer``: its description, flags and handler."""
    answer.description = (
        "Record the result of a person's role for the envelope ID names (a "
        "request id, or an envelope id from `inbox --json`): held to the role's contract, "
        "recorded as a model's result is, and handed on to --next-role. Refused (exit 2, "
        "nothing written) when it was answered already or the request was cancelled."
    )
    answer.add_argument("item", metavar="ID", help="a request id, or an envelope id")
    answer.add_argument(
        "--status",
        choices=RESULT_STATUSES,
        metavar="S",
        help=f"one of: {', '.join(RESULT_STATUSES)}",
    )
    answer.add_argument(
        "--summary", type=not_empty, metavar="TEXT", help="one or two sentences: the answer"
    )
    answer.add_argument(
        "--next-role",
        metavar="R",
        help="the role the request goes to next, one the role's hands_to allows (empty or "
        "left out: it ends with --status)",
    )
    answer.add_argument(
        "--from",
        dest="source",
        metavar="FILE",
        help="a whole result object as JSON ('-' for stdin); the flags above override its fields",
    )
    answer.add_argument(
        "--role",
        type=role_name,
        metavar="ROLE",
        help="the role, when several wait on one request",
    )
    add_workspace(answer)
    add_json(answer)
    answer.set_defaults(handler=LazyCommand(_COMMANDS, "cmd_answer"))
