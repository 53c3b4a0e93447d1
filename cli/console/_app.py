"""The console's ASGI app: its routes, the login, the guard around them, and what an error
becomes (a refusal's message, as the command line says it: 400, or 404 for no such request
or nothing waiting under an id)."""

from __future__ import annotations

from collections.abc import Sequence
from importlib import resources

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from teams_runtime.cli.console._api import API_ROUTES
from teams_runtime.cli.console._guard import Guard, GuardMiddleware
from teams_runtime.cli.console._html import Html, esc, page
from teams_runtime.cli.console._inbox_pages import (
    answer_post,
    inbox_events,
    inbox_page,
    tidy_post,
    waiting_page,
)
from teams_runtime.cli.console._login import LOGIN_ROUTES
from teams_runtime.cli.console._metrics_page import metrics_page
from teams_runtime.cli.console._reads import Reads
from teams_runtime.cli.console._request_pages import request_page, requests_page
from teams_runtime.cli.console._state import Console, console_of
from teams_runtime.cli.console._team import team_events, team_page
from teams_runtime.codecs.request_ids import check_request_id
from teams_runtime.exceptions import TeamsRuntimeError, UnknownRequestError
from teams_runtime.storage import Workspace

__all__ = ["console_app"]


def _wants_json(request: Request) -> bool:
    return request.url.path.startswith(("/api/", "/events/"))


async def _refused(request: Request, exc: Exception) -> Response:
    """A refusal of ours (a bad id or role, no such request): its message, as the CLI's."""
    code = 404 if isinstance(exc, UnknownRequestError) else 400
    if _wants_json(request):
        return JSONResponse({"error": str(exc)}, code)
    body = Html(f'<p class="error" role="alert">{esc(exc)}</p>')
    title = "Not found" if code == 404 else "Refused"
    return page(title, body, guard=console_of(request).guard, here="", status=code)


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    if _wants_json(request):
        return JSONResponse({"error": exc.detail}, exc.status_code, headers=exc.headers)
    titles = {403: "Refused", 404: "Not found", 405: "Not allowed", 413: "Too long"}
    body = Html(f'<p class="error" role="alert">{esc(exc.detail)}</p>')
    title = titles.get(exc.status_code, "Refused")
    return page(title, body, guard=console_of(request).guard, here="", status=exc.status_code)


async def _to_the_form(request: Request) -> Response:
    """``GET /inbox/ID/answer`` (a refused answer's page, reloaded or bookmarked): the form."""
    query = request.url.query
    target = f"/inbox/{check_request_id(request.path_params['request_id'])}"
    return RedirectResponse(target + (f"?{query}" if query else ""), 303)


async def _favicon(request: Request) -> Response:
    """The tab's icon (the console's own, so a browser's ask for it is no 404)."""
    icon = resources.files("teams_runtime.cli.console") / "static" / "favicon.svg"
    return Response(icon.read_bytes(), media_type="image/svg+xml")


def console_app(
    workspace: Workspace,
    *,
    host: str,
    token: str | None,
    public_urls: Sequence[str] = (),
    interval: float = 2.0,
) -> Starlette:
    """The console of ``workspace``, answering to ``host`` and the ``public_urls`` (the Host
    and Origin headers checked), behind a login when ``token`` is given; the live pages
    redrawn every ``interval`` seconds."""
    guard = Guard(host=host, token=token, public_urls=tuple(public_urls))
    static = resources.files("teams_runtime.cli.console") / "static"
    app = Starlette(
        routes=[
            Route("/", team_page),
            Route("/events/team", team_events),
            Route("/events/inbox", inbox_events),
            Route("/requests", requests_page),
            Route("/requests/{request_id}", request_page),
            Route("/inbox", inbox_page),
            Route("/inbox", tidy_post, methods=["POST"]),
            Route("/inbox/{request_id}", waiting_page),
            Route("/inbox/{request_id}/answer", answer_post, methods=["POST"]),
            Route("/inbox/{request_id}/answer", _to_the_form),
            Route("/metrics", metrics_page),
            Route("/favicon.ico", _favicon),
            *LOGIN_ROUTES,
            *API_ROUTES,
            Mount("/static", StaticFiles(directory=str(static)), name="static"),
        ],
        middleware=[Middleware(GuardMiddleware, guard=guard)],
        exception_handlers={TeamsRuntimeError: _refused, HTTPException: _http_error},
    )
    app.state.console = Console(reads=Reads(workspace), guard=guard, interval=interval)
    return app
