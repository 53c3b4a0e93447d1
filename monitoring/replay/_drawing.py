"""A replay as ``teams-runtime replay`` prints it: the table (with what it is approximate in
and how tokens were counted), the chart (``--chart``), or the JSON (``--json``)."""

from __future__ import annotations

import msgspec

from teams_runtime.codecs.formats import JsonObject, count_of
from teams_runtime.monitoring.replay._engine import ReplayReport
from teams_runtime.monitoring.replay._rows import ReplayRow
from teams_runtime.policy.token_counts import DEFAULT_CHARS_PER_TOKEN

__all__ = ["APPROXIMATE", "BAR_WIDTH", "render_replay_chart", "render_replay_table", "replay_json"]

BAR_WIDTH = 40  # characters of the longest bar

APPROXIMATE = (
    "Approximate: each prompt is rebuilt from the events up to its hop; the record's other "
    "fields (result, status, updated_at) are as they are now and the envelope is rebuilt from "
    "them. No model was called."
)

_HEADERS = (
    "policy",
    "layout",
    "prompts",
    "tokens (est.)",
    "cacheable",
    "same role",
    "other roles",
    "evidence kept",
    "cost (input)",
    "over budget",
)


def replay_json(report: ReplayReport) -> JsonObject:
    """What ``replay --json`` prints: ``{"policies": [a row per (policy, layout)]}``."""
    return {
        "policies": [
            {
                **msgspec.structs.asdict(row),
                "step": report.step if row.layout == "shared_prefix" else None,
            }
            for row in report.rows
        ]
    }


def _percent(part: float, whole: float) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "-"


def _cells(row: ReplayRow, measured: bool) -> tuple[str, ...]:
    tokens = row.prompt_tokens_estimate
    kept = _share(row.evidence_kept)
    cacheable = f"{row.cacheable_prompt_tokens:,} ({_percent(row.cacheable_prompt_tokens, tokens)})"
    over = "-" if row.budget_overflows is None else f"{row.budget_overflows:,}"
    if row.too_large:
        over += f" ({row.too_large:,} too large)"
    return (
        row.policy,
        row.layout,
        f"{row.prompts:,}",
        f"{tokens:,}",
        cacheable,
        _percent(row.cacheable_same_role_prompt_tokens, tokens),
        _percent(row.cacheable_cross_role_prompt_tokens, tokens),
        kept,
        "-" if row.cost_usd is None else f"${row.cost_usd:.4f}",
        over,
    ) + ((_share(row.measured_cached_share),) if measured else ())


def _share(share: float | None) -> str:
    return "-" if share is None else f"{100 * share:.1f}%"


def _recorded_notes(report: ReplayReport) -> list[str]:
    """What the ``recorded`` rows say beside the records: the characters sent, and the
    server's own count of its cache against the replay's prediction."""
    recorded = [row for row in report.rows if row.policy == "recorded"]
    if not recorded:
        return []
    lines = []
    if report.other_layout:
        lines.append(
            f"Not in the recorded rows: {count_of(report.other_layout, 'call')} laid out in a "
            "layout not asked for (--layout)."
        )
    rebuilt = sum(row.prompt_chars for row in recorded)
    if report.recorded_chars:
        lines.append(
            f"The records say {report.recorded_chars:,} prompt characters were sent; rebuilt "
            f"under recorded: {rebuilt:,} ({100 * (rebuilt / report.recorded_chars - 1):+.1f}%)."
        )
    for row in recorded:
        measured, predicted = row.measured_cached_share, row.predicted_cached_share
        if measured is None or predicted is None:
            continue
        calls = count_of(row.measured_prompts, "call")
        lines.append(
            f"Cached by the model server, by its own count ({calls} laid out {row.layout}): "
            f"{100 * measured:.1f}% of "
            f"{row.measured_prompt_tokens:,} prompt tokens; the replay predicts "
            f"{100 * predicted:.1f}% for those prompts ({100 * (predicted - measured):+.1f} "
            "points)."
        )
    return lines


def _notes(report: ReplayReport, ttl: float) -> list[str]:
    calls = count_of(report.replayed, "model call")
    step = f"; shared_prefix step {report.step}" if report.step is not None else ""
    lines = [
        f"Replayed {calls} of {report.calls} in the prompt records; cache lifetime {ttl:g} s{step}."
    ]
    if not report.calls:
        lines.append(
            "No prompt records yet: run the team (teams-runtime run) and replay what it sent."
        )
    for row in report.rows:
        if row.too_large:
            lines.append(
                f"{row.policy} {row.layout}: {count_of(row.too_large, 'prompt')} cannot fit "
                "the budget even without events (the call would fail, nothing sent) and count "
                "no tokens: compare its tokens with a row that sent them all with care."
            )
    if report.without_record:
        lines.append(
            f"Left out: {count_of(report.without_record, 'call')} whose request record is gone "
            "or was not given."
        )
    if report.past_record:
        lines.append(
            f"Left out: {count_of(report.past_record, 'call')} that saw more events than the "
            "request's record holds now."
        )
    lines += _recorded_notes(report)
    for model, rate in sorted(report.rates.items()):
        if rate.method == "learned":
            how = f"learned from its calls, {1 / rate.tokens_per_byte:.2f} characters a token"
        else:
            how = f"the default, {DEFAULT_CHARS_PER_TOKEN} characters a token"
        lines.append(f"Tokens of {model}: {how}.")
    lines.append(APPROXIMATE)
    return lines


def render_replay_table(report: ReplayReport, ttl: float) -> str:
    """The human table: a row per (policy, layout), then the notes."""
    measured = any(row.measured_prompts for row in report.rows)
    headers = (*_HEADERS, "server cached") if measured else _HEADERS
    cells = [headers, *(_cells(row, measured) for row in report.rows)]
    widths = [max(len(cell[i]) for cell in cells) for i in range(len(headers))]
    lines = [
        "  ".join(
            text.ljust(width) if column < 2 else text.rjust(width)
            for column, (text, width) in enumerate(zip(cell, widths, strict=True))
        ).rstrip()
        for cell in cells
    ]
    return "\n".join([*lines, "", *_notes(report, ttl)])


def _bar(cached: float, tokens: float, most: float) -> str:
    whole = round(BAR_WIDTH * tokens / most) if most > 0 else 0
    served = min(round(BAR_WIDTH * cached / most) if most > 0 else 0, whole)
    return "█" * served + "▒" * (whole - served) + "·" * (BAR_WIDTH - whole)


def render_replay_chart(report: ReplayReport, ttl: float) -> str:
    """The rows as bars of prompt tokens, the part a prompt cache could serve drawn solid."""
    rows = report.rows
    most = max((row.prompt_tokens_estimate for row in rows), default=0)
    policies = max((len(row.policy) for row in rows), default=0)
    layouts = max((len(row.layout) for row in rows), default=0)
    lines = [
        "prompt tokens per policy and layout (█ a prompt cache could serve, ▒ the rest), "
        f"cache lifetime {ttl:g} s"
    ]
    for row in rows:
        label = f"{row.policy:<{policies}}  {row.layout:<{layouts}}"
        tokens, cached = row.prompt_tokens_estimate, row.cacheable_prompt_tokens
        kept = _share(row.evidence_kept)
        lines.append(
            f"{label}  {_bar(cached, tokens, most)} {tokens:>12,}  cacheable "
            f"{_percent(cached, tokens):>6}  evidence kept {kept}"
        )
    return "\n".join(lines)
