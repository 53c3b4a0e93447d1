"""The metrics page: tokens, cost, latency and what compaction saved, per role and model, as
bars (``metrics --by role --by model``)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from teams_runtime.cli.console._html import Html, bar, esc, page, table
from teams_runtime.cli.console._state import console_of
from teams_runtime.codecs.formats import JsonObject

__all__ = ["BY", "metrics_page"]

BY = ["role", "model"]


def _number(group: JsonObject, *path: str) -> float | None:
    """A figure of ``group``: ``None`` where the report says ``null`` (unknown, not zero:
    no server reported tokens, no rate card priced the calls; docs/monitoring.md)."""
    value: object = group
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
    return float(value) if isinstance(value, int | float) else None


# Each chart: its title, a group's value and its label's shape, and the charts it shares a
# scale with (sent and full-history characters are drawn against each other).
_CHARTS: tuple[tuple[str, str, str, str], ...] = (
    ("Prompt characters sent", "prompt_chars", "{:,.0f}", "chars"),
    ("Full-history characters (compaction off)", "full_history_chars", "{:,.0f}", "chars"),
    ("Saved by compaction (%)", "saving_percent", "{:.1f} %", ""),
    ("Input tokens (where the server reported them)", "prompt_tokens", "{:,.0f}", ""),
    ("Cost (USD, where priced)", "cost_usd", "{:,.4f}", ""),
    ("Latency p50 (ms)", "latency_p50_ms", "{:,.0f}", ""),
)


def _most(groups: list[JsonObject], key: str, scale: str) -> float:
    """The longest bar's value: of this chart, or of every chart on its ``scale``."""
    keys = [other for _, other, _, on in _CHARTS if on == scale] if scale else [key]
    values = [_number(group, other) for group in groups for other in keys]
    return max((value for value in values if value is not None), default=0.0)


def _chart(groups: list[JsonObject], title: str, key: str, shape: str, scale: str) -> Html:
    most = _most(groups, key, scale)
    rows = []
    for group in groups:
        value = _number(group, key)
        shown = (bar(value, most, shape.format(value)) if value is not None else
                 Html('<em class="note">unknown</em>'))  # fmt: skip
        rows.append([f"{group.get('role')} · {group.get('model')}", shown])
    note = (' <small class="note">(on one scale with the other characters chart)</small>'
            if scale else "")  # fmt: skip
    return Html(f"<section><h2>{esc(title)}{note}</h2>{table(['group', ''], rows)}</section>")


async def metrics_page(request: Request) -> Response:
    """``/metrics``: a chart per figure, a bar per (role, model) group ("unknown" where the
    report says ``null``, as ``metrics`` leaves those columns out)."""
    console = console_of(request)
    report = await console.reads.metrics(BY)
    groups: list[JsonObject] = report["groups"]
    if report["no_data"]:
        body = Html('<p class="note">No prompt records yet: run the team, then look again.</p>')
        return page("Metrics", body, guard=console.guard, here="/metrics")
    charts = [_chart(groups, *chart) for chart in _CHARTS]
    return page("Metrics", Html("".join(charts)), guard=console.guard, here="/metrics")
