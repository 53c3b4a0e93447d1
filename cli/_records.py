"""``teams-runtime project``, ``explain`` and ``prompt``: one request as the roles see it, read
and never written.

``project`` prints the request as a prompt embeds it, ``explain`` says for every event whether
the projection keeps it and why, ``prompt`` prints the whole prompt a role would be sent. Each
reads through a ContextActor as the roles do, with the config's ``prompt_context`` or the
flags that override it for the one command.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import msgspec

from teams_runtime.actors.context import open_context
from teams_runtime.cli._budget_view import (
    budget_figures,
    budget_of,
    budget_rows,
    budgeted,
    envelope_from,
    fit_shown,
    layout_shown,
    pretty_sizes,
    rate_of,
    with_layout,
)
from teams_runtime.cli._flags import (
    add_json,
    add_overrides,
    add_selector,
    add_workspace,
    prompt_kind,
    role_name,
    team_role,
)
from teams_runtime.cli._migrate import read_record_file
from teams_runtime.cli._output import UserError, write_json
from teams_runtime.codecs.config import Cast, PromptContextConfig, TeamConfig
from teams_runtime.codecs.evidence import event_type_label, role_of_raw
from teams_runtime.codecs.formats import JsonObject, count_of
from teams_runtime.codecs.projection_reply import Projection
from teams_runtime.exceptions import ConfigError
from teams_runtime.policy.projection import explain_decisions, notice_text, project_fields
from teams_runtime.policy.prompt_previews import preview_prompt
from teams_runtime.policy.prompts import (
    PURPOSES,
    PromptBundle,
    PromptKind,
)
from teams_runtime.storage import RecordStore, Workspace, load_team_config
from teams_runtime.storage.opening import blocking_storage, workspace_config

__all__ = [
    "cmd_explain",
    "cmd_project",
    "cmd_prompt",
    "declare_explain",
    "declare_project",
    "declare_prompt",
    "explain_json",
    "prompt_json",
    "read_whole",
]


def _team_config(args: argparse.Namespace) -> TeamConfig:
    """The workspace's config, read once per command. With ``--record`` a workspace without a
    config file gives the defaults (a record file read anywhere); without it, that is an error."""
    workspace = Workspace(args.workspace)
    if args.record is not None:
        return workspace_config(workspace)
    return load_team_config(workspace.root)


def _with_overrides(base: PromptContextConfig, args: argparse.Namespace) -> PromptContextConfig:
    """``base`` with --layout, --step, --recent-events, --max-events and --disable applied.
    With --disable the counts do not matter (the full history is shown), so they are not
    applied or checked."""
    base = with_layout(base, args)
    if args.disable:
        return msgspec.structs.replace(base, enabled=False)
    overrides: dict[str, Any] = {}
    if args.recent_events is not None:
        overrides["recent_events"] = args.recent_events
    if args.max_events is not None:
        overrides["max_events"] = args.max_events
    if not overrides:
        return base
    try:
        return msgspec.structs.replace(base, **overrides)
    except ConfigError:
        raise UserError(
            f"recent_events {overrides.get('recent_events', base.recent_events)} is greater than "
            f"max_events {overrides.get('max_events', base.max_events)}: max_events must be "
            "greater than or equal to recent_events (change --recent-events or --max-events)."
        ) from None


async def _project_stored(
    store: RecordStore, root: Path, request_id: str, config: PromptContextConfig
) -> Projection:
    """The projection of a stored request, read as the roles read it, through a ContextActor:
    the head and the events it selects, not the whole history."""
    async with open_context(root, config, store=store) as context:
        return await context.project(request_id)


def declare_project(project: argparse.ArgumentParser) -> None:
    """Declare ``project``: its description, flags and handler."""
    project.description = (
        "Print the request as a role's prompt embeds it: the compaction notice "
        "(only when events were omitted), then `Current request:` and the projected record. "
        "The flags override prompt_context; the record is only read."
    )
    add_selector(project)
    _add_role(project, "with a budget, fit the record as ROLE's whole prompt (else alone)")
    add_json(project, "print one JSON object with the notice, counts and record")
    project.set_defaults(handler=cmd_project)


def _add_role(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument("--role", type=role_name, metavar="ROLE", help=what)


def cmd_project(args: argparse.Namespace) -> int:
    team = _team_config(args)
    config = _with_overrides(team.prompt_context, args)
    if args.record is not None:
        projection = project_fields(read_record_file(Path(args.record))[1], config)
    else:
        workspace = Workspace(args.workspace)
        with blocking_storage(workspace, team) as storage:  # NATS connects, then closes
            projection = storage.run_with_store(
                _project_stored, workspace.root, args.request_id, config
            )
    projection, figures = budgeted(args, team, projection)
    if args.json:
        output = {
            "notice": projection.notice,
            "total_events": projection.total_events,
            "included_events": projection.included_events,
            "omitted_events": projection.omitted_events,
            "compacted": projection.compacted,
            **figures,
            "selected_indices": projection.selected_indices,
            "backfilled": projection.backfilled,
            "request": projection.raw_fields(),
        }
        write_json(output)
        return 0
    notice = notice_text(projection)
    after = projection.config.layout == "shared_prefix"  # its notice follows the events
    if notice and not after:
        sys.stdout.write(notice + "\n\n")
    sys.stdout.write("Current request:\n")
    sys.stdout.write(b"".join(projection.iter_record_json()).decode())
    sys.stdout.write("\n" + (f"\n{notice}\n" if notice and after else ""))
    return 0


def declare_explain(explain: argparse.ArgumentParser) -> None:
    """Declare ``explain``: its description, flags and handler."""
    explain.description = (
        "One line per event: its index, type, role identity and the projection's "
        "decision (tail, backfill for a role, or why it is omitted), under a line with the "
        "record's counts and the config used."
    )
    add_selector(explain)
    _add_role(explain, "with a budget, fit as ROLE's whole prompt (else the record alone)")
    add_json(explain)
    explain.set_defaults(handler=cmd_explain)


def cmd_explain(args: argparse.Namespace) -> int:
    report = explain_json(args)
    if args.json:
        write_json(report)
        return 0
    _print_explain(report)
    return 0


def read_whole(workspace: Workspace, team: TeamConfig, request_id: str) -> tuple[JsonObject, str]:
    """A stored request's fields, every event with them (``tail=None``), and where it is."""
    with blocking_storage(workspace, team) as storage:  # NATS connects, then closes
        read = storage.store.read(request_id, tail=None)
    return read.fields, read.source


def explain_json(args: argparse.Namespace) -> JsonObject:
    """What ``explain`` given ``args`` prints with ``--json``: the counts, the config used, the
    budget's figures when one is in force, and every event's decision (``events`` is ``None``
    when the record's ``events`` is not a list)."""
    team = _team_config(args)
    config = _with_overrides(team.prompt_context, args)
    if args.record is not None:
        source = str(Path(args.record))
        _, fields = read_record_file(Path(args.record))
    else:
        # Every event is needed, so the record is read whole (tail=None).
        fields, source = read_whole(Workspace(args.workspace), team, args.request_id)
    projection = project_fields(fields, config)
    fitted, figures = budgeted(args, team, projection)
    events = fields.get("events")
    rows: list[JsonObject] | None = None
    if isinstance(events, list):
        roles = [role_of_raw(raw) for raw in events]
        decisions = explain_decisions(projection, roles)
        rows = [
            {"index": index, "type": event_type_label(raw), "role": role, "decision": decision}
            for index, (raw, role, decision) in enumerate(
                zip(events, roles, decisions, strict=True)
            )
        ]
        if figures:  # a budget is in force: each event's tokens, and what it decided
            role = team_role(team.cast, args.role) if args.role else None
            rate = rate_of(Workspace(args.workspace), team, role)
            tokens, decided = budget_rows(projection, fitted, pretty_sizes(events), rate)
            for row, count in zip(rows, tokens, strict=True):
                row["tokens"] = count
                row["decision"] = decided.get(row["index"], row["decision"])
    return {
        "record": source,
        "total_events": fitted.total_events,
        "included_events": fitted.included_events,
        "omitted_events": fitted.omitted_events,
        "compacted": fitted.compacted,
        "recent_events": config.recent_events,
        "max_events": config.max_events,
        "enabled": config.enabled,
        **layout_shown(config),
        **figures,
        "events": rows,
    }


_BUDGET_FIGURES = ("max_prompt_tokens", "prompt_tokens_estimate", "token_count_method")
_LAYOUT_FIGURES = ("layout", "step")


def _print_explain(report: JsonObject) -> None:
    source, rows = report["record"], report["events"]
    if rows is None:
        print(f"{source}: `events` is not a list; the record passes through unchanged.")
        return
    budget = {key: report[key] for key in (*_LAYOUT_FIGURES, *_BUDGET_FIGURES) if key in report}
    figures = "".join(f", {key}={value}" for key, value in budget.items())
    print(
        f"{source}: {count_of(report['total_events'], 'event')}, "
        f"{report['included_events']} included, {report['omitted_events']} omitted "
        f"(recent_events={report['recent_events']}, max_events={report['max_events']}, "
        f"enabled={str(report['enabled']).lower()}{figures})"
    )
    tokens = any(key in report for key in _BUDGET_FIGURES)
    print(f"{'index':>5}  {'type':<26}  {'role':<20}  {'tokens  ' if tokens else ''}decision")
    for row in rows:
        count = f"{row['tokens']:>6}  " if tokens else ""
        role = row["role"] or "-"
        print(f"{row['index']:>5}  {row['type']:<26}  {role:<20}  {count}{row['decision']}")


def declare_prompt(prompt: argparse.ArgumentParser) -> None:
    """Declare ``prompt``: its description, flags and handler."""
    prompt.description = (
        "Print the prompt ROLE would be sent for the request now, through the "
        "projection a running role uses. Nothing is sent and nothing is written."
    )
    prompt.add_argument("request_id", metavar="REQUEST_ID")
    prompt.add_argument(
        "--role",
        required=True,
        type=role_name,
        metavar="ROLE",
        help="a role of the team (`config --graph` lists them)",
    )
    prompt.add_argument(
        "--kind",
        type=prompt_kind,
        metavar="KIND",
        help="the prompt kind, named as in the logs: the role's own (its prompt_kind: "
        "research_decision for research, version_control for version_controller, else "
        "role_task; the default) or contract_repair",
    )
    add_workspace(prompt)
    add_overrides(prompt)
    add_json(prompt, "print the prompt text, the notice and the counts as JSON")
    prompt.set_defaults(handler=cmd_prompt)


def _checked_kind(cast: Cast, role: str, kind: PromptKind | None) -> PromptKind:
    """The kind to show ``role`` of ``cast``: its own unless asked; a kind the runtime never
    sends that role (``research_decision`` to qa, say) is refused, so the text and the JSON
    agree."""
    own = cast.prompt_kind_of(role)
    if kind is None or kind in (own, "repair"):
        return kind or own
    raise UserError(
        f"--kind {PURPOSES[kind]} is never sent to the {role} role; it gets "
        f"{PURPOSES[own]} (or contract_repair). Leave out --kind, or pick the role that "
        f"gets {PURPOSES[kind]}."
    )


def cmd_prompt(args: argparse.Namespace) -> int:
    bundle, output = prompt_json(args)
    if args.json:
        write_json(output)
        return 0
    for chunk in bundle.iter_chunks():
        sys.stdout.write(chunk)
    return 0


def prompt_json(args: argparse.Namespace) -> tuple[PromptBundle, JsonObject]:
    """The prompt ``prompt`` given ``args`` shows, and what it prints with ``--json``: the
    prompt, its notice, its counts, and the budget's figures when one is in force."""
    workspace = Workspace(args.workspace)
    team = load_team_config(workspace.root)
    cast = team.cast
    kind = _checked_kind(cast, team_role(cast, args.role), args.kind)
    config = _with_overrides(team.prompt_context, args)
    with blocking_storage(workspace, team) as storage:  # NATS connects, then closes
        bundle = storage.run_with_store(
            _preview_prompt, workspace, args.request_id, args.role, kind, config, cast
        )
    # As a run would send it: fitted to the role's budget (or --max-prompt-tokens).
    budget = budget_of(team, args.role, args)
    rate = rate_of(workspace, team, args.role)
    fitted = fit_shown(bundle, budget, rate)
    bundle = fitted.bundle
    projection = bundle.projection
    output: JsonObject = {
        "role": bundle.role,
        "kind": bundle.purpose,  # one vocabulary: the name --kind takes and the logs use
        "purpose": bundle.purpose,
        "notice": projection.notice,
        "total_events": projection.total_events,
        "included_events": projection.included_events,
        "omitted_events": projection.omitted_events,
        "compacted": projection.compacted,
        **layout_shown(projection.config),
        "prompt": bundle.text(),
    }
    output.update(budget_figures(budget, fitted.estimate, rate))
    return bundle, output


async def _preview_prompt(
    store: RecordStore,
    workspace: Workspace,
    request_id: str,
    role: str,
    kind: PromptKind,
    config: PromptContextConfig,
    cast: Cast,
) -> PromptBundle:
    """The prompt ``role`` of ``cast`` would be sent for ``request_id`` (a repair shows the
    errors an empty reply would get). Reads through a ContextActor like the roles do; writes
    nothing."""
    projection = await _project_stored(store, workspace.root, request_id, config)
    envelope = envelope_from(projection, request_id, role)
    return preview_prompt(kind, role=role, projection=projection, envelope=envelope, cast=cast)
