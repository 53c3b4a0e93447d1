"""``teams-runtime demo``: a workspace with long request histories, projected as prompts would.

This is the projection demo; it shows what each prompt carries instead of the full history.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import msgspec

from teams_runtime.codecs.config import DEFAULT_CONFIG_TEXT, load_team_config
from teams_runtime.codecs.records import encode_record
from teams_runtime.exceptions import TeamsRuntimeError
from teams_runtime.projection import notice_text, project_request
from teams_runtime.samples import sample_record
from teams_runtime.workspace import Workspace

__all__ = ["run"]

_HISTORIES = {"req-short": 12, "req-medium": 40, "req-long": 120}


def _write_requests(workspace: Workspace) -> None:
    workspace.requests_dir.mkdir(parents=True, exist_ok=True)
    workspace.config_path.write_text(DEFAULT_CONFIG_TEXT, encoding="utf-8")
    for request_id, events in _HISTORIES.items():
        data = encode_record(sample_record(events, request_id))
        workspace.request_path(request_id).write_bytes(data)


def _show(workspace: Workspace, kept: bool) -> None:
    config = load_team_config(workspace.root).prompt_context
    full_history = msgspec.structs.replace(config, enabled=False)
    out = sys.stdout
    out.write(
        f"prompt_context: enabled={str(config.enabled).lower()} "
        f"recent_events={config.recent_events} max_events={config.max_events}\n\n"
    )
    out.write(
        f"{'request':<12} {'total':>6} {'included':>9} {'omitted':>8} "
        f"{'record chars':>13} {'full chars':>11} {'saving':>7}\n"
    )
    last_notice = ""
    for request_id in _HISTORIES:
        data = workspace.request_path(request_id).read_bytes()
        projection = project_request(data, config)
        projected = len(b"".join(projection.iter_record_json()).decode())
        full = len(b"".join(project_request(data, full_history).iter_record_json()).decode())
        out.write(
            f"{request_id:<12} {projection.total_events:>6} {projection.included_events:>9} "
            f"{projection.omitted_events:>8} {projected:>13} {full:>11} "
            f"{1 - projected / full:>7.0%}\n"
        )
        last_notice = notice_text(projection) or last_notice
    if last_notice:
        out.write("\nThe notice a role sees before `Current request:` (req-long):\n\n")
        out.write(last_notice + "\n")
    out.write("\nOmitted events stay in the record files on disk.\n")
    if kept:
        out.write(
            f"Workspace kept at {workspace.root}; see why each event was kept or left out:\n"
            f"  teams-runtime explain req-long --workspace {workspace.root}\n"
        )


def run(keep: Path | None = None) -> int:
    """Build the demo workspace (a temporary one unless ``keep``), show the projections."""
    if keep is not None:
        if keep.exists():
            raise TeamsRuntimeError(f"{keep} already exists; give --keep a new folder.")
        workspace = Workspace(keep)
        _write_requests(workspace)
        _show(workspace, kept=True)
        return 0
    with tempfile.TemporaryDirectory(prefix="teams-runtime-demo-") as folder:
        workspace = Workspace(folder)
        _write_requests(workspace)
        _show(workspace, kept=False)
    return 0
