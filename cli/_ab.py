"""``teams-runtime ab``: the same long-history requests run with compaction off, then on, on the
workspace's configured models, and the two arms printed side by side (``_ab_arms`` runs them);
``--layout``: compaction on in both, the ``upstream`` layout then ``shared_prefix``.

Exit status 1 when the comparison proves nothing: an arm whose requests did not all complete
(failed, stopped at a person: each named, and no change is printed as if it were data), or an
after arm that did not compact (a token drop alone proves nothing; with ``--layout`` both
compact alike, the layout is what differs: 0 once both arms ran).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

from teams_runtime.cli._ab_arms import BACKFILL_EVENTS, ArmResult, evidence, ran, run_ab
from teams_runtime.cli._flags import add_json, add_workspace, role_name
from teams_runtime.cli._output import UserError, write_json
from teams_runtime.codecs.config import CONFIG_FILE_NAME
from teams_runtime.codecs.formats import JsonObject, count_of
from teams_runtime.storage import Workspace

__all__ = ["cmd_ab", "declare_ab"]

_MOST_REQUESTS = 50


def _request_count(text: str) -> int:
    try:
        count = int(text)
    except ValueError:
        count = 0
    if not 1 <= count <= _MOST_REQUESTS:
        raise argparse.ArgumentTypeError(
            f"must be a whole number from 1 to {_MOST_REQUESTS}, not {text!r}"
        )
    return count


def declare_ab(ab: argparse.ArgumentParser) -> None:
    """Declare ``ab``: its description, flags and handler."""
    ab.description = (
        "Seed 48-event requests into two fresh workspaces made from this one's "
        "config (prompt_context.enabled false, then true; nothing else changed), run each on "
        "the configured models and compare tokens, cost, repairs, failures and p95 latency. "
        "The workspace's own requests are never touched. Exit status 1 when an arm's requests "
        "did not all complete (each is named) or the after arm did not compact. See "
        "docs/monitoring.md."
    )
    add_workspace(ab)
    ab.add_argument(
        "--dry-run", action="store_true", help="answer with the dry-run backend (no model)"
    )
    ab.add_argument(
        "--keep",
        type=Path,
        metavar="DIR",
        help="make the arms in DIR/before and DIR/after and keep them (DIR must not exist)",
    )
    ab.add_argument(
        "--requests",
        type=_request_count,
        default=2,
        metavar="N",
        help="requests per arm (default 2)",
    )
    ab.add_argument(
        "--role",
        type=role_name,
        metavar="R",
        help="the role of the team the requests are queued for (default planner, or the "
        "team's first role that takes new work when it has no planner)",
    )
    ab.add_argument(
        "--layout",
        action="store_true",
        help="compaction on in both arms: prompt_context.layout upstream (before), then "
        "shared_prefix (after), to compare what a prompt cache serves (docs/compaction.md)",
    )
    add_json(ab, "print both arms as JSON")
    ab.set_defaults(handler=cmd_ab)


def cmd_ab(args: argparse.Namespace) -> int:
    source = Workspace(args.workspace)
    if not source.config_path.exists():
        raise UserError(
            f"{source.root} is not a workspace (it has no {CONFIG_FILE_NAME}); pass the folder "
            "holding it with --workspace DIR."
        )
    arms = run_ab(
        source,
        dry_run=args.dry_run,
        keep=args.keep,
        role=args.role,
        requests=args.requests,
        layout=args.layout,
    )
    figures = {arm.name: _figures(arm) for arm in arms}
    proof = evidence(arms[1])
    both_ran = all(ran(arm) for arm in arms)
    if args.json:
        write_json(
            {
                "events_per_request": BACKFILL_EVENTS,
                "dry_run": args.dry_run,
                "same_config": arms[0].fingerprint == arms[1].fingerprint,
                "after_compacted": proof,
                "both_ran": both_ran,
                "arms": {
                    arm.name: {
                        "enabled": arm.enabled,
                        **({"layout": arm.layout} if args.layout else {}),
                        "workspace": arm.workspace if args.keep else None,
                        "fingerprint": arm.fingerprint,
                        "ran": ran(arm),
                        "requests": [msgspec.structs.asdict(r) for r in arm.requests],
                        **figures[arm.name],
                        "metrics": {  # a figure left unset (estimates) is left out
                            key: value
                            for key, value in msgspec.structs.asdict(arm.report).items()
                            if value is not msgspec.UNSET
                        },
                    }
                    for arm in arms
                },
            }
        )
    else:
        _print(arms, figures, proof, kept=args.keep is not None, layout=args.layout)
    return 0 if both_ran and (proof["compacted"] or args.layout) else 1


def _figures(arm: ArmResult) -> dict[str, Any]:
    """The comparison's figures of one arm (unrounded)."""
    totals = arm.report.totals
    done = arm.report.completed_requests
    return {
        "calls": totals.prompts,
        "compacted_calls": totals.compacted,
        "omitted_events": totals.omitted_events,
        "mean_prompt_chars": totals.mean_prompt_chars,
        "calls_with_usage": totals.prompts_with_usage,
        "input_tokens": totals.prompt_tokens,
        "input_tokens_per_call": totals.mean_prompt_tokens,
        "cached_input_tokens": totals.cached_prompt_tokens,
        "cached_ratio": totals.cached_ratio,
        "output_tokens": totals.completion_tokens,
        "completed_requests": done.requests,
        "input_tokens_per_completed_request": done.mean_prompt_tokens,
        "cost_usd": totals.cost_usd,
        "cost_usd_per_completed_request": done.mean_cost_usd,
        "repairs": totals.repairs,
        "retries": totals.retries,
        "failures": totals.failures,
        # Unknown (not none) when no call said why its answer ended: a dry run, a command.
        "truncated": totals.truncated if totals.finish_reasons else None,
        "latency_p95_ms": totals.latency_p95_ms,
    }


def _compared(layout: bool) -> tuple[str, tuple[str, str]]:
    """What the arms compare, and each arm's setting, as the table's head says them."""
    if layout:
        return "compaction on, the upstream layout (before) then shared_prefix (after)", (
            "prompt_context.layout upstream     ",
            "prompt_context.layout shared_prefix",
        )
    return "compaction off (before) then on (after)", (
        "prompt_context.enabled false",
        "prompt_context.enabled true ",
    )


def _shown(value: Any, how: Callable[[Any], str]) -> str:
    return "-" if value is None else how(value)


_ROWS: list[tuple[str, str, Callable[[Any], str]]] = [
    ("calls", "calls", lambda v: f"{v:,}"),
    ("compacted_calls", "compacted calls", lambda v: f"{v:,}"),
    ("omitted_events", "events omitted", lambda v: f"{v:,}"),
    ("mean_prompt_chars", "prompt chars per call", lambda v: f"{v:,.0f}"),
    ("input_tokens_per_call", "input tokens per call", lambda v: f"{v:,.0f}"),
    ("input_tokens_per_completed_request", "input tokens per request", lambda v: f"{v:,.0f}"),
    ("cached_ratio", "cached input", lambda v: f"{v:.1%}"),
    ("cost_usd", "cost", lambda v: f"${v:,.6f}"),
    ("cost_usd_per_completed_request", "cost per request", lambda v: f"${v:,.6f}"),
    ("repairs", "contract repairs", lambda v: f"{v:,}"),
    ("retries", "retries", lambda v: f"{v:,}"),
    ("failures", "failures", lambda v: f"{v:,}"),
    ("truncated", "answers cut (length)", lambda v: f"{v:,}"),
    ("latency_p95_ms", "p95 latency ms", lambda v: f"{v:,.0f}"),
]


def _change(before: Any, after: Any) -> str:
    if not isinstance(before, int | float) or not isinstance(after, int | float) or not before:
        return ""
    return f"{after / before - 1:+.0%}"


def _not_run(arms: list[ArmResult]) -> list[str]:
    """The arms whose requests did not all complete, each request that did not named with
    how it ended; then why no change is shown."""
    lines = []
    for arm in arms:
        if ran(arm):
            continue
        stopped = [request for request in arm.requests if request.status != "completed"]
        lines.append(
            f"The {arm.name} arm did not run to the end: {len(stopped)} of "
            f"{count_of(len(arm.requests), 'request')} did not complete."
            if arm.requests
            else f"The {arm.name} arm did not run: it has no request."
        )
        lines += [f"  {request.request_id}: {request.outcome}" for request in stopped]
    lines.append(
        "No comparison: an arm that did not run to the end measured what stopped it, not what "
        "the arms compare. The figures below are each arm's own."
    )
    return lines


def _print(
    arms: list[ArmResult],
    figures: dict[str, dict[str, Any]],
    proof: JsonObject,
    *,
    kept: bool,
    layout: bool = False,
) -> None:
    before, after = figures["before"], figures["after"]
    what, settings = _compared(layout)
    lines = [
        f"A/B: {BACKFILL_EVENTS}-event histories, {what}",
        f"  before: {arms[0].workspace}  {settings[0]}  config fingerprint {arms[0].fingerprint}",
        f"  after:  {arms[1].workspace}  {settings[1]}  config fingerprint {arms[1].fingerprint}",
        "",
    ]
    both_ran = all(ran(arm) for arm in arms)
    if not both_ran:  # its figures are what stopped its requests: no change worth a ratio
        lines += [*_not_run(arms), ""]
    rows = [["", "before", "after", "change" if both_ran else ""]]
    for key, label, how in _ROWS:
        rows.append(
            [
                label,
                _shown(before[key], how),
                _shown(after[key], how),
                _change(before[key], after[key]) if both_ran else "",
            ]
        )
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    for row in rows:
        cells = [
            row[0].ljust(widths[0]),
            *(cell.rjust(width) for cell, width in zip(row[1:], widths[1:], strict=True)),
        ]
        lines.append("  " + "  ".join(cells).rstrip())
    same = arms[0].fingerprint == arms[1].fingerprint
    key = "prompt_context.layout" if layout else "prompt_context.enabled"
    lines += [
        "",
        f"Configs: identical but for {key}."
        if same
        else f"Configs: DIFFER beyond {key}; the comparison proves nothing.",
        (
            f"Compaction in the after arm: yes ({proof['compacted_calls']:,} of "
            f"{count_of(proof['calls'], 'call')} compacted, "
            f"{count_of(proof['omitted_events'], 'event')} omitted)."
            if proof["compacted"]
            else "Compaction in the after arm: NO (no call's projection omitted an event); a "
            "token drop alone proves nothing."
        ),
    ]
    if not before["calls_with_usage"]:
        lines.append("No tokens: the model reported no usage (a dry run, a command).")
    if not kept:
        lines.append("The arms' folders are removed; `--keep DIR` keeps them for `metrics`.")
    print("\n".join(lines))
