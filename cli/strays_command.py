"""``purge-strays``: move the envelopes no role reads out of the queue, to the rejected ones."""

from __future__ import annotations

import argparse

from teams_runtime.cli._output import write_json
from teams_runtime.codecs.formats import count_of
from teams_runtime.storage import Workspace, load_team_config
from teams_runtime.storage.backends import blocking_backend

__all__ = ["cmd_purge_strays"]


def cmd_purge_strays(args: argparse.Namespace) -> int:
    workspace = Workspace(args.workspace)
    config = load_team_config(workspace.root)
    with blocking_backend(workspace, config) as backend:
        moved = backend.queue.set_aside_strays()
    if config.backend.kind == "nats":
        where = f"the stream {config.backend.nats.prefix}_rejected"
    else:
        where = str(workspace.queue_dir / "rejected")
    if args.json:
        write_json({"set_aside": moved, "rejected": where})
    else:
        print(f"Set aside {count_of(moved, 'stray envelope')} (no role reads them) in {where}.")
    return 0
