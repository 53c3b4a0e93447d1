"""The console's login behind a token (docs/console.md, safety): a logout closes the session
its cookie holds, and a client gets a few tries a minute at the token, then waits."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest

from teams_runtime.cli.console import console_app
from teams_runtime.storage import Workspace

from ...support.console_team import asgi_client

pytestmark = pytest.mark.anyio
TOKEN = "a-console-token-long-enough"


def _csrf(page: str) -> str:
    found = re.search(r'name="csrf" content="([^"]+)"', page)
    assert found is not None
    return found.group(1)


async def _log_in(client: httpx.AsyncClient, token: str = TOKEN) -> httpx.Response:
    csrf = _csrf((await client.get("/login")).text)
    return await client.post("/login", data={"csrf": csrf, "token": token})


async def test_a_logout_closes_the_session_its_cookie_holds(team: Path) -> None:
    app = console_app(Workspace(team), host="127.0.0.1", token=TOKEN)
    async with asgi_client(app) as client, asgi_client(app, client="192.0.2.2") as other:
        assert (await _log_in(client)).status_code == 303
        assert (await _log_in(other)).status_code == 303
        page = await client.get("/")
        assert '<form method="post" action="/logout"' in page.text
        cookie = client.cookies["teams_runtime_console"]
        async with asgi_client(app, client="192.0.2.3") as copied:
            copied.cookies.set("teams_runtime_console", cookie)
            assert (await copied.get("/api/status")).status_code == 200
        refused = await client.post("/logout", data={"csrf": "guessed"})
        assert refused.status_code == 403
        assert (await client.get("/api/status")).status_code == 200  # still logged in
        done = await client.post("/logout", data={"csrf": _csrf(page.text)})
        assert (done.status_code, done.headers["location"]) == (303, "/login?out=1")
        assert "Logged out." in (await client.get(done.headers["location"])).text
        assert 'teams_runtime_console=""' in done.headers["set-cookie"]
        assert (await client.get("/api/status")).status_code == 401
        # The cookie kept (copied elsewhere, say) opens nothing any more...
        client.cookies.set("teams_runtime_console", cookie)
        assert (await client.get("/api/status")).status_code == 401
        # ...and another browser's session is its own: still logged in.
        assert (await other.get("/api/status")).status_code == 200


async def test_without_a_token_no_logout_is_offered(team: Path) -> None:
    app = console_app(Workspace(team), host="127.0.0.1", token=None)
    async with asgi_client(app) as client:
        assert "/logout" not in (await client.get("/")).text


async def test_a_client_gets_a_few_tries_a_minute_at_the_token(team: Path) -> None:
    app = console_app(Workspace(team), host="127.0.0.1", token=TOKEN)
    clock = [1000.0]
    app.state.console.guard.tries.clock = lambda: clock[0]
    async with asgi_client(app) as client, asgi_client(app, client="192.0.2.2") as other:
        for _ in range(5):
            assert (await _log_in(client, "not-the-token-at-all")).status_code == 401
        clock[0] += 30
        refused = await _log_in(client)  # the right token too: the tries are used up
        assert refused.status_code == 429
        assert "Too many tries to log in: try again in 30 s." in refused.text
        assert refused.headers["retry-after"] == "30"
        assert "set-cookie" not in refused.headers
        assert (await client.get("/api/status")).status_code == 401
        assert (await _log_in(other)).status_code == 303  # another client has its own tries
        clock[0] += 30  # a minute after the first try, one try is free again
        assert (await _log_in(client)).status_code == 303
        assert (await client.get("/api/status")).status_code == 200
