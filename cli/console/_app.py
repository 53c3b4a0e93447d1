"""The console's ASGI app: its routes, the login, the guard around them, and what an error
becomes (a refusal's message, as the command line says it: 400, or 404 for no such request)."""

from __future__ import annotations

from importlib import resources

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from teams_runtime.cli.console._api import API_ROUTES
from teams_runtime.cli.console._guard import COOKIE, Guard, GuardMiddleware, checked_form
from teams_runtime.cli.console._html import Html, esc, page
from teams_runtime.cli.console._inbox_pages import answer_post, inbox_page, waiting_page
from teams_runtime.cli.console._metrics_page import metrics_page
from teams_runtime.cli.console._reads import Reads
from teams_runtime.cli.console._request_pages import request_page, requests_page
from teams_runtime.cli.console._state import Console, console_of
from teams_runtime.cli.console._team import team_events, team_page
from teams_runtime.exceptions import TeamsRuntimeError, UnknownRequestError
from teams_runtime.storage import Workspace

__all__ = ["console_app"]


def _login_form(console: Console, said: str = "") -> Html:
    refused = f'<p class="error" role="alert">{esc(said)}</p>' if said else ""
    return Html(
        f'{refused}<form method="post" action="/login" class="answer">'
        f'<input type="hidden" name="csrf" value="{esc(console.guard.csrf)}">'
        '<label>token <input type="password" name="token" autocomplete="current-password" '
        "required autofocus></label><button>Log in</button></form>"
    )


async def _login_page(request: Request) -> Response:
    console = console_of(request)
    return page("Log in", _login_form(console), csrf=console.guard.csrf, here="")


async def _login(request: Request) -> Response:
    """The token, entered once: an HttpOnly cookie from then on (the token is never in a URL,
    so never in an access log)."""
    console = console_of(request)
    form = await checked_form(request, console.guard)
    if not console.guard.token_ok(form.get("token", "")):
        said = "That is not the console's token."
        return page("Log in", _login_form(console, said), csrf=console.guard.csrf, here="",
                    status=401)  # fmt: skip
    done = RedirectResponse("/", 303)
    done.set_cookie(COOKIE, console.guard.session, httponly=True, samesite="strict", path="/")
    return done


def _wants_json(request: Request) -> bool:
    return request.url.path.startswith(("/api/", "/events/"))


async def _refused(request: Request, exc: Exception) -> Response:
    """A refusal of ours (a bad id or role, no such request): its message, as the CLI's."""
    code = 404 if isinstance(exc, UnknownRequestError) else 400
    if _wants_json(request):
        return JSONResponse({"error": str(exc)}, code)
    body = Html(f'<p class="error" role="alert">{esc(exc)}</p>')
    return page("Refused", body, csrf=console_of(request).guard.csrf, here="", status=code)


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    if _wants_json(request):
        return JSONResponse({"error": exc.detail}, exc.status_code)
    body = f'<!doctype html><meta charset="utf-8"><p role="alert">{esc(exc.detail)}</p>'
    return HTMLResponse(body, exc.status_code)


def console_app(
    workspace: Workspace, *, host: str, token: str | None, interval: float = 2.0
) -> Starlette:
    """The console of ``workspace``, answering to ``host`` (the Host header checked), behind
    a login when ``token`` is given; the team page redrawn every ``interval`` seconds."""
    guard = Guard(host=host, token=token)
    static = resources.files("teams_runtime.cli.console") / "static"
    app = Starlette(
        routes=[
            Route("/", team_page),
            Route("/events/team", team_events),
            Route("/requests", requests_page),
            Route("/requests/{request_id}", request_page),
            Route("/inbox", inbox_page),
            Route("/inbox/{request_id}", waiting_page),
            Route("/inbox/{request_id}/answer", answer_post, methods=["POST"]),
            Route("/metrics", metrics_page),
            Route("/login", _login_page),
            Route("/login", _login, methods=["POST"]),
            *API_ROUTES,
            Mount("/static", StaticFiles(directory=str(static)), name="static"),
        ],
        middleware=[Middleware(GuardMiddleware, guard=guard)],
        exception_handlers={TeamsRuntimeError: _refused, HTTPException: _http_error},
    )
    app.state.console = Console(reads=Reads(workspace), guard=guard, interval=interval)
    return app
