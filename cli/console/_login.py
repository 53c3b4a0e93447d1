"""The console's login and logout: the token entered once on a page (a few tries a minute per
client), an HttpOnly cookie of a session from then on, back to the page asked for, and a
logout that closes it."""

from __future__ import annotations

import math

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from teams_runtime.cli.console._guard import COOKIE, checked_form, same_site_path
from teams_runtime.cli.console._html import Html, esc, page
from teams_runtime.cli.console._state import Console, console_of

__all__ = ["LOGIN_ROUTES"]


def _login_form(console: Console, said: str = "", wanted: str = "/", *, note: str = "") -> Html:
    refused = f'<p class="error" role="alert">{esc(said)}</p>' if said else ""
    noted = f'<p class="done" role="status">{esc(note)}</p>' if note else ""
    return Html(
        f'{noted}{refused}<form method="post" action="/login" class="answer">'
        f'<input type="hidden" name="csrf" value="{esc(console.guard.csrf)}">'
        f'<input type="hidden" name="next" value="{esc(same_site_path(wanted))}">'
        '<label>token <input type="password" name="token" autocomplete="current-password" '
        "required autofocus></label><button>Log in</button></form>"
    )


def _login_again(console: Console, said: str, status: int, wanted: str) -> Response:
    return page("Log in", _login_form(console, said, wanted), guard=console.guard, here="",
                signed_in=False, status=status)  # fmt: skip


async def _login_page(request: Request) -> Response:
    """``/login?next=PATH``: the token's form, then ``PATH`` (this console's only)."""
    console = console_of(request)
    wanted = request.query_params.get("next", "/")
    note = "Logged out." if "out" in request.query_params else ""
    if same_site_path(wanted).split("?")[0].endswith("/answer"):  # an answer sent logged out
        note = ("Your session had ended, so the answer was not sent and nothing was recorded. "
                "Log in: the form comes back with what you typed (kept in this tab).")  # fmt: skip
    form = _login_form(console, wanted=wanted, note=note)
    return page("Log in", form, guard=console.guard, here="", signed_in=False)


async def _login(request: Request) -> Response:
    """The token, entered once: an HttpOnly cookie from then on (the token is never in a URL,
    so never in an access log). Past a few wrong tokens a minute the client waits (429)."""
    console = console_of(request)
    form = await checked_form(request, console.guard)
    wanted = form.get("next", "/")
    client = request.client.host if request.client is not None else ""
    wait = console.guard.tries.waiting(client)
    if wait > 0:  # the right token waits too: its answer would tell a guess from the token
        seconds = math.ceil(wait)
        said = f"Too many tries to log in: try again in {seconds} s."
        refused = _login_again(console, said, 429, wanted)
        refused.headers["retry-after"] = str(seconds)
        return refused
    if not console.guard.token_ok(form.get("token", "")):
        console.guard.tries.count(client)  # only a wrong token counts, as a bearer's
        return _login_again(console, "That is not the console's token.", 401, wanted)
    done = RedirectResponse(same_site_path(wanted), 303)
    # Behind a TLS proxy (the form posted from an https origin) the cookie never goes out on
    # plain http: Secure. On loopback http it must, so it is not set there.
    secure = request.headers.get("origin", "").startswith("https://")
    done.set_cookie(
        COOKIE,
        console.guard.open_session(),
        httponly=True,
        samesite="strict",
        path="/",
        secure=secure,
    )
    return done


async def _logout(request: Request) -> Response:
    """Close this browser's session: its cookie opens nothing any more, here or anywhere it
    was copied to."""
    console = console_of(request)
    await checked_form(request, console.guard)
    console.guard.close_session(request.cookies.get(COOKIE))
    done = RedirectResponse("/login?out=1" if console.guard.token is not None else "/", 303)
    done.delete_cookie(COOKIE, path="/", httponly=True, samesite="strict")
    return done


LOGIN_ROUTES = [
    Route("/login", _login_page),
    Route("/login", _login, methods=["POST"]),
    Route("/logout", _logout, methods=["POST"]),
]
