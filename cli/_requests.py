"""``teams-runtime submit``, ``append``, ``cancel`` and ``retry``: what a person changes in a
request's course.

``submit`` queues work for a role (making the request when it is new), ``append`` adds events
to its record, ``cancel`` stops it, ``retry`` queues its failed step again (or puts rejected
envelopes back). Each writes through the actors' intake or a ContextActor, as the roles do.
"""

from __future__ import annotations

import argparse
import sys
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import msgspec

from teams_runtime.actors import intake
from teams_runtime.actors.context import open_context
from teams_runtime.cli._flags import add_json, add_workspace, not_empty, role_name
from teams_runtime.cli._output import UserError, write_json
from teams_runtime.codecs.config import Cast
from teams_runtime.codecs.context_asks import Appended
from teams_runtime.codecs.formats import count_of
from teams_runtime.codecs.roles import PUBLIC_ROLES
from teams_runtime.storage import Workspace, load_team_config

__all__ = [
    "cmd_append",
    "cmd_cancel",
    "cmd_retry",
    "cmd_submit",
    "declare_append",
    "declare_cancel",
    "declare_retry",
    "declare_submit",
    "new_work_role",
]


def declare_submit(submit: argparse.ArgumentParser) -> None:
    """Declare ``submit``: its description, flags and handler."""
    submit.description = (
        "Create a request (status queued, events created + delegated) or add a "
        "delegated event to an existing one, and queue an envelope for ROLE. "
        "`teams-runtime run` handles it. A request that is completed, failed or cancelled "
        "takes more work only with --reopen."
    )
    add_workspace(submit)
    submit.add_argument(
        "--role",
        required=True,
        type=role_name,
        metavar="ROLE",
        help="who gets the work: a role of the team (`config --graph` lists them; the "
        f"built-in team's: {', '.join(PUBLIC_ROLES)})",
    )
    submit.add_argument(
        "--scope", required=True, type=not_empty, metavar="TEXT", help="what is asked, in a line"
    )
    submit.add_argument("--body", default="", metavar="TEXT", help="details")
    submit.add_argument("--intent", default="", metavar="I", help="e.g. implement, review, fix")
    submit.add_argument("--urgency", default="normal", metavar="U", help="default: normal")
    submit.add_argument(
        "--request-id",
        metavar="ID",
        help="an existing or new id (default: a new req-YYYYMMDD-HHMMSS-xxxx)",
    )
    submit.add_argument(
        "--reopen",
        action="store_true",
        help="allow more work for a request that is completed, failed or cancelled "
        "(it is reopened, with a `reopened` event); without it such a request is refused",
    )
    add_json(submit)
    submit.set_defaults(handler=cmd_submit)


def cmd_submit(args: argparse.Namespace) -> int:
    config = load_team_config(args.workspace)  # broken or missing: an error before any write
    new_work_role(config.cast, args.role)
    done = anyio.run(
        partial(
            intake.submit,
            args.workspace,
            role=args.role,
            scope=args.scope,
            body=args.body,
            intent=args.intent,
            urgency=args.urgency,
            request_id=args.request_id,
            reopen=args.reopen,
        )
    )
    if args.json:
        write_json(
            {
                "request_id": done.request_id,
                "role": args.role,
                "created": done.created,
                "reopened": bool(done.reopened),
            }
        )
        return 0
    state = "new request" if done.created else "existing request"
    if done.reopened:
        state = f"reopened: it was {done.reopened}"
    print(f"Queued {done.request_id} for {args.role} ({state}); run `teams-runtime run --once`.")
    return 0


def new_work_role(cast: Cast, role: str) -> str:
    """``role`` if ``submit`` may queue new work for it (``--role`` of ``submit``, ``ab``)."""
    try:
        return intake.check_new_work(cast, role)
    except ValueError as exc:
        raise UserError(f"--role: {exc}") from None


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
    append.set_defaults(handler=cmd_append)


def cmd_append(args: argparse.Namespace) -> int:
    flags = (args.event_type, args.actor, args.summary, args.payload)
    if args.source is not None and any(value is not None for value in flags):
        raise UserError("give either --from or --type/--actor/--summary/--payload, not both.")
    events = _events_from_lines(args.source) if args.source else _events_from_flags(args)
    workspace = Workspace(args.workspace)

    async def append() -> Appended:
        async with open_context(workspace.root) as context:
            return await context.append_keyed(args.request_id, events, key=args.key)

    reply = anyio.run(append)
    written = len(events) if reply.applied else 0
    if args.json:
        write_json(
            {
                "request_id": args.request_id,
                "appended": written,
                "already_appended": not reply.applied,
                "events": reply.count,
            }
        )
        return 0
    if not reply.applied:
        print(
            f"Nothing appended to {args.request_id}: key {args.key!r} was appended before; "
            f"it has {count_of(reply.count, 'event')}."
        )
        return 0
    print(
        f"Appended {count_of(written, 'event')} to {args.request_id}; "
        f"it now has {count_of(reply.count, 'event')}."
    )
    return 0


def _events_from_flags(args: argparse.Namespace) -> list[dict[str, Any]]:
    missing = [flag for flag, value in (("--type", args.event_type), ("--actor", args.actor),
               ("--summary", args.summary)) if value is None]  # fmt: skip
    if missing:
        raise UserError(f"append needs --from, or --type, --actor and --summary (missing: "
                         f"{', '.join(missing)}).")  # fmt: skip
    event: dict[str, Any] = {"type": args.event_type, "actor": args.actor, "summary": args.summary}
    if args.payload is not None:
        try:
            payload = msgspec.json.decode(args.payload)
        except msgspec.DecodeError as exc:
            raise UserError(f"--payload is not valid JSON ({exc}).") from None
        except RecursionError:
            raise UserError("--payload is nested too deeply to read safely.") from None
        if not isinstance(payload, dict):
            raise UserError("--payload must be a JSON object.")
        event["payload"] = payload
    return [event]


def _events_from_lines(source: str) -> list[dict[str, Any]]:
    name = "stdin" if source == "-" else source
    try:
        if source == "-":
            lines = sys.stdin.buffer.read().splitlines()
        else:
            lines = Path(source).read_bytes().splitlines()
    except OSError as exc:
        raise UserError(f"{name}: cannot be read ({exc.strerror}).") from None
    events = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            event = msgspec.json.decode(line)
        except msgspec.DecodeError as exc:
            raise UserError(f"{name} line {number}: not valid JSON ({exc}); nothing was "
                             "appended.") from None  # fmt: skip
        except RecursionError:
            raise UserError(f"{name} line {number}: nested too deeply to read safely; "
                            "nothing was appended.") from None  # fmt: skip
        if not isinstance(event, dict):
            raise UserError(f"{name} line {number}: an event must be a JSON object; nothing "
                             "was appended.")  # fmt: skip
        events.append(event)
    if not events:
        raise UserError(f"{name}: no events to append.")
    return events


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
    cancel.set_defaults(handler=cmd_cancel)


def cmd_cancel(args: argparse.Namespace) -> int:
    load_team_config(args.workspace)  # a broken or missing config is an error before any write
    done = anyio.run(intake.cancel, args.workspace, args.request_id)
    dropped = count_of(done.dropped, "queued envelope")
    if args.json:
        write_json(
            {
                "request_id": done.request_id,
                "already_cancelled": done.already,
                "dropped": done.dropped,
            }
        )
    elif done.already:
        print(f"{done.request_id} was already cancelled; dropped {dropped}.")
    else:
        print(
            f"Cancelled {done.request_id}; dropped {dropped}. A role working on it now "
            "finishes its call; its outcome is recorded without handing it on."
        )
    return 0


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
    retry.set_defaults(handler=cmd_retry)


def cmd_retry(args: argparse.Namespace) -> int:
    config = load_team_config(args.workspace)  # a broken config is an error before any write
    if args.rejected:
        moved = anyio.run(intake.requeue_rejected, args.workspace, args.request_id)
        if args.json:
            write_json({"request_id": args.request_id, "requeued": moved})
        elif moved:
            print(
                f"Put {count_of(moved, 'rejected envelope')} back in the queue; "
                "run `teams-runtime run --once` (one still unusable is set aside again)."
            )
        else:
            whose = f" of {args.request_id}" if args.request_id else ""
            print(f"No rejected envelope{whose}: nothing put back (`status` lists them).")
        return 0
    if args.request_id is None:
        raise UserError(
            "retry needs the REQUEST_ID of a failed request (or --rejected, to put rejected "
            "envelopes back)."
        )
    done = anyio.run(
        partial(intake.retry_failed, args.workspace, args.request_id, max_hops=config.team.max_hops)
    )
    if args.json:
        shown = {"request_id": done.request_id, "role": done.role, "envelope_id": done.envelope_id}
        write_json({**shown, "resumed": True} if done.resumed else shown)
        return 0
    if done.resumed:
        print(
            f"{done.request_id} was retried already: its {done.role} step is queued (again, if "
            "that retry stopped before queueing it); run `teams-runtime run --once`."
        )
        return 0
    print(
        f"Queued {done.request_id} for {done.role} again (it is in progress); run "
        "`teams-runtime run --once`."
    )
    return 0
