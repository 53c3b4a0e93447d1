"""The requests pages: the list (status, hops, last role; filtered), and one request: its
timeline, its model calls (tokens where known, from the prompt log), its result, and any
role's prompt with the projection's receipt beside it."""

from __future__ import annotations

import time

from starlette.requests import Request
from starlette.responses import Response

from teams_runtime.cli._output import UserError
from teams_runtime.cli.console._html import Html, esc, options, page, table, when
from teams_runtime.cli.console._live import drawn_note
from teams_runtime.cli.console._reads import field_json, timeline
from teams_runtime.cli.console._state import Console, console_of
from teams_runtime.codecs.formats import JsonObject, pretty_json
from teams_runtime.codecs.prompt_records import PromptRecord
from teams_runtime.codecs.request_ids import check_request_id

__all__ = ["request_page", "requests_page"]

SUMMARY_SHOWN = 240  # a timeline's summary, clipped past this many characters
SCOPE_SHOWN = 80  # a scope in the requests' list, clipped past this many characters
GOING = ("queued", "in_progress")  # a request whose result is its latest, not its last


def _link(request_id: str) -> Html:
    return Html(f'<a href="/requests/{esc(request_id)}">{esc(request_id)}</a>')


def _scope_cell(scope: str) -> Html:
    """A request's scope in the list: clipped past ``SCOPE_SHOWN`` characters, whole in its
    tooltip."""
    if len(scope) <= SCOPE_SHOWN:
        return esc(scope)
    return Html(f'<span title="{esc(scope)}">{esc(scope[:SCOPE_SHOWN])}…</span>')


async def requests_page(request: Request) -> Response:
    """``/requests?status=S&role=R&q=TEXT``: the requests, filtered."""
    console = console_of(request)
    report = await console.reads.status()
    status, role, text = (request.query_params.get(key, "") for key in ("status", "role", "q"))
    rows = [
        row
        for row in report["requests"]
        if (not status or row["status"] == status)
        and (not role or row.get("current_role") == role)
        and text.lower() in row["request_id"].lower()
    ]
    statuses = sorted({row["status"] for row in report["requests"]})
    filters = Html(
        '<form method="get" class="filters">'
        f'<label>status <select name="status">{options([("", "any")] + [(s, s) for s in statuses], status)}</select></label>'  # noqa: E501
        f'<label>last role <select name="role">{options([("", "any")] + [(r, r) for r in report["roles"]], role)}</select></label>'  # noqa: E501
        f'<label>id has <input name="q" value="{esc(text)}"></label>'
        "<button>Filter</button></form>"
    )
    now = time.time()
    scopes = await console.reads.scopes([row["request_id"] for row in rows])
    listing = table(
        ["request", "scope", "status", "last role", "hops", "events", "last event"],
        [[_link(row["request_id"]), _scope_cell(scopes.get(row["request_id"], "")),
          row["status"], row.get("current_role", ""), row.get("hops", 0), row.get("events", 0),
          when(row.get("last_event_at"), now)]
         for row in rows],
        empty="No request matches.",
    )  # fmt: skip
    body = Html(filters + listing + drawn_note(live=False))
    return page("Requests", body, guard=console.guard, here="/requests")


def _receipt(explained: JsonObject, prompt: JsonObject | None) -> Html:
    counts = (
        f"{explained['total_events']} events: {explained['included_events']} included, "
        f"{explained['omitted_events']} omitted (recent_events={explained['recent_events']}, "
        f"max_events={explained['max_events']}, enabled={str(explained['enabled']).lower()})"
    )
    for key in ("max_prompt_tokens", "prompt_tokens_estimate"):
        if key in explained:
            counts += f"; {key}={explained[key]}"
    notice = prompt["notice"] if prompt is not None else None
    # The notice is an object (``prompt --json``'s): shown as that JSON, not as Python's repr.
    shown = f"<pre>{esc(pretty_json(notice))}</pre>" if notice else "<p>none: nothing omitted</p>"
    return Html(
        f'<div class="receipt"><h3>Receipt</h3><p>{esc(counts)}</p><p>Notice:</p>{shown}</div>'
    )


def _calls(records: list[PromptRecord]) -> Html:
    """The request's model calls from the prompt log: the tokens where the server reported
    them ("-" where it did not: a command, the dry run, a failed call)."""

    def known(value: float | None, shape: str = "{:,}") -> str:
        return "-" if value is None else shape.format(value)

    now = time.time()

    return table(
        ["time", "role", "purpose", "attempt", "outcome", "prompt chars", "input tokens",
         "output tokens", "latency", "cost"],
        [[when(r.timestamp, now), r.role, r.purpose, r.attempt_kind or "-", r.outcome or "-",
          f"{r.prompt_chars:,}", known(r.prompt_tokens), known(r.completion_tokens),
          known(r.latency_ms, "{:,.0f} ms"), known(r.cost_usd, "${:,.4f}")]
         for r in records],
        empty="No model call in the prompt log for this request.",
    )  # fmt: skip


def _clip(summary: str, request_id: str) -> Html:
    """A timeline's summary, clipped past ``SUMMARY_SHOWN`` characters: the record has it
    whole (a link to it)."""
    if len(summary) <= SUMMARY_SHOWN:
        return esc(summary)
    return Html(
        f'{esc(summary[:SUMMARY_SHOWN])}… <a class="clipped" href="/api/requests/'
        f'{esc(request_id)}">({len(summary):,} characters: the record has it whole)</a>'
    )


def _result(fields: JsonObject) -> Html:
    """The request's result: its last one while it runs (whose it is), the final one once
    it ended."""
    result = field_json(fields, "result")
    status = field_json(fields, "status")
    heading = "Result"
    if status in GOING and isinstance(result, dict):
        heading = f"Latest result ({result.get('role') or 'no role'})"
    shown = (f"<pre>{esc(pretty_json(result))}</pre>" if result is not None else
             '<p class="note">No result yet.</p>')  # fmt: skip
    return Html(f"<section><h2>{esc(heading)}</h2>{shown}</section>")


async def _prompt_section(console: Console, request_id: str, role: str, names: list[str]) -> Html:
    """The prompt ``role`` gets, with the receipt; a role the team lacks is refused here
    alone (the rest of the page still shows), naming the team's roles."""
    chooser = Html(
        f'<form method="get" action="/requests/{esc(request_id)}#prompt-of" class="filters">'
        f'<label>prompt of <select name="role">'
        f"{options([(name, name) for name in names], role)}</select></label>"
        "<button>Show</button></form>"
    )
    try:
        explained = await console.reads.explained(request_id, role)
        prompt = await console.reads.prompt(request_id, role)
    except UserError as exc:
        shown = Html(f'<p class="error" role="alert">{esc(exc)}</p>')  # it names the roles
    else:
        shown = Html(f'<div class="prompt"><pre id="prompt">{esc(prompt["prompt"])}</pre>'
                     f"{_receipt(explained, prompt)}</div>")  # fmt: skip
    return Html(f'<section id="prompt-of"><h2>Prompt</h2>{chooser}{shown}</section>')


async def request_page(request: Request) -> Response:
    """``/requests/ID?role=R``: one request; the prompt shown is ``R``'s (default: its last
    role's, or the team's first)."""
    console = console_of(request)
    request_id = check_request_id(request.path_params["request_id"])
    fields = await console.reads.fields(request_id)
    config = console.reads.config()
    last = field_json(fields, "current_role")
    default = last if isinstance(last, str) and last in config.cast.roles else config.cast.names[0]
    role = request.query_params.get("role") or default
    explained = await console.reads.explained(request_id)
    now = time.time()
    head = table(
        ["status", "last role", "hops", "events"],
        [[field_json(fields, "status"), last, field_json(fields, "hops"),
          explained["total_events"]]],
    )  # fmt: skip
    events = table(
        ["#", "time", "role", "type", "bytes", "tokens", "summary", "projection"],
        [[r.index, when(r.timestamp, now), r.role or "-", r.type, r.size,
          "-" if r.tokens is None else r.tokens, _clip(r.summary, request_id), r.decision]
         for r in timeline(fields, await _decided(console, request_id, role, explained))],
        empty="No events.",
    )  # fmt: skip
    calls = _calls(await console.reads.calls(request_id))
    prompt = await _prompt_section(console, request_id, role, list(config.cast.names))
    scope = field_json(fields, "scope")
    flash = console.flashed(request.query_params.get("answered"))
    said = (f'<p class="done" role="status" data-answered="{esc(flash.envelope_id)}">'
            f"{esc(flash.text)}</p>" if flash else "")  # fmt: skip
    body = Html(
        f'{said}<p class="scope">{esc(scope if isinstance(scope, str) else "")}</p>'
        f"{head}<section><h2>Timeline</h2>{events}</section>"
        f"<section><h2>Model calls</h2>{calls}</section>{_result(fields)}{prompt}"
        f'<p><a href="/api/requests/{esc(request_id)}">the record as JSON</a></p>'
        f"{drawn_note(live=False)}"
    )
    return page(f"Request {request_id}", body, guard=console.guard, here="/requests")


async def _decided(console: Console, request_id: str, role: str, plain: JsonObject) -> JsonObject:
    """``explain``'s decisions for ``role``'s prompt (the timeline's projection column), or
    the request's own without a role when the team has none of that name."""
    try:
        return await console.reads.explained(request_id, role)
    except UserError:
        return plain
