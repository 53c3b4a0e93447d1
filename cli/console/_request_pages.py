"""The requests pages: the list (status, hops, last role; filtered), and one request: its
timeline, its result, and any role's prompt with the projection's receipt beside it."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from teams_runtime.cli.console._html import Html, esc, options, page, table
from teams_runtime.cli.console._reads import field_json, timeline
from teams_runtime.cli.console._state import console_of
from teams_runtime.codecs.formats import JsonObject, pretty_json
from teams_runtime.codecs.request_ids import check_request_id

__all__ = ["request_page", "requests_page"]


def _link(request_id: str) -> Html:
    return Html(f'<a href="/requests/{esc(request_id)}">{esc(request_id)}</a>')


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
    listing = table(
        ["request", "status", "last role", "hops", "events", "last event"],
        [[_link(row["request_id"]), row["status"], row.get("current_role", ""),
          row.get("hops", 0), row.get("events", 0), row.get("last_event_at", "")]
         for row in rows],
        empty="No request matches.",
    )  # fmt: skip
    return page("Requests", Html(filters + listing), csrf=console.guard.csrf, here="/requests")


def _receipt(explained: JsonObject, prompt: JsonObject | None) -> Html:
    counts = (
        f"{explained['total_events']} events: {explained['included_events']} included, "
        f"{explained['omitted_events']} omitted (recent_events={explained['recent_events']}, "
        f"max_events={explained['max_events']}, enabled={str(explained['enabled']).lower()})"
    )
    for key in ("max_prompt_tokens", "prompt_tokens_estimate"):
        if key in explained:
            counts += f"; {key}={explained[key]}"
    notice = (
        prompt["notice"] if prompt is not None and prompt["notice"] else "none: nothing omitted"
    )
    return Html(
        f'<div class="receipt"><h3>Receipt</h3><p>{esc(counts)}</p>'
        f"<p>Notice: {esc(notice)}</p></div>"
    )


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
    explained = await console.reads.explained(request_id, role)
    prompt = await console.reads.prompt(request_id, role)
    head = table(
        ["status", "last role", "hops", "events"],
        [[field_json(fields, "status"), last, field_json(fields, "hops"),
          explained["total_events"]]],
    )  # fmt: skip
    events = table(
        ["#", "time", "role", "type", "bytes", "tokens", "summary", "projection"],
        [[r.index, r.timestamp, r.role or "-", r.type, r.size,
          "-" if r.tokens is None else r.tokens, r.summary, r.decision]
         for r in timeline(fields, explained)],
        empty="No events.",
    )  # fmt: skip
    result = field_json(fields, "result")
    chooser = Html(
        '<form method="get" class="filters"><label>prompt of <select name="role">'
        f"{options([(name, name) for name in config.cast.names], role)}</select></label>"
        "<button>Show</button></form>"
    )
    body = Html(
        f"{head}<section><h2>Timeline</h2>{events}</section>"
        "<section><h2>Result</h2>"
        + (f"<pre>{esc(pretty_json(result))}</pre>" if result is not None else
           '<p class="note">No result yet.</p>')
        + f"</section><section><h2>Prompt</h2>{chooser}"
        f'<div class="prompt"><pre id="prompt">{esc(prompt["prompt"])}</pre>'
        f"{_receipt(explained, prompt)}</div></section>"
        f'<p><a href="/api/requests/{esc(request_id)}">the record as JSON</a></p>'
    )  # fmt: skip
    return page(f"Request {request_id}", body, csrf=console.guard.csrf, here="/requests")
