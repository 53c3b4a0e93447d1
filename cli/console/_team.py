"""The team page: each role with its model and server, the envelopes that wait, are claimed
or deferred, the workers, the answers waiting; redrawn live through server-sent events (the
``status --watch`` of a browser)."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import AsyncIterator

import anyio
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from teams_runtime.cli._status import hint_lines, stray_lines
from teams_runtime.cli.console._html import Html, esc, page, table
from teams_runtime.cli.console._state import Console, console_of
from teams_runtime.codecs.config import TeamConfig
from teams_runtime.codecs.formats import JsonObject, count_of

__all__ = ["team_events", "team_fragment", "team_page"]


def _model_of(config: TeamConfig, role: str) -> str:
    model = config.model_for(role)
    if model.backend == "openai" and model.openai is not None:
        return f"openai: {model.openai.model} at {model.openai.base_url}"
    if model.backend == "command" and model.command:
        return f"command: {os.path.basename(model.command[0])}"
    if model.backend == "human":
        return "human: a person answers (inbox)"
    return model.backend


def team_fragment(report: JsonObject, config: TeamConfig) -> Html:
    """The team's state in ``report`` (``status --json``) as the page shows it."""
    away = {role: s for s in report["model_servers_away"] for role in s["roles"]}
    roles = table(
        ["role", "model", "server", "waiting", "claimed", "deferred"],
        [
            [role, _model_of(config, role),
             f"away since {away[role]['away_since']}" if role in away else "up",
             counts["waiting"], counts["claimed"], counts["deferred"]]
            for role, counts in report["roles"].items()
        ],
    )  # fmt: skip
    statuses = Counter(row["status"] for row in report["requests"])
    summary = ", ".join(f"{count} {status}" for status, count in sorted(statuses.items()))
    waiting = table(
        ["request", "role", "from", "since", "due"],
        [
            [Html(f'<a href="/inbox/{esc(w["request_id"])}?role={esc(w["role"])}">'
                  f'{esc(w["request_id"])}</a>'),
             w["role"], w["from_role"], w["since"],
             ("overdue " if w["overdue"] else "") + (w["due_at"] or "-")]
            for w in report["waiting_answers"]
        ],
        empty="No answer waits for a person.",
    )  # fmt: skip
    deferred = table(
        ["role", "request", "deferrals", "next attempt"],
        [[d["role"], d["request_id"], d["deferrals"], d["next_attempt_at"]]
         for d in report["deferred"]],
        empty="Nothing deferred.",
    )  # fmt: skip
    workers = table(
        ["worker", "state", "holds"],
        [[w["worker"], "alive" if w["alive"] else "lease expired", ", ".join(w["holds"]) or "-"]
         for w in report["workers"]],
        empty="No worker is running (`teams-runtime run`).",
    )  # fmt: skip
    notes = hint_lines(report, report["max_hops"]) + stray_lines(report["strays"])
    return Html(
        f"<section><h2>Roles</h2>{roles}</section>"
        f'<p class="note">{esc(count_of(len(report["requests"]), "request"))}: '
        f"{esc(summary or 'none')}</p>"
        f"<section><h2>Waiting for a person</h2>{waiting}</section>"
        f"<section><h2>Deferred</h2>{deferred}</section>"
        f"<section><h2>Workers</h2>{workers}</section>"
        + "".join(f'<p class="hint">{esc(line)}</p>' for line in notes)
    )


async def _fragment(console: Console) -> Html:
    return team_fragment(await console.reads.status(), console.reads.config())


async def team_page(request: Request) -> Response:
    """``/``: the team now; the page's script then follows ``/events/team``."""
    console = console_of(request)
    body = Html(f'<div id="team" data-live="/events/team">{await _fragment(console)}</div>')
    return page("Team", body, csrf=console.guard.csrf, here="/")


def _event(fragment: str) -> str:
    data = "".join(f"data: {line}\n" for line in fragment.splitlines() or [""])
    return f"event: team\n{data}\n"


async def team_events(request: Request) -> Response:
    """``/events/team``: the team's fragment each time it changes (checked every interval),
    as server-sent events; a comment line otherwise, so a gone browser is noticed."""
    console = console_of(request)

    async def stream() -> AsyncIterator[str]:
        shown = None
        while True:
            fragment = await _fragment(console)
            yield _event(fragment) if fragment != shown else ": unchanged\n\n"
            shown = fragment
            await anyio.sleep(console.interval)

    return StreamingResponse(stream(), media_type="text/event-stream")
