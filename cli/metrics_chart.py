"""``metrics --chart``: per day (or hour), the input tokens sent with compaction on against what
the full history would have cost, as terminal bars.

The records are ``metrics``' own: filtered (and skipped) by ``matching_records``, bucketed by
``group_value`` (a bar pair is a ``--by day`` or ``--by hour`` group), and estimated by
``full_history_tokens``, each call from its own tokens per character (its ``prompt_tokens``
over its ``prompt_chars``, times its ``full_history_chars``), as docs/monitoring.md says. Only
calls whose server reported tokens are counted; when none did, the chart is in characters, and
says so. Records with compaction off are left out (counted in a note): they have nothing to
compare. Its own sums are a few per bucket, so it reads a large log faster than the table.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from teams_runtime.codecs.formats import count_of
from teams_runtime.monitoring import (
    Filters,
    Skipped,
    full_history_tokens,
    group_value,
    matching_records,
)

__all__ = ["BAR_WIDTH", "render_chart"]

BAR_WIDTH = 40  # characters of the longest bar


@dataclass
class _Bucket:
    sent_tokens: float = 0.0
    full_tokens: float = 0.0
    sent_chars: int = 0
    full_chars: int = 0


def _bar(value: float, most: float) -> str:
    filled = round(BAR_WIDTH * value / most) if most > 0 else 0
    return "█" * filled + "·" * (BAR_WIDTH - filled)


def render_chart(files: Iterable[Path], filters: Filters, per: str) -> str:
    """The chart of the records in ``files`` that pass ``filters``, a bar pair per ``per``
    (``day`` or ``hour``)."""
    buckets: dict[str, _Bucket] = {}
    with_tokens = without_tokens = disabled = 0
    skipped = Skipped()
    for record in matching_records(files, filters, skipped):
        if not record.enabled:
            disabled += 1
            continue
        bucket = buckets.setdefault(str(group_value(record, per)), _Bucket())  # a day, an hour
        bucket.sent_chars += record.prompt_chars
        bucket.full_chars += record.full_history_chars
        full = full_history_tokens(record)
        if full is None or record.prompt_tokens is None:
            without_tokens += 1
            continue
        with_tokens += 1
        bucket.sent_tokens += record.prompt_tokens
        bucket.full_tokens += full
    if not buckets:
        return "no data: no prompt records with compaction on match."
    in_tokens = with_tokens > 0
    unit = "input tokens" if in_tokens else "prompt characters"
    rows = {  # the labels sort as the times they name
        label: (b.sent_tokens, b.full_tokens) if in_tokens else (b.sent_chars, b.full_chars)
        for label, b in sorted(buckets.items())
    }
    most = max(full for _, full in rows.values())
    width = max(len(label) for label in rows)
    lines = [f"{unit} per {per}: sent (compaction on) against the full-history estimate"]
    for label, (sent, full) in rows.items():
        saved = f"  saved {100 * (1 - sent / full):.1f}%" if full > 0 else ""
        lines.append(f"{label:<{width}}  sent {_bar(sent, most)} {round(sent):>12,}")
        lines.append(f"{'':<{width}}  full {_bar(full, most)} {round(full):>12,}{saved}")
    if not in_tokens:
        lines.append("note: no server reported tokens for these prompts: shown in characters.")
    elif without_tokens:
        lines.append(
            f"note: {count_of(without_tokens, 'prompt')} without reported tokens not counted."
        )
    if disabled:
        lines.append(f"note: {count_of(disabled, 'prompt')} with compaction off not shown.")
    if skipped.lines:
        lines.append(f"note: {count_of(skipped.lines, 'skipped line')}.")
    return "\n".join(lines)
