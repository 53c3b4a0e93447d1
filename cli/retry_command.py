"""``teams-runtime retry``: a failed request's last step queued again, or rejected envelopes
put back in their queues (``actors.intake._retry``)."""

from __future__ import annotations

import argparse
from functools import partial

import anyio

from teams_runtime.actors.intake import requeue_rejected, retry_failed
from teams_runtime.cli._output import UserError, write_json
from teams_runtime.codecs.formats import count_of
from teams_runtime.storage import load_team_config

__all__ = ["cmd_retry"]


def cmd_retry(args: argparse.Namespace) -> int:
    config = load_team_config(args.workspace)  # a broken config is an error before any write
    if args.rejected:
        moved = anyio.run(requeue_rejected, args.workspace, args.request_id)
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
        partial(retry_failed, args.workspace, args.request_id, max_hops=config.team.max_hops)
    )
    if args.json:
        write_json(
            {"request_id": done.request_id, "role": done.role, "envelope_id": done.envelope_id}
        )
        return 0
    print(
        f"Queued {done.request_id} for {done.role} again (it is in progress); run "
        "`teams-runtime run --once`."
    )
    return 0
