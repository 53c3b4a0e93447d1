"""``metrics --chart``: per day (or hour), the input tokens sent with compaction on against what
the full history would have cost, as terminal bars.

The figures are ``metrics``' own: the chart draws the report ``aggregate`` makes grouped by
``enabled`` and the day (or hour), so it filters, skips and estimates as the table does. The
full-history tokens of a call are estimated from its own tokens per character (its
``prompt_tokens`` over its ``prompt_chars``, times its ``full_history_chars``), as
docs/monitoring.md says. Only calls whose server reported tokens are counted; when none did,
the chart is in characters, and says so. Records with compaction off are left out (counted in
a note): they have nothing to compare.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from teams_runtime.codecs.formats import count_of
from teams_runtime.monitoring.metrics_report import Filters, aggregate

__all__ = ["BAR_WIDTH", "render_chart"]

BAR_WIDTH = 40  # characters of the longest bar


def _bar(value: float, most: float) -> str:
    filled = round(BAR_WIDTH * value / most) if most > 0 else 0
    return "█" * filled + "·" * (BAR_WIDTH - filled)


def render_chart(files: Iterable[Path], filters: Filters, per: str) -> str:
    """The chart of the records in ``files`` that pass ``filters``, a bar pair per ``per``
    (``day`` or ``hour``)."""
    report = aggregate(files, filters, ["enabled", per])
    buckets = [group for group in report.groups if group["enabled"]]
    disabled = sum(group["prompts"] for group in report.groups if not group["enabled"])
    if not buckets:
        return "no data: no prompt records with compaction on match."
    with_tokens = sum(group["estimated_calls"] for group in buckets)
    in_tokens = with_tokens > 0
    unit = "input tokens" if in_tokens else "prompt characters"
    rows: dict[str, tuple[float, float]] = {}
    for group in buckets:  # in time order: the report sorts its groups
        if in_tokens:
            full = group["full_history_prompt_tokens_estimate"]
            rows[group[per]] = (full - group["saved_prompt_tokens_estimate"], full)
        else:
            rows[group[per]] = (group["prompt_chars"], group["full_history_chars"])
    most = max(full for _, full in rows.values())
    width = max(len(label) for label in rows)
    lines = [f"{unit} per {per}: sent (compaction on) against the full-history estimate"]
    for label, (sent, full) in rows.items():
        saved = f"  saved {100 * (1 - sent / full):.1f}%" if full > 0 else ""
        lines.append(f"{label:<{width}}  sent {_bar(sent, most)} {round(sent):>12,}")
        lines.append(f"{'':<{width}}  full {_bar(full, most)} {round(full):>12,}{saved}")
    without_tokens = sum(group["prompts"] for group in buckets) - with_tokens
    if not in_tokens:
        lines.append("note: no server reported tokens for these prompts: shown in characters.")
    elif without_tokens:
        lines.append(
            f"note: {count_of(without_tokens, 'prompt')} without reported tokens not counted."
        )
    if disabled:
        lines.append(f"note: {count_of(disabled, 'prompt')} with compaction off not shown.")
    if report.skipped_lines:
        lines.append(f"note: {count_of(report.skipped_lines, 'skipped line')}.")
    return "\n".join(lines)
