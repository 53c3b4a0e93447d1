"""The console's answers and pages after a second new-user trial (issue 35): an answer is
recorded only on the question its form showed, a logout ends the live streams of every tab,
a correct login never uses up a try, and the pages say what a request is about and when they
were drawn."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import anyio.to_thread
import httpx
import pytest

from teams_runtime.cli.console import console_app
from teams_runtime.storage import Workspace

from ...support.console_team import SCRIPT_TAG, asgi_client, cli

pytestmark = pytest.mark.anyio
TOKEN = "a-console-token-long-enough"
REPLACED = "the question you saw was answered; a new one waits: reload"


@pytest.fixture
async def console(team: Path) -> AsyncIterator[httpx.AsyncClient]:
    async with asgi_client(console_app(Workspace(team), host="127.0.0.1", token=None)) as client:
        yield client


async def _cli(root: Path, *argv: str) -> str:
    return await anyio.to_thread.run_sync(lambda: cli(root, *argv))


def _field(page: str, name: str) -> str:
    found = re.search(rf'name="{name}" (?:content|value)="([^"]+)"', page)
    assert found is not None, name
    return found.group(1)


async def test_an_open_form_answers_only_the_question_it_shows(
    team: Path, console: httpx.AsyncClient
) -> None:
    """Two tabs on one question: the first sends it back to the writer, the team brings a new
    question to the approver at once; the second tab's answer is refused, not recorded on it."""
    first, second = (
        (await console.get("/inbox/req-1")).text,
        (await console.get("/inbox/req-1")).text,
    )
    seen = _field(first, "envelope_id")
    assert _field(second, "envelope_id") == seen
    fields = {"csrf": _field(first, "csrf"), "role": "approver", "envelope_id": seen}
    back = {**fields, "status": "blocked", "summary": "Shorter, please.", "next_role": "writer"}
    assert (await console.post("/inbox/req-1/answer", data=back)).status_code == 303
    # The writer and the reviewer at once (a process: `run` wants its own main thread), and
    # the approver is asked again.
    argv = [sys.executable, "-m", "teams_runtime", "run", "--once", "--workspace", str(team)]
    await anyio.run_process(argv)
    before = await _cli(team, "export", "req-1")
    late = {**fields, "status": "completed", "summary": "Ship it.", "next_role": "(nobody)"}
    refused = await console.post("/inbox/req-1/answer", data=late)
    assert refused.status_code == 409 and REPLACED in refused.text
    new = _field(refused.text, "envelope_id")  # the page shows the new question...
    assert new != seen and "Ship it." not in refused.text  # ...its form not filled with the old
    assert await _cli(team, "export", "req-1") == before
    # Scripts too: /api answers take the envelope they mean.
    api = await console.post("/api/inbox/req-1/answer", data=late)
    assert api.status_code == 409 and REPLACED in api.json()["error"]
    done = await console.post("/api/inbox/req-1/answer", data={**late, "envelope_id": new})
    assert done.status_code == 200, done.text
    assert done.json() == {"request_id": "req-1", "role": "approver", "envelope_id": new,
                           "status": "completed", "handed_to": "",
                           "request_status": "completed"}  # fmt: skip
    assert json.loads(await _cli(team, "export", "req-1"))["status"] == "completed"


async def test_a_logout_ends_the_live_streams_of_every_tab(team: Path) -> None:
    app = console_app(Workspace(team), host="127.0.0.1", token=TOKEN, interval=0.05)
    async with asgi_client(app) as client:
        csrf = _field((await client.get("/login")).text, "csrf")
        assert (await client.post("/login", data={"csrf": csrf, "token": TOKEN})).status_code == 303
        ended: list[httpx.Response] = []

        async def watch(path: str) -> None:
            ended.append(await client.get(path))  # returns once the stream ends

        with anyio.fail_after(20):
            async with anyio.create_task_group() as tabs:
                tabs.start_soon(watch, "/events/team")
                tabs.start_soon(watch, "/events/inbox")
                await anyio.sleep(0.5)
                assert ended == []  # still streaming
                assert (await client.post("/logout", data={"csrf": csrf})).status_code == 303
        assert sorted(r.text.split("\n", 1)[0] for r in ended) == ["event: inbox", "event: team"]


async def test_only_wrong_tokens_count_toward_the_login_limit(team: Path) -> None:
    app = console_app(Workspace(team), host="127.0.0.1", token=TOKEN)
    async with asgi_client(app) as client:
        csrf = _field((await client.get("/login")).text, "csrf")

        async def log_in(token: str) -> int:
            return (await client.post("/login", data={"csrf": csrf, "token": token})).status_code

        for _ in range(8):  # a person logging in again and again never waits
            assert await log_in(TOKEN) == 303
        for _ in range(5):
            assert await log_in("not-the-token-at-all") == 401
        assert await log_in(TOKEN) == 429  # the wrong ones used the tries up: the right one waits


async def test_the_pages_say_what_a_request_is_about_and_when_they_were_drawn(
    console: httpx.AsyncClient,
) -> None:
    listing = await console.get("/requests")
    assert "<th>scope</th>" in listing.text and "<td>Write the launch note</td>" in listing.text
    assert f"Quote {SCRIPT_TAG}" not in listing.text  # escaped, as everywhere
    one = await console.get("/requests/req-2")
    assert '<p class="scope">Quote &lt;script&gt;alert(1)&lt;/script&gt; as text</p>' in one.text
    timeline = one.text.split("<h2>Timeline</h2>", 1)[1]
    assert re.search(
        r'<td>0</td><td><time datetime="[^"]+" title="[^"]+">[^<]+ ago</time>', timeline
    )
    for path in ("/requests", "/requests/req-1", "/inbox/req-1"):
        page = (await console.get(path)).text
        assert re.search(r'Drawn at <time datetime="[^"]+">[^<]+</time> · <a href="">refresh', page)


async def test_a_long_summary_is_counted_and_refused_with_why_never_cut(
    console: httpx.AsyncClient,
) -> None:
    form = (await console.get("/inbox/req-1")).text
    assert 'data-count="summary"' in form and "maxlength" not in form
    long = "x" * 2345
    fields = {"csrf": _field(form, "csrf"), "role": "approver", "status": "completed",
              "summary": long, "next_role": "(nobody)",
              "envelope_id": _field(form, "envelope_id")}  # fmt: skip
    refused = await console.post("/inbox/req-1/answer", data=fields)
    assert refused.status_code == 400
    assert "the summary is 2,345 characters, over the form&#x27;s 2,000" in refused.text
    assert f">{long}</textarea>" in refused.text  # given back whole, to shorten


async def test_a_post_after_the_session_ended_comes_back_to_the_form(team: Path) -> None:
    app = console_app(Workspace(team), host="127.0.0.1", token=TOKEN)
    async with asgi_client(app) as client:
        sent = await client.post("/inbox/req-1/answer", data={"summary": "typed"})
        assert sent.headers["location"] == "/login?next=%2Finbox%2Freq-1%2Fanswer"
        login = await client.get(sent.headers["location"])
        assert "Your session had ended, so the answer was not sent" in login.text
