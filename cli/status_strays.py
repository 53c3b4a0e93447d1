"""What ``status`` says of the strays: each file, KV key or queue subject teams-runtime did not
write, on a line of its own with why it is skipped (docs/cli.md, ``status``)."""

from __future__ import annotations

from typing import Any

from teams_runtime.codecs.formats import count_of
from teams_runtime.storage import Workspace
from teams_runtime.storage.backends import BlockingBackend
from teams_runtime.storage.server_files import server_strays

__all__ = ["SHOWN_STRAYS", "stray_lines", "stray_rows"]

SHOWN_STRAYS = 20  # lines of text at most; `--json` lists every one


def stray_rows(workspace: Workspace, backend: BlockingBackend) -> list[dict[str, Any]]:
    """Every stray of the workspace's store, queue and model-server files, as ``--json``
    shows them (``envelopes``: how many wait there for no role)."""
    found = [*backend.store.strays(), *backend.queue.strays(), *server_strays(workspace)]
    return [
        {"where": stray.where, "reason": stray.reason, "envelopes": stray.envelopes}
        for stray in found
    ]


def stray_lines(rows: list[dict[str, Any]]) -> list[str]:
    """One line per stray (the first ``SHOWN_STRAYS``, then how many more)."""
    lines = []
    for row in rows[:SHOWN_STRAYS]:
        if row["envelopes"]:
            lines.append(
                f"stray {row['where']} ({count_of(row['envelopes'], 'envelope')}): "
                f"{row['reason']}; `teams-runtime purge-strays` sets them aside"
            )
        else:
            lines.append(f"stray {row['where']}: {row['reason']}")
    if len(rows) > SHOWN_STRAYS:
        lines.append(
            f"... and {count_of(len(rows) - SHOWN_STRAYS, 'more stray')} (--json lists all)"
        )
    return lines
