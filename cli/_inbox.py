"""``teams-runtime inbox`` and ``answer``: the commands of a person's role (``model.backend:
human``), whose envelopes wait for a person instead of a model.

``inbox`` lists what waits (``inbox show ID``: the prompt a model of that role would get);
``answer`` records the person's result, held to the role's contract like a model's. The work is
``actors.roles._person_answers``'.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import msgspec

from teams_runtime.actors.roles import (
    Answered,
    InboxLook,
    answer,
    is_person,
    read_inbox,
    waiting_prompt,
)
from teams_runtime.cli._flags import add_json, add_workspace, not_empty, role_name, team_role
from teams_runtime.cli._output import UserError, write_json
from teams_runtime.cli._parser import PROG
from teams_runtime.cli._status_report import age, due, waiting_rows
from teams_runtime.codecs.config import TeamConfig
from teams_runtime.codecs.formats import JsonObject, count_of
from teams_runtime.codecs.model import MAX_OUTPUT_BYTES, OUTPUT_KEY
from teams_runtime.codecs.request_ids import check_request_id
from teams_runtime.codecs.statuses import RESULT_STATUSES
from teams_runtime.codecs.waiting_answers import WaitingAnswer
from teams_runtime.policy.prompts import PromptBundle
from teams_runtime.storage import Workspace, load_team_config
from teams_runtime.storage.local_files import open_regular

__all__ = [
    "ANSWER_FILE_BYTES",
    "answered_text",
    "cmd_answer",
    "cmd_inbox",
    "declare_answer",
    "declare_inbox",
    "inbox_json",
    "person_role",
    "result_object",
    "shown_json",
]


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
    inbox.set_defaults(handler=cmd_inbox)


def cmd_inbox(args: argparse.Namespace) -> int:
    workspace = Workspace(args.workspace)
    config = load_team_config(workspace.root)
    words = list(args.words)
    if words and (words[0] != "show" or len(words) != 2):
        raise UserError("inbox takes nothing (the list) or `show ID`.")
    if not words:
        if args.role is not None:
            raise UserError("--role goes with `inbox show ID`.")
        looked = anyio.run(read_inbox, workspace, config)
        now = time.time()
        if args.json:
            write_json(inbox_json(workspace, looked, now))
        else:
            _say_ran_out(looked)
            _print_inbox(workspace, looked.waiting, now)
        _say_left_the_team(config, looked.waiting)
        return 0
    wanted = check_request_id(words[1])
    role = person_role(config, args.role)
    item, bundle = anyio.run(partial(waiting_prompt, workspace, config, wanted, role))
    if args.json:
        write_json(shown_json(item, bundle, time.time()))
        return 0
    for chunk in bundle.iter_chunks():
        sys.stdout.write(chunk)
    return 0


def inbox_json(workspace: Workspace, looked: InboxLook, now: float) -> JsonObject:
    """What ``inbox --json`` prints for ``looked``: what waits, and what ran out at this look."""
    return {
        "workspace": str(workspace.root.resolve()),
        "waiting": waiting_rows(looked.waiting, now),
        "ran_out": _ran_out_rows(looked),
    }


def shown_json(item: WaitingAnswer, bundle: PromptBundle, now: float) -> JsonObject:
    """What ``inbox show ID --json`` prints: the waiting answer's row, its prompt and kind."""
    (row,) = waiting_rows([item], now)
    return {**row, "kind": bundle.purpose, "prompt": bundle.text()}


def person_role(config: TeamConfig, given: str | None) -> str | None:
    """``--role``: a role of the team whose answers come from a person (``model.backend:
    human``), the only ones that wait in the inbox."""
    if given is None:
        return None
    role = team_role(config.cast, given)
    model = config.model_for(role)
    if not is_person(model):
        people = [name for name in config.cast.names if is_person(config.model_for(name))]
        raise UserError(
            f"--role: {role} is not a person's role (its model.backend is {model.backend}): only "
            "roles whose model.backend is human wait for answers; "
            + (f"they are: {', '.join(people)}." if people else "this team has none.")
        )
    return role


def _print_inbox(workspace: Workspace, items: list[WaitingAnswer], now: float) -> None:
    where = workspace.root.resolve()
    if not items:
        print(f"no answers waiting in {where}")
        return
    print(f"{count_of(len(items), 'answer')} waiting in {where}")
    print(f"  {'request':<28} {'role':<19} {'from':<19} {'waiting':>8}  due")
    for item in items:
        print(
            f"  {item.request_id:<28} {item.role:<19} {item.from_role:<19} "
            f"{age(now - item.since):>8}  {due(item, now)}"
        )
    print(
        "See one with `teams-runtime inbox show REQUEST_ID`; answer it with `teams-runtime "
        'answer REQUEST_ID --status completed --summary "..."`.'
    )


def _ran_out_rows(looked: InboxLook) -> list[dict[str, Any]]:
    """The answers whose ``answer_within`` ran out at this look, as ``inbox --json`` lists
    them: ``failed`` (their request failed now) or ``waits_again`` (``requeue``)."""
    rows = []
    for items, outcome in ((looked.timed_out, "failed"), (looked.renewed, "waits_again")):
        rows += [
            {"request_id": i.request_id, "role": i.role, "envelope_id": i.envelope_id,
             "outcome": outcome} for i in items
        ]  # fmt: skip
    return rows


def _say_ran_out(looked: InboxLook) -> None:
    """Reading the inbox applied these timeouts: say so (on stderr, as notes), since this
    very command failed the requests."""
    for item in looked.timed_out:
        said = f"no answer to {item.request_id} ({item.role}) within its answer_within"
        retry = f"`teams-runtime retry {item.request_id}` queues its step again"
        print(f"{PROG}: note: {said}: the request failed ({retry}).", file=sys.stderr)
    for item in looked.renewed:
        said = f"no answer to {item.request_id} ({item.role}) within its answer_within"
        print(f"{PROG}: note: {said}: it waits again (renewal {item.renewals}).", file=sys.stderr)


def _say_left_the_team(config: TeamConfig, waiting: list[WaitingAnswer]) -> None:
    """An answer waiting for a role the team no longer has cannot be given (``answer``
    refuses it); it is kept, not dropped, since the role may come back: say what to do."""
    for item in waiting:
        if item.role not in config.cast.roles:
            print(f"{PROG}: note: {item.request_id} waits for the {item.role} role, which the "
                  f"team no longer has: put {item.role} back in team.roles to answer it, or "
                  f"`teams-runtime cancel {item.request_id}`.", file=sys.stderr)  # fmt: skip


def declare_answer(parser: argparse.ArgumentParser) -> None:
    """Declare ``answer``: its description, flags and handler."""
    parser.description = (
        "Record the result of a person's role for the envelope ID names (a "
        "request id, or an envelope id from `inbox --json`): held to the role's contract, "
        "recorded as a model's result is, and handed on to --next-role. Refused (exit 2, "
        "nothing written) when it was answered already or the request was cancelled."
    )
    parser.add_argument("item", metavar="ID", help="a request id, or an envelope id")
    parser.add_argument(
        "--status",
        choices=RESULT_STATUSES,
        metavar="S",
        help=f"one of: {', '.join(RESULT_STATUSES)}",
    )
    parser.add_argument(
        "--summary", type=not_empty, metavar="TEXT", help="one or two sentences: the answer"
    )
    given = parser.add_mutually_exclusive_group()
    given.add_argument(
        "--output",
        type=not_empty,
        metavar="TEXT",
        help="the work itself (a draft, a decision), kept as the request's result.output",
    )
    given.add_argument(
        "--output-file",
        metavar="FILE",
        help="--output read from a UTF-8 text file ('-' for stdin)",
    )
    parser.add_argument(
        "--next-role",
        metavar="R",
        help="the role the request goes to next, one the role's hands_to allows (empty or "
        "left out: it ends with --status)",
    )
    parser.add_argument(
        "--from",
        dest="source",
        metavar="FILE",
        help="a whole result object as JSON ('-' for stdin); the flags above override its fields",
    )
    parser.add_argument(
        "--role",
        type=role_name,
        metavar="ROLE",
        help="the role, when several wait on one request",
    )
    add_workspace(parser)
    add_json(parser)
    parser.set_defaults(handler=cmd_answer)


def cmd_answer(args: argparse.Namespace) -> int:
    workspace = Workspace(args.workspace)
    config = load_team_config(workspace.root)  # a broken config is an error before any write
    wanted = check_request_id(args.item)
    role = person_role(config, args.role)
    given = _given(args)
    whole = args.source is not None
    done = anyio.run(partial(answer, workspace, config, wanted, given, role=role, whole=whole))
    if args.json:
        write_json(msgspec.structs.asdict(done))
        return 0
    print(answered_text(done))
    return 0


def answered_text(done: Answered) -> str:
    """What ``answer`` says once ``done`` is recorded."""
    said = f"Recorded the {done.role} answer to {done.request_id} ({done.status})"
    if done.handed_to:
        return f"{said}; handed to {done.handed_to}: `teams-runtime run` takes it from here."
    return f"{said}; the request is {done.request_status}."


def _result_file(source: str) -> dict[str, Any]:
    """The result object of ``--from FILE`` (``-``: stdin), read whole before anything else:
    at most ``ANSWER_FILE_BYTES`` (a model's reply is capped the same by default), each key
    written once (a record refuses a key written twice; so does an answer)."""
    name = "stdin" if source == "-" else source
    try:
        if source == "-":
            data = sys.stdin.buffer.read(ANSWER_FILE_BYTES + 1)
        else:
            with open(open_regular(Path(source), follow_links=True), "rb") as handle:
                data = handle.read(ANSWER_FILE_BYTES + 1)
    except OSError as exc:
        raise UserError(f"{name}: cannot be read ({exc.strerror or exc}).") from None
    if len(data) > ANSWER_FILE_BYTES:
        raise UserError(
            f"{name}: longer than {ANSWER_FILE_BYTES:,} bytes, the most an answer may be (as a "
            "model's reply); put the long part in a file of the workspace and name it in "
            "artifacts. Nothing was recorded."
        )
    return result_object(data, name)


def result_object(data: bytes, name: str) -> JsonObject:
    """The result object ``data`` holds (read from ``name``, which errors name): JSON, each
    key written once, one object."""
    try:
        result = json.loads(data, object_pairs_hook=_each_key_once)
    except _KeyTwice as exc:
        raise UserError(f"{name}: the key {exc.key!r} is written twice in one object; write each "
                        "key once. Nothing was recorded.") from None  # fmt: skip
    except (ValueError, UnicodeDecodeError) as exc:
        raise UserError(f"{name}: not valid JSON ({exc}); nothing was recorded.") from None
    except RecursionError:
        raise UserError(f"{name}: nested too deeply to read safely.") from None
    if not isinstance(result, dict):
        raise UserError(f"{name}: a result must be one JSON object; nothing was recorded.")
    return result


# The most an answer file may hold: a model's reply is capped at this by default
# (``model.max_output_bytes``).
ANSWER_FILE_BYTES = 1_048_576


class _KeyTwice(Exception):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _each_key_once(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise _KeyTwice(key)
        result[key] = value
    return result


def _given(args: argparse.Namespace) -> dict[str, Any]:
    """The result's fields: ``--from``'s object with the flags laid over it."""
    if args.source is None and (args.status is None or args.summary is None):
        raise UserError('answer needs --status and --summary (or a whole result with --from '
                        'FILE), e.g. --status completed --summary "Looks right".')  # fmt: skip
    given = _result_file(args.source) if args.source is not None else {}
    output = args.output if args.output_file is None else _output_file(args)
    for key, value in (("status", args.status), ("summary", args.summary),
                       ("next_role", args.next_role), (OUTPUT_KEY, output)):  # fmt: skip
        if value is not None:
            given[key] = value
    return given


def _output_file(args: argparse.Namespace) -> str:
    """The text of ``--output-file`` (``-``: stdin), read whole: at most ``ANSWER_FILE_BYTES``
    (the contract then holds it to its own limit on an output's size)."""
    source: str = args.output_file
    if source == "-" and args.source == "-":
        raise UserError("--from - and --output-file - cannot both read stdin; name a file.")
    name = "stdin" if source == "-" else source
    try:
        if source == "-":
            data = sys.stdin.buffer.read(ANSWER_FILE_BYTES + 1)
        else:
            with open(open_regular(Path(source), follow_links=True), "rb") as handle:
                data = handle.read(ANSWER_FILE_BYTES + 1)
        text = data[:ANSWER_FILE_BYTES].decode("utf-8")
    except OSError as exc:
        raise UserError(f"{name}: cannot be read ({exc.strerror or exc}).") from None
    except UnicodeDecodeError:
        raise UserError(f"{name}: not UTF-8 text; nothing was recorded.") from None
    if len(data) > ANSWER_FILE_BYTES or not text.strip():
        raise UserError(f"{name}: an output must be text with something in it, at most "
                        f"{MAX_OUTPUT_BYTES:,} bytes; nothing was recorded.")  # fmt: skip
    return text
