"""The console's guard: the Host header checked, the login (a token entered once, then an
HttpOnly cookie), the CSRF check of every POST, and the headers that keep a page to itself."""

from __future__ import annotations

import hmac
import secrets
from dataclasses import dataclass, field
from urllib.parse import parse_qs, urlsplit

from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["COOKIE", "FORM_BYTES", "Guard", "GuardMiddleware", "checked_form"]

COOKIE = "teams_runtime_console"
# The most a form may send: an answer's whole result (as `answer --from`) and its fields.
FORM_BYTES = 1_048_576 + 65_536
OPEN_PATHS = ("/login", "/static/")  # what is served before the login
LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "::1"})
# Scripts and styles from the console only: a `<script>` that slipped through the escaping
# would not run either.
HEADERS = {
    "content-security-policy": "default-src 'self'; frame-ancestors 'none'; form-action 'self'",
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    "referrer-policy": "no-referrer",
    "cache-control": "no-store",
}


def _same(given: str, wanted: str) -> bool:
    """Compared in constant time, so the time taken tells nothing of ``wanted``."""
    return hmac.compare_digest(given.encode(), wanted.encode())


@dataclass(frozen=True)
class Guard:
    """What the console checks: the Host names it answers to, its login token (``None``: no
    login, on loopback only) and this process's secrets (a restart logs everyone out)."""

    host: str
    token: str | None
    session: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    csrf: str = field(default_factory=lambda: secrets.token_urlsafe(32))

    def host_ok(self, header: str) -> bool:
        """Whether a Host header names this console (no DNS rebinding: a page of another site
        whose name was pointed at this address sends its own name)."""
        name = _host_name(header)
        wanted = {self.host.lower().strip("[]")}
        if wanted & LOOPBACK_NAMES:
            wanted |= LOOPBACK_NAMES
        return name in wanted

    def token_ok(self, given: str) -> bool:
        """Whether ``given`` is the login token."""
        return self.token is not None and _same(given, self.token)

    def signed_in(self, cookie: str | None) -> bool:
        """Whether a request with ``cookie`` may see the console."""
        return self.token is None or (cookie is not None and _same(cookie, self.session))

    def csrf_ok(self, given: str) -> bool:
        """Whether a form's CSRF field is the one this console put in its pages."""
        return _same(given, self.csrf)


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
        if not self.guard.host_ok(headers.get("host", "")):
            return PlainTextResponse("The Host header names no address of this console.", 400)
        path: str = scope["path"]
        if path.startswith(OPEN_PATHS) or self.guard.signed_in(Request(scope).cookies.get(COOKIE)):
            return None
        if path.startswith("/api/") or path.startswith("/events/"):
            return JSONResponse({"error": "log in first: the console asks for its token"}, 401)
        return RedirectResponse("/login", 303)

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
        raise HTTPException(403, CSRF_REFUSED)
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
    if not guard.csrf_ok(form.pop("csrf", "")):
        raise HTTPException(403, CSRF_REFUSED)
    return form
