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
import msgspec
import pytest

from teams_runtime.cli import main
from teams_runtime.cli.console import console_app
from teams_runtime.codecs.prompt_records import decode_prompt_record, encode_prompt_record
from teams_runtime.monitoring import PROMPT_LOG_NAME
from teams_runtime.storage import Workspace

from ...support.console_team import SCRIPT_TAG, cli, console_team
from ...support.waiting import eventually

pytestmark = pytest.mark.anyio
BASE = "http://127.0.0.1:8765"
TOKEN = "a-console-token-long-enough"


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
        # The commands' flags, as query parameters.
        pytest.param(
            "/api/metrics?role=writer&since=2020-01-01T00:00&by=purpose",
            [
                "metrics",
                "--json",
                "--role",
                "writer",
                "--since",
                "2020-01-01T00:00",
                "--by",
                "purpose",
            ],
            id="metrics-filtered",
        ),
        pytest.param(
            "/api/metrics?request_id=req-9&purpose=role_task",
            [
                "metrics",
                "--json",
                "--request-id",
                "req-9",
                "--purpose",
                "role_task",
                "--by",
                "role",
                "--by",
                "model",
            ],
            id="metrics-no-data",
        ),
        pytest.param(
            "/api/requests/req-1/prompt?role=reviewer&layout=shared_prefix&max_events=12",
            [
                "prompt",
                "req-1",
                "--role",
                "reviewer",
                "--layout",
                "shared_prefix",
                "--max-events",
                "12",
                "--json",
            ],
            id="prompt-overridden",
        ),
        pytest.param(
            "/api/requests/req-1/explain?disable=true&role=writer",
            ["explain", "req-1", "--disable", "--role", "writer", "--json"],
            id="explain-disabled",
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
    # Nothing is chosen for the person: `answer` asks for --status too, so no silent ending.
    assert '<option value="" selected>choose...</option>' in form.text
    fields = {"csrf": _csrf(form.text), "role": "approver", "status": "completed",
              "summary": "Approved.", "next_role": "(nobody)"}  # fmt: skip
    for unchosen, said in (("status", "choose a status: completed, blocked, failed."),
                           ("next_role", "choose the next role, or nobody")):  # fmt: skip
        refused = await console.post("/inbox/req-1/answer", data={**fields, unchosen: ""})
        assert refused.status_code == 400 and said in refused.text
    # The approver hands only to the writer: the reviewer is refused, as `answer` refuses it.
    wrong = await console.post("/inbox/req-1/answer", data={**fields, "next_role": "reviewer"})
    assert wrong.status_code == 409
    assert "must be empty or one of: writer (approver may hand only to these)." in wrong.text
    done = await console.post("/inbox/req-1/answer", data=fields)
    # POST, redirect, GET: the request's page says what was recorded; a reload posts nothing.
    assert done.status_code == 303
    assert done.headers["location"].startswith("/requests/req-1?answered=")
    landed = await console.get(done.headers["location"])
    said = "Recorded the approver answer to req-1 (completed); the request is completed."
    assert landed.status_code == 200 and said in landed.text
    again = await console.post("/inbox/req-1/answer", data=fields)
    assert again.status_code == 409 and "no answer waits" in again.text
    # Back to the consumed form: where to go from here, not a dead end.
    back = await console.get("/inbox/req-1?role=approver")
    assert back.status_code == 404 and "No answer waits under req-1 now" in back.text
    assert 'href="/requests/req-1">the request</a>' in back.text
    assert 'href="/inbox">the inbox</a>' in back.text
    record = json.loads(await _cli(team, "export", "req-1"))
    assert (record["status"], record["result"]["summary"]) == ("completed", "Approved.")
    page = await console.get("/requests")
    assert (
        '<tr><td><a href="/requests/req-1">req-1</a></td><td>Write the launch note</td>'
        "<td>completed</td>"
    ) in page.text


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
    said = ("This form came from http://evil.example (its Origin), not from this console "
            "(127.0.0.1, ::1, localhost), so nothing was changed.")  # fmt: skip
    assert said in refused.text and "--public-url http://evil.example" in refused.text


async def test_every_post_route_checks_the_csrf_field(team: Path) -> None:
    app = console_app(Workspace(team), host="127.0.0.1", token=TOKEN)
    posts = [r.path for r in app.routes if "POST" in (getattr(r, "methods", None) or ())]
    assert posts == ["/inbox", "/inbox/{request_id}/answer", "/login", "/logout", "/api/inbox",
                     "/api/inbox/{request_id}/answer"]  # fmt: skip
    async with _client(team, TOKEN) as client:
        for path in posts:
            answer = await client.post(path.replace("{request_id}", "req-1"), data={"x": "1"})
            assert answer.status_code in (303, 401, 403), path  # 303, 401: the login first
    async with _client(team) as client:  # without a login: the CSRF check itself
        for path in posts:
            if path != "/login":
                answer = await client.post(path.replace("{request_id}", "req-1"), data={})
                assert answer.status_code == 403, path


@pytest.fixture
def overdue_team(tmp_path: Path, fake_model: Path) -> Path:
    """The team, its approver given a second to answer."""
    return console_team(tmp_path / "ws", fake_model, answer_within=1)


@pytest.mark.parametrize("path", [pytest.param("/api/inbox", id="api"),
                                  pytest.param("/inbox", id="page")])  # fmt: skip
async def test_looking_at_the_inbox_writes_nothing_and_its_tidy_is_a_post(
    overdue_team: Path, path: str
) -> None:
    root = overdue_team
    async with _client(root) as console:

        async def overdue() -> bool:
            return bool((await console.get("/api/inbox")).json()["waiting"][0]["overdue"])

        await eventually(overdue, "req-1's answer_within to run out", 30)
        before = await _cli(root, "export", "req-1")
        for looking in ("/api/inbox", "/inbox", "/", "/api/status", "/inbox/req-1"):
            assert (await console.get(looking)).status_code == 200, looking
        assert await _cli(root, "export", "req-1") == before  # no look applied on_failure
        # on_failure is fail: no form, and no empty heading where it was.
        assert "<h2>Answer</h2>" not in (await console.get("/inbox/req-1")).text
        looked = (await console.get("/api/inbox")).json()
        assert [(w["request_id"], w["overdue"]) for w in looked["waiting"]] == [("req-1", True)]
        assert looked["ran_out"] == []
        inbox = await console.get("/inbox")
        assert "1 answer waited past answer_within" in inbox.text
        refused = await console.post(path, data={})
        assert refused.status_code == 403
        assert await _cli(root, "export", "req-1") == before
        tidied = await console.post(path, data={"csrf": _csrf(inbox.text)})
        assert tidied.status_code == 200
        if path == "/api/inbox":
            assert tidied.json()["waiting"] == []
            assert [(r["request_id"], r["outcome"]) for r in tidied.json()["ran_out"]] == [
                ("req-1", "failed")
            ]
        else:  # the page's button
            said = "No answer to req-1 (approver) within its answer_within: the request failed."
            assert said in tidied.text and "No answer waits." in tidied.text
    assert json.loads(await _cli(root, "export", "req-1"))["status"] == "failed"


async def test_another_host_name_is_refused(console: httpx.AsyncClient) -> None:
    refused = await console.get("/api/status", headers={"host": "rebound.example:8765"})
    assert refused.status_code == 400
    assert refused.text.startswith(
        "The Host header names rebound.example:8765, not this console: it answers to "
        "127.0.0.1, ::1, localhost. Open it at one of those, or, behind a proxy"
    )
    assert "teams-runtime serve --public-url URL" in refused.text
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
        assert "secure" not in cookie.lower()  # plain http on loopback: it must be sent
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


async def test_the_request_page_shows_its_calls_tokens_where_known(
    team: Path, console: httpx.AsyncClient
) -> None:
    logs = Workspace(team).logs_dir / PROMPT_LOG_NAME
    lines = logs.read_text().splitlines()
    assert lines  # the fake model's calls for req-1: no tokens reported (a command)
    reported = {"prompt_tokens": 1234, "completion_tokens": 56, "latency_ms": 812.0}
    for request_id, tokens in (("req-1", reported), ("req-2", {"prompt_tokens": 9999})):
        record = msgspec.structs.replace(
            decode_prompt_record(lines[0].encode()), request_id=request_id, **tokens
        )
        lines.append(encode_prompt_record(record))
    logs.write_text("\n".join(lines) + "\n")
    page = await console.get("/requests/req-1")
    assert "<h2>Model calls</h2>" in page.text
    assert "<td>1,234</td><td>56</td><td>812 ms</td>" in page.text
    assert "<td>-</td><td>-</td>" in page.text  # the fake model's calls: tokens unknown
    assert "9,999" not in page.text  # another request's call
    other = await console.get("/requests/req-2?role=writer")
    assert "9,999" in other.text


async def test_a_bad_id_or_role_is_refused_with_the_commands_message(
    console: httpx.AsyncClient,
) -> None:
    missing = await console.get("/api/requests/req-9")
    assert missing.status_code == 404 and missing.json()["error"].startswith("no request 'req-9'")
    role = await console.get("/api/requests/req-1/prompt?role=--disable")
    assert role.status_code == 400 and "is not a role name" in role.json()["error"]
    other = await console.get("/api/requests/req-1/prompt?role=qa")
    assert other.status_code == 400 and "unknown role 'qa'" in other.json()["error"]
    # A request that does not exist is a 404 everywhere: pages, the inbox, its JSON.
    for path in ("/requests/nope", "/inbox/nope", "/api/inbox/nope", "/api/requests/nope/explain",
                 "/api/requests/nope/prompt?role=writer"):  # fmt: skip
        missing = await console.get(path)
        assert missing.status_code == 404, path
        assert "no request 'nope'" in missing.text.replace("&#x27;", "'"), path
    # One that exists with nothing waiting for a person: nothing at its inbox address either.
    nothing = await console.get("/api/inbox/req-2")
    assert nothing.status_code == 404
    assert nothing.json()["error"].startswith("no answer waits for request req-2")


@pytest.mark.parametrize(
    ("path", "said"),
    [
        pytest.param("/api/requests/req-1/prompt", "role is required (?role=ROLE)", id="no-role"),
        pytest.param(
            "/api/metrics?by=bogus",
            "by: invalid choice: 'bogus' (choose from role, purpose, enabled, model, day, hour).",
            id="metrics-by",
        ),
        pytest.param(
            "/api/metrics?group=role",
            "unknown query parameter 'group' for /api/metrics: it takes by, hours, since, role, "
            "purpose, request_id.",
            id="unknown-parameter",
        ),
        pytest.param("/api/metrics?hours=soon", "argument --hours: ", id="metrics-hours"),
        pytest.param(
            "/api/metrics?hours=2&since=2026-01-01T00:00",
            "argument --since: not allowed with argument --hours",
            id="metrics-one-window",
        ),
        pytest.param(
            "/api/requests/req-1/prompt?role=writer&layout=upside_down",
            "argument --layout: invalid choice: 'upside_down'",
            id="prompt-layout",
        ),
        pytest.param(
            "/api/requests/req-1/explain?disable=maybe", "disable is a switch", id="switch"
        ),
        pytest.param(
            "/api/requests/req-1/explain?role=writer&role=reviewer",
            "role is given 2 times; give it once.",
            id="twice",
        ),
        pytest.param("/api/status?watch=1", "it takes none", id="status-takes-none"),
    ],
)
async def test_the_api_checks_its_query_as_the_commands_check_their_flags(
    console: httpx.AsyncClient, path: str, said: str
) -> None:
    refused = await console.get(path)
    assert refused.status_code == 400
    assert said in refused.json()["error"]


async def test_metrics_group_by_what_is_asked(console: httpx.AsyncClient) -> None:
    assert (await console.get("/api/metrics?hours=2")).json()["filters"]["since"]
    grouped = (await console.get("/api/metrics?by=purpose")).json()["groups"]
    assert grouped and all("purpose" in group and "role" not in group for group in grouped)


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        pytest.param(["--host", "192.0.2.7"], "needs a token there", id="another-host"),
        pytest.param(
            ["--host", "0.0.0.0"],
            "name the address browsers use with --public-url",
            id="every-address",
        ),
        pytest.param(
            ["--host", "0.0.0.0"],
            "--host 0.0.0.0 is not a loopback address: the console needs a token",
            id="every-address-no-token-either",  # everything missing, said at once
        ),
        pytest.param(
            ["--host", "0.0.0.0", "--public-url", "http://localhost:8765"],
            "--host 0.0.0.0 is not a loopback address: the console needs a token",
            id="every-address-named-no-token",
        ),
        pytest.param(
            ["--public-url", "https://console.example.com"],
            "--public-url https://console.example.com is reached from other hosts: "
            "the console needs a token",
            id="public-url-no-token",
        ),
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


def test_a_public_url_is_an_origin_only(team: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["serve", "--workspace", str(team), "--public-url", "https://example.com/app"])
    assert exited.value.code == 2
    assert "'https://example.com/app' is not an origin" in capsys.readouterr().err


def test_a_short_token_is_refused(
    team: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TEAMS_RUNTIME_CONSOLE_TOKEN", "short")
    assert main(["serve", "--workspace", str(team), "--host", "192.0.2.7"]) == 2
    assert "a console token needs at least 16" in capsys.readouterr().err
