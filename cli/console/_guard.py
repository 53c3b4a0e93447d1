"""The console's guard: the Host header checked, the login (a token entered once, then an
HttpOnly cookie of a session, until logout; a few tries a minute per client), the CSRF check
of every POST, and the headers that keep a page to itself."""

from __future__ import annotations

import hmac
import math
import secrets
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import parse_qs, urlencode, urlsplit

from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = [
    "COOKIE",
    "FORM_BYTES",
    "WILDCARDS",
    "Guard",
    "GuardMiddleware",
    "LoginTries",
    "checked_form",
    "login_url",
    "same_site_path",
]

COOKIE = "teams_runtime_console"
BEARER = "teams_runtime_bearer"  # the request's state: its token came as a bearer
LOG_IN_FIRST = (
    "log in first: the console asks for its token (a script: send it as `Authorization: Bearer "
    "TOKEN`)"
)
# The most a form may send: an answer's whole result (as `answer --from`) and its fields.
FORM_BYTES = 1_048_576 + 65_536
OPEN_PATHS = ("/login", "/static/", "/favicon.ico")  # what is served before the login
LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "::1"})
WILDCARDS = frozenset({"0.0.0.0", "::"})  # every address: only --public-url names a host
# Scripts and styles from the console only: a `<script>` that slipped through the escaping
# would not run either.
HEADERS = {
    "content-security-policy": "default-src 'self'; frame-ancestors 'none'; form-action 'self'",
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    # Not `no-referrer`: under it a browser's form POST says `Origin: null`, which the CSRF
    # check refuses. `same-origin` sends nothing to other sites, and the Origin to this one.
    "referrer-policy": "same-origin",
    "cache-control": "no-store",
}


# A few tries a minute per client: a token of 16 characters or more is out of reach of them.
LOGIN_TRIES = 5
LOGIN_WINDOW = 60.0
# The sessions kept open at once: the oldest is logged out past this (a bound on memory).
MOST_SESSIONS = 1000


class LoginTries:
    """The wrong tokens of each client within the last ``window`` seconds (a login's or a
    bearer's; the right one is never counted): ``most`` of them, then the next try refused
    until the oldest is ``window`` seconds old."""

    def __init__(
        self,
        most: int = LOGIN_TRIES,
        window: float = LOGIN_WINDOW,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.most = most
        self.window = window
        self.clock = clock
        self._tries: dict[str, deque[float]] = {}

    def waiting(self, client: str) -> float:
        """The seconds until ``client`` may try again (``0.0``: now), counting nothing."""
        now = self.clock()
        for name in [name for name, tries in self._tries.items() if tries[-1] <= now - self.window]:
            del self._tries[name]  # clients quiet for a whole window are forgotten
        tries = self._tries.get(client, deque())
        while tries and tries[0] <= now - self.window:
            tries.popleft()
        return tries[0] + self.window - now if len(tries) >= self.most else 0.0

    def count(self, client: str) -> None:
        """Count a wrong token of ``client``."""
        self._tries.setdefault(client, deque()).append(self.clock())


def _same(given: str, wanted: str) -> bool:
    """Compared in constant time, so the time taken tells nothing of ``wanted``."""
    return hmac.compare_digest(given.encode(), wanted.encode())


@dataclass(frozen=True)
class Guard:
    """What the console checks: the Host names it answers to, its login token (``None``: no
    login, on loopback only), the sessions logged in and the login tries, and this process's
    CSRF secret (all in memory: a restart logs everyone out)."""

    host: str
    token: str | None
    # The origins browsers reach the console at behind a proxy or a published port
    # (``serve --public-url``): their names are taken in the Host and Origin headers too.
    public_urls: tuple[str, ...] = ()
    csrf: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    tries: LoginTries = field(default_factory=LoginTries)
    # A dict as an ordered set: the oldest session first, dropped past MOST_SESSIONS.
    _sessions: dict[str, None] = field(default_factory=dict)

    def names(self) -> list[str]:
        """The names a Host header may say: the bound address (with loopback's other names;
        not a wildcard, which names no one host) and the ``public_urls``'."""
        bound = self.host.lower().strip("[]")
        wanted = [] if bound in WILDCARDS else [bound]
        if bound in LOOPBACK_NAMES:
            wanted += sorted(LOOPBACK_NAMES - {bound})
        for url in self.public_urls:
            name = (urlsplit(url).hostname or "").lower()
            if name not in wanted:
                wanted.append(name)
        return wanted

    def host_ok(self, header: str) -> bool:
        """Whether a Host header names this console (no DNS rebinding: a page of another site
        whose name was pointed at this address sends its own name)."""
        return _host_name(header) in self.names()

    def host_refused(self, header: str) -> str:
        """Why a request whose Host header says ``header`` was refused, and what mends it."""
        said = f"names {_clipped(header)}" if header else "is missing"
        return (
            f"The Host header {said}, not this console: it answers to "
            f"{', '.join(self.names())}. Open it at one of those, or, behind a proxy (or a "
            "container's published port), start it with `teams-runtime serve --public-url "
            "URL` naming the address browsers use (docs/console.md, behind a proxy)."
        )

    def origin_refused(self, origin: str) -> str:
        """Why a form from ``origin`` (another site's, as far as this console knows) was
        refused, and what mends it when it is this console's own, behind a proxy."""
        return (
            f"This form came from {_clipped(origin)} (its Origin), not from this console "
            f"({', '.join(self.names())}), so nothing was changed. If that is the address "
            "browsers reach the console at (a proxy), start it with `teams-runtime serve "
            f"--public-url {_clipped(origin)}`."
        )

    def token_ok(self, given: str) -> bool:
        """Whether ``given`` is the login token."""
        return self.token is not None and _same(given, self.token)

    def open_session(self) -> str:
        """A new session, for the cookie of one who gave the token (a random value, not the
        token: the cookie tells nothing of it)."""
        session = secrets.token_urlsafe(32)
        self._sessions[session] = None
        while len(self._sessions) > MOST_SESSIONS:
            del self._sessions[next(iter(self._sessions))]
        return session

    def close_session(self, cookie: str | None) -> None:
        """Log ``cookie``'s session out: the cookie opens nothing any more."""
        if cookie is not None:
            self._sessions.pop(cookie, None)

    def signed_in(self, cookie: str | None) -> bool:
        """Whether a request with ``cookie`` may see the console."""
        # A lookup by hash: its time tells nothing of a session's characters, as a
        # character-by-character comparison would.
        return self.token is None or (cookie is not None and cookie in self._sessions)

    def csrf_ok(self, given: str) -> bool:
        """Whether a form's CSRF field is the one this console put in its pages."""
        return _same(given, self.csrf)


def _clipped(text: str, most: int = 100) -> str:
    """A header's value as a message repeats it: printable, and not past ``most``."""
    shown = "".join(char if char.isprintable() else "?" for char in text[:most])
    return shown + ("..." if len(text) > most else "")


def _bearer(header: str) -> str | None:
    """The token of an ``Authorization: Bearer TOKEN`` header (``None``: no bearer)."""
    scheme, _, token = header.strip().partition(" ")
    return token.strip() if scheme.lower() == "bearer" else None


def login_url(path: str, query: str = "") -> str:
    """The login page, sending its visitor back to ``path`` (with ``query``) once in."""
    wanted = path + (f"?{query}" if query else "")
    return "/login" if wanted in ("/", "") else f"/login?{urlencode({'next': wanted})}"


def same_site_path(wanted: str) -> str:
    """``wanted`` (a login's ``next``) if it is a path of this console, else ``/``: never
    another site (``//evil.example``, ``https://...``), so no open redirect."""
    parts = urlsplit(wanted)
    if (
        not wanted.startswith("/")
        or wanted.startswith(("//", "/\\"))
        or parts.scheme
        or parts.netloc
        or any(char in wanted for char in "\\\r\n\t")
        or parts.path in ("/login", "/logout")
    ):
        return "/"
    return wanted


def _host_name(header: str) -> str:
    """The name of a Host header, without its port (``[::1]:8765`` -> ``::1``)."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[1 : header.find("]")] if "]" in header else ""
    return header.rpartition(":")[0] if ":" in header else header


class GuardMiddleware:
    """Every request's Host checked and its login asked for; every answer with ``HEADERS``."""

    def __init__(self, app: ASGIApp, guard: Guard) -> None:
        self.app = app
        self.guard = guard

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        refused = self._refusal(scope, headers)
        if refused is not None:
            await refused(scope, receive, self._with_headers(send))
            return
        await self.app(scope, receive, self._with_headers(send))

    def _refusal(self, scope: Scope, headers: Headers) -> Response | None:
        host = headers.get("host", "")
        if not self.guard.host_ok(host):
            return PlainTextResponse(self.guard.host_refused(host), 400)
        path: str = scope["path"]
        request = Request(scope)
        if path.startswith(OPEN_PATHS) or self.guard.signed_in(request.cookies.get(COOKIE)):
            return None
        bearer = _bearer(headers.get("authorization", ""))
        if path.startswith("/api/") and bearer is not None:
            return self._bearer_refusal(scope, request, bearer)
        if path.startswith(("/api/", "/events/")):
            return JSONResponse({"error": LOG_IN_FIRST}, 401)
        return RedirectResponse(login_url(path, scope.get("query_string", b"").decode()), 303)

    def _bearer_refusal(self, scope: Scope, request: Request, bearer: str) -> Response | None:
        """``Authorization: Bearer TOKEN`` on ``/api/``: the token, compared in constant
        time. Only a wrong one counts as a login try, so a script polling with the right
        token never uses up its client's tries; once they are used up, every bearer waits
        (the right one too: its answer would tell a guess from the token)."""
        client = request.client.host if request.client is not None else ""
        wait = self.guard.tries.waiting(client)
        if wait > 0:
            seconds = math.ceil(wait)
            said = f"Too many wrong tokens: try again in {seconds} s."
            return JSONResponse({"error": said}, 429, headers={"retry-after": str(seconds)})
        if not self.guard.token_ok(bearer):
            self.guard.tries.count(client)
            return JSONResponse({"error": "That bearer token is not the console's token."}, 401)
        scope.setdefault("state", {})[BEARER] = True  # a script's: no cookie, so no CSRF
        return None

    @staticmethod
    def _with_headers(send: Send) -> Send:
        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                message.setdefault("headers", [])
                message["headers"] = [*message["headers"]] + [
                    (name.encode(), value.encode()) for name, value in HEADERS.items()
                ]
            await send(message)

        return sending


CSRF_REFUSED = (
    "The form's CSRF check failed, so nothing was changed: reload the page and try again."
)


async def checked_form(request: Request, guard: Guard) -> dict[str, str]:
    """The fields of a POSTed form (the last value of each), once its CSRF field is this
    console's and its Origin, if it says one, is this console: ``HTTPException`` 403 if not,
    413 past ``FORM_BYTES``. Every handler of a POST calls this before anything else."""
    origin = request.headers.get("origin")
    if origin is not None and not guard.host_ok(urlsplit(origin).netloc):
        raise HTTPException(403, guard.origin_refused(origin))
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > FORM_BYTES:
            raise HTTPException(413, f"The form is longer than {FORM_BYTES:,} bytes.")
    try:
        fields = parse_qs(body.decode(), keep_blank_values=True, max_num_fields=32)
    except (UnicodeDecodeError, ValueError):
        raise HTTPException(403, CSRF_REFUSED) from None
    form = {name: values[-1] for name, values in fields.items()}
    # A browser sends its cookie to any site's form; a bearer only a script puts there.
    bearer = request.scope.get("state", {}).get(BEARER, False)
    if not guard.csrf_ok(form.pop("csrf", "")) and not bearer:
        raise HTTPException(403, CSRF_REFUSED)
    return form
