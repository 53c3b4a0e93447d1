"""The team page: each role with its model and server, the envelopes that wait, are claimed
or deferred, the workers, the answers waiting; redrawn live through server-sent events (the
``status --watch`` of a browser)."""

from __future__ import annotations

import os
import time
from collections import Counter

from starlette.requests import Request
from starlette.responses import Response

from teams_runtime.cli._status import hint_lines, stray_lines
from teams_runtime.cli.console._html import Html, due_in, esc, page, table, when
from teams_runtime.cli.console._live import drawn_note, live_attributes, live_events
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
    now = time.time()

    def server(role: str) -> object:
        if role in away:
            return Html(f"away since {when(away[role]['away_since'], now, '{}')}")
        # Only the openai backend has a model server: a command, the dry run, a person: none.
        return "up" if config.model_for(role).backend == "openai" else "-"

    roles = table(
        ["role", "model", "server", "waiting", "claimed", "deferred"],
        [
            [role, _model_of(config, role), server(role),
             counts["waiting"], counts["claimed"], counts["deferred"]]
            for role, counts in report["roles"].items()
        ],
    )  # fmt: skip
    statuses = Counter(row["status"] for row in report["requests"])
    summary = ", ".join(f"{count} {status}" for status, count in sorted(statuses.items()))
    waiting = table(
        ["request", "role", "from", "waiting", "due"],
        [
            [Html(f'<a href="/inbox/{esc(w["request_id"])}?role={esc(w["role"])}">'
                  f'{esc(w["request_id"])}</a>'),
             w["role"], w["from_role"], when(w["since"], now, "{}"), due_in(w["due_at"], now)]
            for w in report["waiting_answers"]
        ],
        empty="No answer waits for a person.",
    )  # fmt: skip
    deferred = table(
        ["role", "request", "deferrals", "next attempt"],
        [[d["role"], d["request_id"], d["deferrals"], when(d["next_attempt_at"], now)]
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
    fragment = await _fragment(console)
    body = Html(f'<div id="team" {live_attributes("team")}>{fragment}</div>{drawn_note()}')
    return page("Team", body, guard=console.guard, here="/")


async def team_events(request: Request) -> Response:
    """``/events/team``: the team's fragment each time it changes (``status --watch``)."""
    return live_events(request, "team", _fragment)
