"""``teams-runtime demo``: a team run end to end on requests with long histories.

It makes a workspace (temporary unless ``--keep``), seeds requests whose records already hold
dozens of events across roles, queues work for each, and runs the Team once with the dry-run
backend (no model). Every prompt is reported: role, kind, events total/included/omitted, and
the prompt's size against what the full history would have cost.

The generated histories (``sample_record``) serve the benchmarks and tests too. Their shapes
follow real records: ``role_report`` events carry a whole role result (~700 bytes of JSON each
here), hand-offs carry small payloads, and every role reports now and then.
"""

from __future__ import annotations

import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path

import anyio

from teams_runtime.actors.context import open_context
from teams_runtime.actors.intake import submit_with
from teams_runtime.actors.team import RunSummary, Team
from teams_runtime.codecs.config import DEFAULT_CONFIG_TEXT
from teams_runtime.codecs.envelopes import MessageEnvelope
from teams_runtime.codecs.formats import JsonObject, count_of
from teams_runtime.codecs.roles import ROLES
from teams_runtime.exceptions import TeamsRuntimeError
from teams_runtime.monitoring import configure_logging, stop_logging
from teams_runtime.storage import FileWorkQueue, Workspace, load_team_config
from teams_runtime.storage.files.threaded import ThreadedQueue
from teams_runtime.storage.opening import workspace_config

__all__ = ["run", "sample_event", "sample_record", "seed_requests"]

_START = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)
_KINDS = ("role_report", "delegated", "role_report", "retried", "role_report", "resumed")


def sample_event(
    index: int, request_id: str = "req-demo", roles: Sequence[str] = ROLES
) -> JsonObject:
    """The ``index``-th event of a generated history (deterministic) among ``roles`` (a
    team's; by default the built-in eight)."""
    role = roles[(index * 5 + index // 8) % len(roles)]
    kind = _KINDS[index % len(_KINDS)]
    event: JsonObject = {
        "timestamp": (_START + timedelta(minutes=index)).isoformat(),
        "type": kind,
        "actor": role if kind == "role_report" else "orchestrator",
        "summary": f"{role} step {index}: {kind.replace('_', ' ')}",
    }
    if kind == "role_report":
        event["payload"] = {
            "request_id": request_id,
            "role": role,
            "status": "completed",
            "summary": f"Step {index}: {role} reviewed the current plan, checked the open "
            "questions and recorded its result for the next role.",
            "insights": [f"observation {k} of step {index} from the {role} role" for k in range(5)],
            "proposals": {"next_step": "continue", "risk": "low", "estimate_hours": index % 7},
            "artifacts": [f"docs/{role}/step_{index}_{k}.md" for k in range(3)],
            "next_role": roles[(index + 1) % len(roles)],
            "error": "",
        }
    elif kind == "delegated":
        event["payload"] = {
            "from_role": "orchestrator",
            "to_role": role,
            "reason": f"hand-off {index}: the {role} role owns the next decision on this request",
            "attempt": 1,
        }
    return event


def sample_record(
    events: int, request_id: str = "req-demo", roles: Sequence[str] = ROLES
) -> JsonObject:
    """A request record with ``events`` generated events of ``roles`` and the usual top-level
    keys."""
    history = [sample_event(index, request_id, roles) for index in range(events)]
    last_report: JsonObject = next(
        (event["payload"] for event in reversed(history) if event["type"] == "role_report"), {}
    )
    return {
        "request_id": request_id,
        "status": "in_progress",
        "intent": "implement",
        "urgency": "normal",
        "scope": "Add export to CSV for the quarterly report (demo request)",
        "body": "Users want the quarterly report as CSV. Keep the PDF export as it is.",
        "artifacts": ["docs/report.md"],
        "params": {"workflow": {"phase": "implementation", "step": events}},
        "current_role": "qa",
        "next_role": "developer",
        "owner_role": "orchestrator",
        "created_at": _START.isoformat(),
        "updated_at": (_START + timedelta(minutes=events)).isoformat(),
        "result": last_report,
        "events": history,
    }


# Existing histories (events) and the role each request is handed to.
_SEEDS = {
    "req-short": (6, "planner"),
    "req-medium": (40, "research"),
    "req-long": (90, "developer"),
}
_ROUTE = "[research, planner, architect, developer, version_controller, qa]"


def _prepare(workspace: Workspace) -> None:
    workspace.requests_dir.mkdir(parents=True, exist_ok=True)
    config = DEFAULT_CONFIG_TEXT.replace("route: [planner, developer, qa]", f"route: {_ROUTE}")
    workspace.config_path.write_text(config, encoding="utf-8")


async def seed_requests(
    workspace: Workspace, seeds: Mapping[str, tuple[int, str]], *, label: str
) -> None:
    """Create each request of ``seeds`` (id -> (events in its history, the role to queue for))
    with a long sample history of the workspace's team, and queue an envelope for its role;
    ``label`` names the run in the envelopes' scope ("demo", "A/B")."""
    config = await anyio.to_thread.run_sync(workspace_config, workspace)
    roles = config.cast.names
    queue = ThreadedQueue(FileWorkQueue(workspace, roles=roles))
    async with open_context(workspace.root) as context:
        for request_id, (events, role) in seeds.items():
            await context.create(request_id, sample_record(events, request_id, roles))
            envelope = MessageEnvelope(
                request_id=request_id,
                sender="user",
                target=role,
                intent="implement",
                scope=f"Add export to CSV for the quarterly report ({label} request)",
                body="Continue the work recorded so far.",
            )
            await submit_with(context, queue, envelope, by=config.cast.intake_actor)


def _report(summary: RunSummary, seconds: float) -> None:
    out = sys.stdout
    out.write(
        f"{'request':<11} {'role':<19} {'purpose':<18} {'total':>5} {'incl':>5} {'omit':>5} "
        f"{'prompt chars':>12} {'full history':>12} {'saving':>6}\n"
    )
    for record in sorted(summary.prompts, key=lambda r: (r.request_id, r.timestamp)):
        saving = 1 - record.prompt_chars / record.full_history_chars
        out.write(
            f"{record.request_id:<11} {record.role:<19} {record.purpose:<18} "
            f"{record.total_events:>5} {record.included_events:>5} {record.omitted_events:>5} "
            f"{record.prompt_chars:>12,} {record.full_history_chars:>12,} {saving:>6.0%}\n"
        )
    sent = sum(r.prompt_chars for r in summary.prompts)
    full = sum(r.full_history_chars for r in summary.prompts)
    compacted = sum(r.compacted for r in summary.prompts)
    out.write(
        f"\n{count_of(len(summary.prompts), 'prompt')} ({compacted} compacted) in {seconds:.1f} s: "
        f"{sent:,} characters sent instead of {full:,} with full history "
        f"({1 - sent / full:.0%} saved). {count_of(summary.done, 'envelope')} done, "
        f"{summary.failed} failed. Backend: dry run (no model was called).\n"
        "Omitted events stay in the records on disk; each prompt's notice says where.\n"
    )


RunTeam = Callable[[Team], Awaitable[RunSummary]]


async def _run_once(team: Team) -> RunSummary:
    return await team.run(once=True)


def _run_in(workspace: Workspace, team: Team, run_team: RunTeam) -> RunSummary:
    anyio.run(partial(seed_requests, workspace, _SEEDS, label="demo"))
    return anyio.run(run_team, team)


@contextmanager
def _demo_workspace(keep: Path | None) -> Iterator[Workspace]:
    if keep is None:
        with tempfile.TemporaryDirectory(prefix="teams-runtime-demo-") as folder:
            yield Workspace(folder)
        return
    if keep.exists():
        raise TeamsRuntimeError(f"{keep} already exists; give --keep a new folder.")
    yield Workspace(keep)


def run(
    keep: Path | None = None,
    *,
    run_team: RunTeam = _run_once,
    console: Callable[[str], None] | None = None,
) -> int:
    """Run the demo; with ``keep``, in that (new) folder, left for exploring. ``run_team``
    runs the Team once (the CLI passes one that draws its live view meanwhile); ``console``
    takes the warning lines instead of stderr."""
    started = time.perf_counter()
    with _demo_workspace(keep) as workspace:
        _prepare(workspace)
        team = Team(workspace.root, load_team_config(workspace.root), keep_prompt_records=True)
        configure_logging(workspace, console_level="WARNING", console=console, roles=team.served)
        try:
            summary = _run_in(workspace, team, run_team)
        finally:
            stop_logging()
    _report(summary, time.perf_counter() - started)
    if keep is None:
        sys.stdout.write(
            "Run `teams-runtime demo --keep DIR` to keep the workspace and its logs.\n"
        )
        return 0
    sys.stdout.write(
        f"\nWorkspace kept at {keep} (demo run {datetime.now():%H:%M:%S}):\n"
        f"  records: {workspace.requests_dir}\n"
        f"  logs:    {workspace.logs_dir}\n"
        f"  try:     teams-runtime prompt req-long --role qa --workspace {keep}\n"
        f"           teams-runtime explain req-long --workspace {keep}\n"
    )
    return 0
