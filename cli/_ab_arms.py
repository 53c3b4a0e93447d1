"""The arms of ``teams-runtime ab``: the same request shapes run twice on a workspace's configured
models, compaction off (``before``) then on (``after``), everything else identical; with
``--layout``, compaction on in both, laid out ``upstream`` (``before``) then ``shared_prefix``
(``after``).

Each arm is a fresh workspace folder (under a temporary folder, or ``--keep DIR``): the
workspace's ``team_runtime.yaml`` with only ``prompt_context.enabled`` (or ``layout``) changed
and the ``backend`` section left out (an arm's records and queue are its own files, never the
workspace's requests, nor its NATS server's). Each arm is seeded with the same requests, each
holding upstream's "Backfill" history of 48 events (``demo.sample_record``), queued for the
same role, and its Team runs once. The prompt records go to the arm's own logs, which
``metrics`` aggregates as for any workspace.

The configs' fingerprint (a digest of the whole config as parsed, with ``enabled``, ``layout``
and ``step`` set alike)
proves the arms differ in nothing else; the after arm's projection counts (compacted calls,
omitted events), not its token drop, prove it compacted. Each arm's requests are read back
once it ran (``ArmRequest``): an arm whose requests did not all complete (failed, stopped at a
person, ...) measured what stopped them, not compaction (``ran``).
"""

from __future__ import annotations

import hashlib
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import msgspec
import yaml

from teams_runtime import demo
from teams_runtime.actors.models import DryRunBackend
from teams_runtime.actors.team import Team
from teams_runtime.actors.telemetry import NO_TRACING
from teams_runtime.cli._budget_view import run_ratios
from teams_runtime.cli._requests import new_work_role
from teams_runtime.cli._status_report import age, status_report
from teams_runtime.codecs.config import (
    CONFIG_FILE_NAME,
    DEFAULT_STEP,
    Layout,
    TeamConfig,
    TelemetryConfig,
    load_yaml,
    parse_team_config,
)
from teams_runtime.codecs.formats import JsonObject
from teams_runtime.exceptions import ConfigError, TeamsRuntimeError
from teams_runtime.monitoring import (
    Filters,
    MetricsReport,
    aggregate,
    configure_logging,
    log_files,
    statuses_of,
    stop_logging,
)
from teams_runtime.storage import Workspace

__all__ = [
    "ARMS",
    "BACKFILL_EVENTS",
    "LAYOUT_ARMS",
    "ArmRequest",
    "ArmResult",
    "arm_config_text",
    "evidence",
    "fingerprint",
    "ran",
    "run_ab",
]

BACKFILL_EVENTS = 48  # upstream's A/B seed: the history of each request
ARMS = {"before": False, "after": True}  # arm -> prompt_context.enabled
# ab --layout: arm -> prompt_context.layout, compaction on in both
LAYOUT_ARMS: dict[str, Layout] = {"before": "upstream", "after": "shared_prefix"}


class ArmRequest(msgspec.Struct, kw_only=True):
    """One request of an arm once it ran: its ``status``, the role it is at, and how it ended
    in one line (``completed``; else why it stopped: a failure's reason, a person's answer
    waited for, an envelope deferred)."""

    request_id: str
    status: str
    role: str
    outcome: str


class ArmResult(msgspec.Struct, kw_only=True):
    """One arm: its folder, its config's fingerprint, what its calls added up to and how its
    requests ended."""

    name: str
    enabled: bool
    workspace: str
    fingerprint: str
    report: MetricsReport
    layout: Layout = "upstream"
    requests: list[ArmRequest] = msgspec.field(default_factory=list)


def ran(arm: ArmResult) -> bool:
    """Whether every request of ``arm`` completed: only then are its figures what the arms
    compare."""
    return bool(arm.requests) and all(request.status == "completed" for request in arm.requests)


def _outcome(row: JsonObject, waits: dict[str, str], deferred: dict[str, str]) -> str:
    """How one request of an arm ended, in one line (the words of ``status``)."""
    request_id, status = row["request_id"], row["status"]
    if status == "completed":
        return "completed"
    if row["failure"] is not None:
        return f"failed: {row['failure']['reason']}"
    if request_id in waits:
        return f"stopped at a person: {waits[request_id]} waits for an answer"
    if request_id in deferred:
        return f"deferred: {deferred[request_id]}"
    return f"{status or 'no status'}: it did not complete"


def _requests_of(workspace: Workspace) -> list[ArmRequest]:
    """Each request of an arm as ``status`` sees it once the arm's run ended."""
    report = status_report(workspace)
    waits = {w["request_id"]: w["role"] for w in report["waiting_answers"]}
    deferred = {
        d["request_id"]: f"{d['role']}'s envelope is due again in {age(d['due_in_seconds'])}"
        for d in report["deferred"]
    }
    return [
        ArmRequest(
            request_id=row["request_id"],
            status=row["status"] or "",
            role=waits.get(row["request_id"]) or row["current_role"],
            outcome=_outcome(row, waits, deferred),
        )
        for row in sorted(report["requests"], key=lambda row: row["request_id"])
    ]


def arm_config_text(source: str, enabled: bool, layout: Layout | None = None) -> str:
    """``source`` (a ``team_runtime.yaml``) with ``prompt_context.enabled`` set to ``enabled``
    (and ``layout``, when given: ``upstream`` drops a written ``step``, which only
    ``shared_prefix`` takes) and no ``backend`` section."""
    document = load_yaml(source)
    if not isinstance(document, dict):
        raise ConfigError(f"{CONFIG_FILE_NAME} must be a mapping at its top level.")
    document.pop("backend", None)
    block = document.get("prompt_context")
    settings = {**(block if isinstance(block, dict) else {}), "enabled": enabled}
    if layout is not None:
        settings["layout"] = layout
        if layout == "upstream":
            settings.pop("step", None)
    document["prompt_context"] = settings
    return yaml.safe_dump(document, sort_keys=False, allow_unicode=True)


def fingerprint(config: TeamConfig) -> str:
    """A digest of everything in ``config`` but ``prompt_context.enabled``, ``layout`` and
    ``step`` (what the arms of ``ab`` and of ``ab --layout`` change)."""
    context = config.prompt_context
    alike = msgspec.structs.replace(
        config,
        prompt_context=msgspec.structs.replace(
            context, enabled=True, layout="upstream", step=DEFAULT_STEP
        ),
    )
    return hashlib.blake2b(msgspec.json.encode(alike), digest_size=8).hexdigest()


def _run_arm(
    name: str,
    root: Path,
    text: str,
    *,
    source: Workspace,
    dry_run: bool,
    role: str,
    requests: int,
) -> ArmResult:
    workspace = Workspace(root)
    workspace.requests_dir.mkdir(parents=True)
    workspace.config_path.write_text(text, encoding="utf-8")
    config = parse_team_config(text, str(workspace.config_path))
    backend = None
    if dry_run:  # no model is called: nothing to price (a per-call card would price it)
        backend = DryRunBackend(config.model.dry_run)
        config = msgspec.structs.replace(config, telemetry=TelemetryConfig(enabled=False))
    # No spans or metrics, whatever telemetry.otel says: the arms are measurements, not the
    # team's work (and their requests exist only in the arms' folders).
    # Each arm starts from the same ratios, learned from the source workspace's prompt log.
    ratios = run_ratios(source, config, config.cast.names)
    team = Team(root, config, backend=backend, tracing=NO_TRACING, ratios=ratios)  # checks models
    seeds = {f"ab-backfill-{n}": (BACKFILL_EVENTS, role) for n in range(1, requests + 1)}
    anyio.run(partial(demo.seed_requests, workspace, seeds, label="A/B"))
    configure_logging(workspace, console_level="WARNING", roles=team.served)
    try:
        anyio.run(lambda: team.run(once=True))
    finally:
        stop_logging()
    with statuses_of([workspace]) as status_of:
        report = aggregate(
            log_files(workspace.logs_dir),
            Filters(),
            ["enabled"],
            rate_cards=config.telemetry.rate_cards,
            status_of=status_of,
        )
    return ArmResult(
        name=name,
        enabled=config.prompt_context.enabled,
        workspace=str(root),
        fingerprint=fingerprint(config),
        report=report,
        layout=config.prompt_context.layout,
        requests=_requests_of(workspace),
    )


@contextmanager
def _arms_folder(keep: Path | None) -> Iterator[Path]:
    if keep is None:
        with tempfile.TemporaryDirectory(prefix="teams-runtime-ab-") as folder:
            yield Path(folder)
        return
    if keep.exists():
        raise TeamsRuntimeError(f"{keep} already exists; give --keep a new folder.")
    try:
        keep.mkdir(parents=True)
    except OSError as exc:  # /proc/x, a read-only place, a file in the way
        raise TeamsRuntimeError(
            f"--keep {keep}: the folder cannot be made ({exc.strerror or exc}); give a folder "
            "you can write to."
        ) from None
    yield keep


def run_ab(
    source: Workspace,
    *,
    dry_run: bool = False,
    keep: Path | None = None,
    role: str | None = None,
    requests: int = 2,
    layout: bool = False,
) -> list[ArmResult]:
    """Run both arms from ``source``'s config (checked first: a bad config runs no arm), the
    requests queued for ``role`` (default: ``planner``, or the team's first role that takes
    new work when it has no planner); with ``layout``, the arms of ``LAYOUT_ARMS``."""
    try:
        text = source.config_path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{source.config_path}: cannot be read ({exc.strerror}).") from None
    cast = parse_team_config(text, str(source.config_path)).cast
    choices = cast.takes_new_work
    if role is None:
        role = choices[0] if choices and "planner" not in choices else "planner"
    role = new_work_role(cast, role)
    if layout:
        texts = {name: arm_config_text(text, True, how) for name, how in LAYOUT_ARMS.items()}
    else:
        texts = {name: arm_config_text(text, enabled) for name, enabled in ARMS.items()}
    with _arms_folder(keep) as folder:
        return [
            _run_arm(
                name,
                folder / name,
                texts[name],
                source=source,
                dry_run=dry_run,
                role=role,
                requests=requests,
            )
            for name in ARMS
        ]


def evidence(after: ArmResult) -> dict[str, Any]:
    """Whether the after arm really compacted: its projection counts."""
    totals = after.report.totals
    return {
        "compacted": totals.compacted > 0 and totals.omitted_events > 0,
        "compacted_calls": totals.compacted,
        "calls": totals.prompts,
        "omitted_events": totals.omitted_events,
        "included_events": totals.included_events,
        "total_events": totals.total_events,
    }
