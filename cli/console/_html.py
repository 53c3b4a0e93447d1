"""The console's HTML: every value escaped on its way in (``esc``), the page around a body,
tables and bars. Text from records, envelopes and prompts is only ever shown as text."""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence
from datetime import datetime

from starlette.responses import HTMLResponse

from teams_runtime.cli._status_report import age
from teams_runtime.cli.console._guard import Guard

__all__ = ["Html", "bar", "due_in", "esc", "options", "page", "table", "when"]

NAV = (("/", "Team"), ("/requests", "Requests"), ("/inbox", "Inbox"), ("/metrics", "Metrics"))


class Html(str):
    """Markup made here from escaped parts: put in a page as it is."""

    __slots__ = ()


def esc(value: object) -> Html:
    """``value`` as text in HTML (in an element or a quoted attribute)."""
    if isinstance(value, Html):
        return value
    return Html(html.escape("" if value is None else str(value), quote=True))


def table(headers: Sequence[str], rows: Iterable[Sequence[object]], *, empty: str = "") -> Html:
    """A table of ``rows`` (cells escaped unless ``Html``), or ``empty`` as a note if none."""
    body = [
        Html("<tr>" + "".join(f"<td>{esc(cell)}</td>" for cell in row) + "</tr>") for row in rows
    ]
    if not body:
        return Html(f'<p class="note">{esc(empty)}</p>') if empty else Html("")
    head = "".join(f"<th>{esc(name)}</th>" for name in headers)
    return Html(f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>")


def options(values: Iterable[tuple[str, str]], chosen: str) -> Html:
    """``<option>``s of (value, label) pairs, ``chosen`` selected."""
    return Html(
        "".join(
            f'<option value="{esc(value)}"{" selected" if value == chosen else ""}>'
            f"{esc(label)}</option>"
            for value, label in values
        )
    )


def when(iso: object, now: float, past: str = "{} ago") -> Html:
    """A time as the commands say it, relative (``3m05s ago``, or ``past`` around the span;
    ``in 7h59m`` ahead), the time itself in its title; ``-`` when there is none."""
    if not isinstance(iso, str) or not iso:
        return Html("-")
    try:
        moment = datetime.fromisoformat(iso).timestamp()
    except ValueError:
        return esc(iso)
    said = past.format(age(now - moment)) if moment <= now else f"in {age(moment - now)}"
    return Html(f'<time datetime="{esc(iso)}" title="{esc(iso)}">{esc(said)}</time>')


def due_in(iso: object, now: float) -> Html:
    """When an answer is due, as ``inbox`` says it: ``in 7h59m``, ``overdue`` or ``-``."""
    if not isinstance(iso, str) or not iso:
        return Html("-")
    if datetime.fromisoformat(iso).timestamp() <= now:
        return Html(f'<time datetime="{esc(iso)}" title="{esc(iso)}" class="overdue">'
                    "overdue</time>")  # fmt: skip
    return when(iso, now)


def bar(value: float, most: float, label: str) -> Html:
    """A bar, ``value`` against ``most``, with its label (a ``<meter>``: no inline style, which
    the page's Content-Security-Policy refuses)."""
    return Html(
        f'<div class="bar"><meter min="0" max="{max(most, 0.0):g}" value="{max(value, 0.0):g}">'
        f"</meter> <em>{esc(label)}</em></div>"
    )


def page(
    title: str,
    body: Html,
    *,
    guard: Guard,
    here: str,
    status: int = 200,
    signed_in: bool = True,
) -> HTMLResponse:
    """A whole page: the navigation, ``title`` and ``body`` (``here``: its nav entry); behind
    a login, a logout button for one ``signed_in``."""
    nav = "".join(
        f'<a href="{href}"{" class=here" if href == here else ""}>{esc(name)}</a>'
        for href, name in NAV
    )
    if guard.token is not None and signed_in:
        nav += (
            '<form method="post" action="/logout" class="logout">'
            f'<input type="hidden" name="csrf" value="{esc(guard.csrf)}">'
            "<button>Log out</button></form>"
        )
    csrf = guard.csrf
    document = (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        f"<title>{esc(title)} · teams-runtime</title>"
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<meta name="csrf" content="{esc(csrf)}">'
        '<link rel="icon" href="/favicon.ico" type="image/svg+xml">'
        '<link rel="stylesheet" href="/static/console.css">'
        '<script src="/static/console.js" defer></script></head>'
        f"<body><header><strong>teams-runtime</strong><nav>{nav}</nav></header>"
        f"<main><h1>{esc(title)}</h1>{body}</main></body></html>"
    )
    return HTMLResponse(document, status_code=status)
