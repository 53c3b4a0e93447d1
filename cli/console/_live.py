"""The console's live pages: a fragment redrawn through server-sent events each time it
changes (the team at ``/events/team``, the inbox at ``/events/inbox``), and the note that says
when a page was drawn. The page's script swaps the fragment in, and says so when the console
logged it out (a restart, or a logout in another tab: the stream then ends) or stopped
answering."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable

import anyio
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from teams_runtime.cli.console._guard import COOKIE
from teams_runtime.cli.console._html import Html, esc
from teams_runtime.cli.console._state import Console, console_of
from teams_runtime.codecs.formats import iso_of

__all__ = ["drawn_note", "live_attributes", "live_events"]


def live_attributes(name: str) -> Html:
    """The attributes of the element the script redraws from ``/events/<name>``."""
    return Html(f'data-live="/events/{esc(name)}" data-event="{esc(name)}"')


def drawn_note(*, live: bool = True) -> Html:
    """When the page was drawn, and a link that draws it again (on a live page the script
    updates the time with each event; a page that is not live says only when it was drawn,
    so its reader knows how old it is)."""
    now = iso_of(time.time())
    redrawn = ", redrawn live as it changes" if live else ""
    return Html(
        f'<p class="note" data-drawn>Drawn at <time datetime="{esc(now)}">{esc(now)}</time>'
        f'{redrawn} · <a href="">refresh</a></p>'
    )


def _event(name: str, fragment: str) -> str:
    data = "".join(f"data: {line}\n" for line in fragment.splitlines() or [""])
    return f"event: {name}\n{data}\n"


def live_events(
    request: Request, name: str, fragment_of: Callable[[Console], Awaitable[Html]]
) -> Response:
    """``/events/<name>``: ``fragment_of``'s each time it changes (checked every interval),
    as server-sent events; a comment line otherwise, so a gone browser is noticed. The
    session is checked before each send: logged out (in another tab, say), the stream ends,
    and the page says it is no longer updated."""
    console = console_of(request)
    cookie = request.cookies.get(COOKIE)

    async def stream() -> AsyncIterator[str]:
        shown = None
        while console.guard.signed_in(cookie):
            fragment = await fragment_of(console)
            yield _event(name, fragment) if fragment != shown else ": unchanged\n\n"
            shown = fragment
            await anyio.sleep(console.interval)

    return StreamingResponse(stream(), media_type="text/event-stream")
