"""The console reached other than at the address it listens on (docs/console.md, behind a
proxy): the names ``serve --public-url`` gives are taken in the Host and Origin headers, a
wildcard address only with one; scripts send the token as a bearer; and ``serve`` says
plainly when its port is in use or its address not of this host."""

from __future__ import annotations

import re
import socket
from pathlib import Path

import pytest

from teams_runtime.cli import main
from teams_runtime.cli._serve import TOKEN_ENV, console_token, public_url
from teams_runtime.cli.console import console_app
from teams_runtime.storage import Workspace

from ...support.console_team import asgi_client

pytestmark = pytest.mark.anyio
TOKEN = "a-console-token-long-enough"
PUBLIC = "https://console.example.com"


def _csrf(page: str) -> str:
    found = re.search(r'name="csrf" content="([^"]+)"', page)
    assert found is not None
    return found.group(1)


async def test_behind_a_proxy_its_public_url_is_taken_for_host_and_origin(team: Path) -> None:
    app = console_app(Workspace(team), host="127.0.0.1", token=TOKEN, public_urls=[PUBLIC])
    async with asgi_client(
        app, PUBLIC
    ) as browser:  # Host: console.example.com, as a proxy keeps it
        csrf = _csrf((await browser.get("/login")).text)
        forged = await browser.post(
            "/login",
            data={"csrf": csrf, "token": TOKEN},
            headers={"origin": "https://evil.example"},
        )
        assert forged.status_code == 403 and "came from https://evil.example" in forged.text
        done = await browser.post(
            "/login", data={"csrf": csrf, "token": TOKEN}, headers={"origin": PUBLIC}
        )
        assert (done.status_code, done.headers["location"]) == (303, "/")
        assert "secure" in done.headers["set-cookie"].lower()  # never sent on plain http
        assert (await browser.get("/api/status")).status_code == 200
        other = await browser.get("/api/status", headers={"host": "other.example"})
        assert other.status_code == 400
        assert "it answers to 127.0.0.1, ::1, localhost, console.example.com." in other.text
    async with asgi_client(app, "http://127.0.0.1:8765") as local:  # the bound address still is
        assert (await local.get("/login")).status_code == 200


async def test_a_container_listens_everywhere_under_the_name_it_is_given(team: Path) -> None:
    named = "http://localhost:8765"  # a container's published port, as the browser opens it
    assert console_token("0.0.0.0", None, {TOKEN_ENV: TOKEN}, [named]) == TOKEN
    app = console_app(Workspace(team), host="0.0.0.0", token=TOKEN, public_urls=[named])
    async with asgi_client(app, named) as browser:
        assert (await browser.get("/login")).status_code == 200
        for host in ("0.0.0.0:8765", "172.17.0.2:8765"):  # no name of its own: only the given
            assert (await browser.get("/login", headers={"host": host})).status_code == 400


async def test_a_script_sends_the_token_as_a_bearer_and_only_wrong_ones_count(
    team: Path,
) -> None:
    app = console_app(Workspace(team), host="127.0.0.1", token=TOKEN)
    right = {"authorization": f"Bearer {TOKEN}"}
    wrong = {"authorization": "Bearer not-the-token-at-all"}
    base = "http://127.0.0.1:8765"
    async with asgi_client(app, base) as script, asgi_client(app, base, "192.0.2.2") as other:
        for _ in range(8):  # a script polling with the right token never uses up its tries
            assert (await script.get("/api/status", headers=right)).status_code == 200
        assert "set-cookie" not in (await script.get("/api/status", headers=right)).headers
        tidied = await script.post("/api/inbox", headers=right, data={})  # no cookie: no CSRF
        assert tidied.status_code == 200 and tidied.json()["ran_out"] == []
        page = await script.get("/", headers=right)  # the pages are a browser's: log in there
        assert page.status_code == 303
        for _ in range(5):
            refused = await script.get("/api/status", headers=wrong)
            assert refused.status_code == 401
            assert refused.json() == {"error": "That bearer token is not the console's token."}
        locked = await script.get("/api/status", headers=right)  # the right one waits too
        assert locked.status_code == 429 and int(locked.headers["retry-after"]) > 0
        assert locked.json()["error"].startswith("Too many wrong tokens: try again in ")
        assert (await other.get("/api/status", headers=right)).status_code == 200
        assert (await other.get("/api/status")).json()["error"].startswith("log in first")


@pytest.mark.parametrize(
    ("text", "origin"),
    [
        pytest.param("https://Console.Example.com/", PUBLIC, id="case-and-slash"),
        pytest.param("http://localhost:9000", "http://localhost:9000", id="a-port"),
    ],
)
def test_a_public_url_is_an_origin(text: str, origin: str) -> None:
    assert public_url(text) == origin


def test_serve_says_when_its_port_is_in_use(team: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["serve", "--workspace", str(team), "--port", str(port)]) == 2
    assert capsys.readouterr().err == (
        f"teams-runtime: error: port {port} on 127.0.0.1 is in use: pick another with --port "
        "(or --port 0 for any free one). Nothing was started.\n"
    )


def test_serve_says_when_its_address_is_not_of_this_host(
    team: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(TOKEN_ENV, TOKEN)
    assert main(["serve", "--workspace", str(team), "--host", "192.0.2.7", "--port", "0"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("teams-runtime: error: --host 192.0.2.7 is not an address of this host")
    assert "Traceback" not in err and err.endswith("Nothing was started.\n")
