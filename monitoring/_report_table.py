"""The human table of a metrics report: a row per group, then the totals, then what
compaction saved and what a completed request took. Rounded for reading; ``--json`` is not.
A figure nothing reported reads ``-``; a sum over some of the calls says over how many."""

from __future__ import annotations

import msgspec

from teams_runtime.codecs.formats import count_of, printable
from teams_runtime.monitoring._call_groups import Figures
from teams_runtime.monitoring._estimates import estimates_lines
from teams_runtime.monitoring._metrics_report import CompletedFigures, GroupValue, MetricsReport

__all__ = ["render_report"]


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def _usd(value: float | None) -> str:
    return "-" if value is None else f"${value:,.4f}"


def _row(label: list[str], values: Figures, tokens: bool, cost: bool, cut: bool) -> list[str]:
    counts = (values.total_events, values.included_events, values.omitted_events)
    events = "/".join(f"{count:,}" for count in counts)
    usage = []
    if tokens and not values.prompts_with_usage:  # none of its calls said: not "0 tokens"
        usage = ["-", "-"]
    elif tokens:
        sent, cached, ratio = values.prompt_tokens, values.cached_prompt_tokens, values.cached_ratio
        usage = [
            "-" if sent is None else f"{sent:,}/{values.completion_tokens:,}",
            "-" if cached is None else f"{cached:,} ({ratio:.0%})",
        ]
    money = [_usd(values.cost_usd)] if cost else []
    return [
        *label,
        f"{values.prompts:,}",
        f"{values.eligible:,}",
        f"{values.compacted:,} ({values.compacted_percent:.0f}%)",
        events,
        f"{values.mean_prompt_chars:,.0f}",
        f"{values.p95_prompt_chars:,}",
        f"{values.saving_percent:.1f}%",
        *usage,
        *money,
        f"{_ms(values.latency_p50_ms)}/{_ms(values.latency_p95_ms)}/{_ms(values.latency_max_ms)}",
        f"{values.repairs}/{values.retries}/{values.failures}",
        *([f"{values.truncated:,}"] if cut else []),
    ]


def _label(value: GroupValue) -> str:
    """A group's value as a row label: the ``enabled`` flag reads enabled/disabled."""
    if isinstance(value, bool):
        return "enabled" if value else "disabled"
    return printable(str(value))  # a role or request id as a log line wrote it


def render_report(report: MetricsReport) -> str:
    """The human table: a row per group, then the totals (tokens columns when a model server
    reported usage, ``-`` in a group none of whose calls did; a line saying why there are none
    otherwise; a cost column when a rate card priced a call; a truncated column when a server
    stopped an answer at its token limit)."""
    totals = report.totals
    tokens = totals.prompts_with_usage > 0
    cost = totals.priced_calls > 0
    cut = totals.truncated > 0
    headers = [
        *report.by,
        "prompts",
        "eligible",
        "compacted",
        "events total/incl/omit",
        "mean chars",
        "p95 chars",
        "saving",
        *(["tokens in/out", "cached in"] if tokens else []),
        *(["cost"] if cost else []),
        "latency ms p50/p95/max",
        "repairs/retries/failed",
        *(["truncated"] if cut else []),
    ]
    rows = [
        _row([_label(group.values[key]) for key in report.by], group.figures, tokens, cost, cut)
        for group in report.groups
    ]
    rows.append(_row(["total", *[""] * (len(report.by) - 1)], totals, tokens, cost, cut))
    widths = [max(len(row[i]) for row in [headers, *rows]) for i in range(len(headers))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(headers, widths, strict=True))]
    for row in rows:
        lines.append("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)))
    lines.insert(-1, "")
    if tokens:
        lines += ["", _saved(totals, cost)]
        partial = _partial(totals, cost)
        if partial:
            lines.append(f"Partial sums: {partial}.")
    elif totals.prompts:
        lines += ["", _NO_USAGE]
    done = report.completed_requests
    if done.requests:
        lines.append(_per_request(done, cost))
    if report.by == ["enabled"]:
        lines += ["", _compare_enabled(report)]
    if not isinstance(report.estimates, msgspec.UnsetType):
        lines += estimates_lines(report.estimates)
    lines.append(f"\nskipped lines: {report.skipped_lines}")
    return "\n".join(line.rstrip() for line in lines)


def _shares(calls: int, counts: list[tuple[int, str]], *, none_too: bool) -> str:
    """``2 of 3 calls reported usage``, for each ``(count, what)`` of ``counts`` whose count is
    below ``calls`` (and above none unless ``none_too``); empty if none is."""
    parts = [
        f"{count:,} of {count_of(calls, 'call')} {what}"
        for count, what in counts
        if count < calls and (none_too or count > 0)
    ]
    return ", ".join(parts)


def _partial(values: Figures, cost: bool) -> str:
    """Which sums cover only some of the calls, and how many: empty when all are whole."""
    counts = [
        (values.prompts_with_usage, "reported usage"),
        (values.prompts_with_cached_tokens, "said what was cached"),
        *([(values.priced_calls, "priced")] if cost else []),
    ]
    return _shares(values.prompts, counts, none_too=False)


_NO_USAGE = (
    "No call reported token usage, so there are no tokens columns: the command and dry-run "
    "backends report none, nor does a server that leaves usage out of its stream "
    "(llama-cpp-python's)."
)


def _saved(totals: Figures, cost: bool) -> str:
    estimated, calls = totals.estimated_calls, totals.prompts
    over = (
        count_of(estimated, "call") if estimated == calls else f"{estimated:,} of {calls:,} calls"
    )
    full, saved_tokens = (
        totals.full_history_prompt_tokens_estimate,
        totals.saved_prompt_tokens_estimate,
    )
    if full is None or saved_tokens is None:
        return "Compaction saved: unknown (no call with usage has a prompt size to estimate from)."
    saved = (
        f"Compaction saved about {saved_tokens:,.0f} input tokens: "
        f"{full:,.0f} with full history (estimated "
        f"from each call's own tokens per character, {over})"
    )
    if cost and totals.full_history_cost_usd_estimate is not None:
        priced = totals.estimated_priced_calls
        saved += (
            f", {_usd(totals.saved_cost_usd_estimate)} of "
            f"{_usd(totals.full_history_cost_usd_estimate)}"
            + (f" (over the {priced:,} priced)" if priced < estimated else "")
        )
    return saved + "."


def _per_request(done: CompletedFigures, cost: bool) -> str:
    """What a completed request took on average, saying when some of its calls are missing."""
    tokens = done.mean_prompt_tokens
    figures = ["input tokens unknown" if tokens is None else f"{tokens:,.0f} input tokens"]
    if cost:
        figures.append("cost unknown" if done.mean_cost_usd is None else _usd(done.mean_cost_usd))
    counts = [
        (done.calls_with_usage, "reported usage"),
        *([(done.priced_calls, "priced")] if cost else []),
    ]
    partial = _shares(done.calls, counts, none_too=True)
    note = f" ({partial})" if partial else ""
    return f"Per completed request ({done.requests}): {', '.join(figures)}{note}."


def _compare_enabled(report: MetricsReport) -> str:
    per = {group.values["enabled"]: group.figures for group in report.groups}
    on, off = per.get(True), per.get(False)
    if on is None or off is None:
        return "Comparison: needs records from both an enabled and a disabled period."
    if not off.mean_prompt_chars:
        return "Comparison: the disabled period's prompts have no size to compare against."
    change = 1 - on.mean_prompt_chars / off.mean_prompt_chars
    return (
        f"Per prompt, compaction on: {on.mean_prompt_chars:,.0f} chars and "
        f"{on.mean_included_events:.1f} events; off: {off.mean_prompt_chars:,.0f} chars and "
        f"{off.mean_included_events:.1f} events ({change:.0%} smaller with compaction). "
        "Compare like with like: same request shapes, roles and model (docs/monitoring.md)."
    )
