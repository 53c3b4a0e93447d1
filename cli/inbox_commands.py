"""Commands of a person's role: ``inbox`` (what waits; ``inbox show ID``: its prompt) and
``answer`` (record the person's result). The work is ``actors.person_answers``'."""

from __future__ import annotations

import argparse
import sys
import time
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import msgspec

from teams_runtime.actors.person_answers import answer, read_inbox, waiting_prompt
from teams_runtime.cli.output import UserError, write_json
from teams_runtime.cli.role_flags import team_role
from teams_runtime.cli.waiting_view import age, due, waiting_rows
from teams_runtime.codecs.formats import count_of
from teams_runtime.codecs.request_ids import check_request_id
from teams_runtime.codecs.waiting_answers import WaitingAnswer
from teams_runtime.storage import Workspace, load_team_config
from teams_runtime.storage.local_files import open_regular

__all__ = ["cmd_answer", "cmd_inbox"]


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


def cmd_inbox(args: argparse.Namespace) -> int:
    workspace = Workspace(args.workspace)
    config = load_team_config(workspace.root)
    words = list(args.words)
    if words and (words[0] != "show" or len(words) != 2):
        raise UserError("inbox takes nothing (the list) or `show ID`.")
    if not words:
        if args.role is not None:
            raise UserError("--role goes with `inbox show ID`.")
        items = anyio.run(read_inbox, workspace, config)
        now = time.time()
        if args.json:
            write_json({"workspace": str(workspace.root.resolve()),
                        "waiting": waiting_rows(items, now)})  # fmt: skip
        else:
            _print_inbox(workspace, items, now)
        return 0
    wanted = check_request_id(words[1])
    role = None if args.role is None else team_role(config.cast, args.role)
    item, bundle = anyio.run(partial(waiting_prompt, workspace, config, wanted, role))
    if args.json:
        (row,) = waiting_rows([item], time.time())
        write_json({**row, "kind": bundle.purpose, "prompt": bundle.text()})
        return 0
    for chunk in bundle.iter_chunks():
        sys.stdout.write(chunk)
    return 0


def _result_file(source: str) -> dict[str, Any]:
    """The result object of ``--from FILE`` (``-``: stdin), read whole before anything else."""
    name = "stdin" if source == "-" else source
    try:
        if source == "-":
            data = sys.stdin.buffer.read()
        else:
            with open(open_regular(Path(source), follow_links=True), "rb") as handle:
                data = handle.read()
    except OSError as exc:
        raise UserError(f"{name}: cannot be read ({exc.strerror or exc}).") from None
    try:
        result = msgspec.json.decode(data)
    except msgspec.DecodeError as exc:
        raise UserError(f"{name}: not valid JSON ({exc}); nothing was recorded.") from None
    except RecursionError:
        raise UserError(f"{name}: nested too deeply to read safely.") from None
    if not isinstance(result, dict):
        raise UserError(f"{name}: a result must be one JSON object; nothing was recorded.")
    return result


def _given(args: argparse.Namespace) -> dict[str, Any]:
    """The result's fields: ``--from``'s object with the flags laid over it."""
    if args.source is None and (args.status is None or args.summary is None):
        raise UserError('answer needs --status and --summary (or a whole result with --from '
                        'FILE), e.g. --status completed --summary "Looks right".')  # fmt: skip
    given = _result_file(args.source) if args.source is not None else {}
    for key, value in (("status", args.status), ("summary", args.summary),
                       ("next_role", args.next_role)):  # fmt: skip
        if value is not None:
            given[key] = value
    return given


def cmd_answer(args: argparse.Namespace) -> int:
    workspace = Workspace(args.workspace)
    config = load_team_config(workspace.root)  # a broken config is an error before any write
    wanted = check_request_id(args.item)
    role = None if args.role is None else team_role(config.cast, args.role)
    given = _given(args)
    done = anyio.run(partial(answer, workspace, config, wanted, given, role=role))
    if args.json:
        write_json(msgspec.structs.asdict(done))
        return 0
    said = f"Recorded the {done.role} answer to {done.request_id} ({done.status})"
    if done.handed_to:
        print(f"{said}; handed to {done.handed_to}: `teams-runtime run` takes it from here.")
    else:
        print(f"{said}; the request is {done.request_status}.")
    return 0
