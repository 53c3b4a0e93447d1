"""The web console at the HTTP level (``teams-runtime serve``; docs/console.md): its JSON is
the commands' ``--json``, its form answers as ``answer`` does, and its guard holds: a Host
header of another name, a POST without the CSRF field, a page without the login are refused
and change nothing; everything it shows is escaped."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio.to_thread
import httpx
import pytest

from teams_runtime.cli import main
from teams_runtime.cli.console import console_app
from teams_runtime.storage import Workspace

from ...support.console_team import SCRIPT_TAG, cli, console_team

pytestmark = pytest.mark.anyio
BASE = "http://127.0.0.1:8765"
TOKEN = "a-console-token-long-enough"


@pytest.fixture
def team(tmp_path: Path, fake_model: Path) -> Path:
    return console_team(tmp_path / "ws", fake_model)


def _client(root: Path, token: str | None = None, base: str = BASE) -> httpx.AsyncClient:
    app = console_app(Workspace(root), host="127.0.0.1", token=token)
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=base)


@pytest.fixture
async def console(team: Path) -> AsyncIterator[httpx.AsyncClient]:
    async with _client(team) as client:
        yield client


async def _cli(root: Path, *argv: str) -> str:
    """A command's output, run off the event loop (it runs its own)."""
    return await anyio.to_thread.run_sync(lambda: cli(root, *argv))


def _csrf(page: str) -> str:
    found = re.search(r'name="csrf" content="([^"]+)"', page)
    assert found is not None
    return found.group(1)


# Times that move between two reads (a second apart), left out of the comparisons.
_MOVING = {"waiting_seconds", "due_in_seconds", "lease_age_seconds"}


def _still(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _still(item) for key, item in value.items() if key not in _MOVING}
    if isinstance(value, list):
        return [_still(item) for item in value]
    return value


@pytest.mark.parametrize(
    ("path", "argv"),
    [
        pytest.param("/api/status", ["status", "--json"], id="status"),
        pytest.param("/api/inbox", ["inbox", "--json"], id="inbox"),
        pytest.param("/api/inbox/req-1", ["inbox", "show", "req-1", "--json"], id="inbox-show"),
        pytest.param("/api/requests/req-1", ["export", "req-1"], id="export"),
        pytest.param(
            "/api/requests/req-1/prompt?role=reviewer",
            ["prompt", "req-1", "--role", "reviewer", "--json"],
            id="prompt",
        ),
        pytest.param("/api/requests/req-1/explain", ["explain", "req-1", "--json"], id="explain"),
        pytest.param(
            "/api/metrics", ["metrics", "--json", "--by", "role", "--by", "model"], id="metrics"
        ),
    ],
)
async def test_the_api_answers_what_the_command_prints_with_json(
    team: Path, console: httpx.AsyncClient, path: str, argv: list[str]
) -> None:
    answer = await console.get(path)
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("application/json")
    assert _still(answer.json()) == _still(json.loads(await _cli(team, *argv)))


async def test_a_person_answers_from_the_form_once(team: Path, console: httpx.AsyncClient) -> None:
    inbox = await console.get("/inbox")
    assert 'href="/inbox/req-1?role=approver"' in inbox.text
    form = await console.get("/inbox/req-1?role=approver")
    assert "Role rules (approver):\n- Approve the reviewed draft" in form.text  # its prompt
    fields = {"csrf": _csrf(form.text), "role": "approver", "status": "completed",
              "summary": "Approved.", "next_role": ""}  # fmt: skip
    # The approver hands only to the writer: the reviewer is refused, as `answer` refuses it.
    wrong = await console.post("/inbox/req-1/answer", data={**fields, "next_role": "reviewer"})
    assert wrong.status_code == 409
    assert "must be empty or one of: writer (approver may hand only to these)." in wrong.text
    done = await console.post("/inbox/req-1/answer", data=fields)
    assert done.status_code == 200
    said = "Recorded the approver answer to req-1 (completed); the request is completed."
    assert said in done.text
    again = await console.post("/inbox/req-1/answer", data=fields)
    assert again.status_code == 409 and "no answer waits" in again.text
    record = json.loads(await _cli(team, "export", "req-1"))
    assert (record["status"], record["result"]["summary"]) == ("completed", "Approved.")
    page = await console.get("/requests")
    assert '<tr><td><a href="/requests/req-1">req-1</a></td><td>completed</td>' in page.text


@pytest.mark.parametrize(
    "fields",
    [
        pytest.param({}, id="no-csrf-field"),
        pytest.param({"csrf": "guessed"}, id="a-wrong-one"),
    ],
)
async def test_a_post_without_the_csrf_check_is_refused_and_changes_nothing(
    team: Path, console: httpx.AsyncClient, fields: dict[str, str]
) -> None:
    before = await _cli(team, "export", "req-1")
    answer = {"role": "approver", "status": "completed", "summary": "Approved.", **fields}
    refused = await console.post("/inbox/req-1/answer", data=answer)
    assert refused.status_code == 403
    assert "CSRF check failed, so nothing was changed" in refused.text
    assert await _cli(team, "export", "req-1") == before
    assert [row["request_id"] for row in (await console.get("/api/inbox")).json()["waiting"]] == [
        "req-1"
    ]


async def test_a_post_from_another_origin_is_refused(console: httpx.AsyncClient) -> None:
    form = await console.get("/inbox/req-1")
    refused = await console.post(
        "/inbox/req-1/answer",
        data={"csrf": _csrf(form.text), "status": "completed", "summary": "x"},
        headers={"origin": "http://evil.example"},
    )
    assert refused.status_code == 403


async def test_every_post_route_checks_the_csrf_field(team: Path) -> None:
    app = console_app(Workspace(team), host="127.0.0.1", token=TOKEN)
    posts = [r.path for r in app.routes if "POST" in (getattr(r, "methods", None) or ())]
    assert posts == ["/inbox/{request_id}/answer", "/login"]
    async with _client(team, TOKEN) as client:
        for path in posts:
            answer = await client.post(path.replace("{request_id}", "req-1"), data={"x": "1"})
            assert answer.status_code in (303, 403), path  # 303: to the login first


async def test_another_host_name_is_refused(console: httpx.AsyncClient) -> None:
    refused = await console.get("/api/status", headers={"host": "rebound.example:8765"})
    assert refused.status_code == 400
    for name in ("127.0.0.1:8765", "localhost:8765", "[::1]:8765"):
        assert (await console.get("/api/status", headers={"host": name})).status_code == 200


async def test_with_a_token_the_console_asks_for_a_login_once(team: Path) -> None:
    async with _client(team, TOKEN) as client:
        assert (await client.get("/")).headers["location"] == "/login"
        assert (await client.get("/api/status")).status_code == 401
        login = await client.get("/login")
        csrf = _csrf(login.text)
        wrong = await client.post("/login", data={"csrf": csrf, "token": TOKEN[:-1] + "x"})
        assert wrong.status_code == 401 and "not the console&#x27;s token" in wrong.text
        assert (await client.get("/api/status")).status_code == 401
        done = await client.post("/login", data={"csrf": csrf, "token": TOKEN})
        assert done.status_code == 303
        cookie = done.headers["set-cookie"]
        assert "httponly" in cookie.lower() and "samesite=strict" in cookie.lower()
        assert TOKEN not in cookie  # a session of this process, not the token
        assert (await client.get("/api/status")).status_code == 200
        assert (await client.get("/")).status_code == 200


async def test_what_a_record_holds_shows_as_text(console: httpx.AsyncClient) -> None:
    for path in ("/requests/req-2", "/requests/req-2?role=writer", "/requests"):
        page = await console.get(path)
        assert page.status_code == 200
        assert SCRIPT_TAG not in page.text, path
    page = await console.get("/requests/req-2")
    assert "Quote &lt;script&gt;alert(1)&lt;/script&gt; as text" in page.text
    assert page.headers["content-security-policy"].startswith("default-src 'self'")
    assert page.headers["x-frame-options"] == "DENY"


async def test_a_bad_id_or_role_is_refused_with_the_commands_message(
    console: httpx.AsyncClient,
) -> None:
    missing = await console.get("/api/requests/req-9")
    assert missing.status_code == 404 and missing.json()["error"].startswith("no request 'req-9'")
    role = await console.get("/api/requests/req-1/prompt?role=--disable")
    assert role.status_code == 400 and "is not a role name" in role.json()["error"]
    other = await console.get("/api/requests/req-1/prompt?role=qa")
    assert other.status_code == 400 and "unknown role 'qa'" in other.json()["error"]


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        pytest.param(["--host", "192.0.2.7"], "needs a token there", id="another-host"),
        pytest.param(["--host", "0.0.0.0"], "listens on every address", id="every-address"),
        pytest.param(["--token-env", "NO_SUCH_VAR_HERE"], "is not set", id="unset-variable"),
    ],
)
def test_serve_refuses_to_start_unsafely(
    team: Path, capsys: pytest.CaptureFixture[str], argv: list[str], said: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    monkeypatch.delenv("TEAMS_RUNTIME_CONSOLE_TOKEN", raising=False)
    assert main(["serve", "--workspace", str(team), *argv]) == 2
    out, err = capsys.readouterr()
    assert out == "" and said in err


def test_a_short_token_is_refused(
    team: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TEAMS_RUNTIME_CONSOLE_TOKEN", "short")
    assert main(["serve", "--workspace", str(team), "--host", "192.0.2.7"]) == 2
    assert "a console token needs at least 16" in capsys.readouterr().err
