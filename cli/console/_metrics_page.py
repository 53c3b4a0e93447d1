"""The metrics page: tokens, cost, latency and what compaction saved, per role and model, as
bars (``metrics --by role --by model``)."""

from __future__ import annotations

from collections.abc import Callable

from starlette.requests import Request
from starlette.responses import Response

from teams_runtime.cli.console._html import Html, bar, esc, page, table
from teams_runtime.cli.console._state import console_of
from teams_runtime.codecs.formats import JsonObject

__all__ = ["BY", "metrics_page"]

BY = ["role", "model"]


def _number(group: JsonObject, *path: str) -> float:
    value: object = group
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
    return float(value) if isinstance(value, int | float) else 0.0


# Each chart: its title, and a group's value and label.
_CHARTS: tuple[tuple[str, Callable[[JsonObject], float], str], ...] = (
    ("Prompt characters sent", lambda g: _number(g, "prompt_chars"), "{:,.0f}"),
    ("Full-history characters (compaction off)", lambda g: _number(g, "full_history_chars"),
     "{:,.0f}"),
    ("Saved by compaction (%)", lambda g: _number(g, "saving_percent"), "{:.1f} %"),
    ("Input tokens (where the server reported them)", lambda g: _number(g, "prompt_tokens"),
     "{:,.0f}"),
    ("Cost (USD, where priced)", lambda g: _number(g, "cost_usd"), "{:,.4f}"),
    ("Latency p50 (ms)", lambda g: _number(g, "latency_p50_ms"), "{:,.0f}"),
)  # fmt: skip


async def metrics_page(request: Request) -> Response:
    """``/metrics``: a chart per figure, a bar per (role, model) group."""
    console = console_of(request)
    report = await console.reads.metrics(BY)
    groups: list[JsonObject] = report["groups"]
    if report["no_data"]:
        body = Html('<p class="note">No prompt records yet: run the team, then look again.</p>')
        return page("Metrics", body, csrf=console.guard.csrf, here="/metrics")
    charts = []
    for title, value_of, shape in _CHARTS:
        values = [value_of(group) for group in groups]
        most = max(values, default=0.0)
        rows = [
            [f"{group.get('role')} · {group.get('model')}", bar(value, most, shape.format(value))]
            for group, value in zip(groups, values, strict=True)
        ]
        charts.append(f"<section><h2>{esc(title)}</h2>{table(['group', ''], rows)}</section>")
    return page("Metrics", Html("".join(charts)), csrf=console.guard.csrf, here="/metrics")
