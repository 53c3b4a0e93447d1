"""``teams-runtime append``: events added to a request record."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import anyio
import msgspec

from teams_runtime.actors.context import open_context
from teams_runtime.cli._output import UserError, write_json
from teams_runtime.codecs.context_protocol import Appended
from teams_runtime.codecs.formats import count_of
from teams_runtime.storage import Workspace

__all__ = ["cmd_append"]


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
