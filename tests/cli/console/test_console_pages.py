"""What the console's pages say, as a new user reads them (docs/console.md, the pages): the
unknown shown as unknown, an overdue answer's state, the form's bounds, long summaries
clipped, relative times, where a login lands, and refusals of one part that leave the rest."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from pathlib import Path

import anyio.to_thread
import httpx
import pytest

from teams_runtime.cli.console import console_app
from teams_runtime.storage import Workspace

from ...support.console_team import cli, console_team
from ...support.waiting import eventually

pytestmark = pytest.mark.anyio
BASE = "http://127.0.0.1:8765"
TOKEN = "a-console-token-long-enough"


def _client(root: Path, token: str | None = None) -> httpx.AsyncClient:
    app = console_app(Workspace(root), host="127.0.0.1", token=token)
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE)


@pytest.fixture
async def console(team: Path) -> AsyncIterator[httpx.AsyncClient]:
    async with _client(team) as client:
        yield client


def _csrf(page: str) -> str:
    found = re.search(r'name="csrf" content="([^"]+)"', page)
    assert found is not None
    return found.group(1)


async def test_the_metrics_page_says_unknown_where_the_report_says_null(
    console: httpx.AsyncClient,
) -> None:
    page = (await console.get("/metrics")).text  # the fake model: a command, no usage, no card
    for title in ("Input tokens (where the server reported them)", "Cost (USD, where priced)"):
        chart = page.split(f"<h2>{title}</h2>")[1].split("</section>")[0]
        assert chart.count('<em class="note">unknown</em>') == 2, title
        assert "<meter" not in chart and "0.0000" not in chart, title
    # The characters sent and the full history's are drawn on one scale.
    sent = page.split("<h2>Prompt characters sent")[1].split("</section>")[0]
    full = page.split("<h2>Full-history characters")[1].split("</section>")[0]
    assert re.findall(r'max="([^"]+)"', sent) == re.findall(r'max="([^"]+)"', full)


@pytest.fixture
def overdue_team(tmp_path: Path, fake_model: Path) -> Path:
    """The team, its approver given a second to answer."""
    return console_team(tmp_path / "ws", fake_model, answer_within=1)


async def test_an_overdue_answer_shows_its_state_and_why_an_answer_is_refused(
    overdue_team: Path,
) -> None:
    async with _client(overdue_team) as console:

        async def overdue() -> bool:
            return bool((await console.get("/api/inbox")).json()["waiting"][0]["overdue"])

        await eventually(overdue, "req-1's answer_within to run out", 30)
        page = await console.get("/inbox/req-1")
        assert page.status_code == 200
        assert "Overdue: no answer came within its answer_within" in page.text
        assert "on_failure is fail: the request fails, so an answer now is refused" in page.text
        assert "<button>Apply on_failure</button>" in page.text
        assert 'class="answer"' not in page.text  # no form for an answer that cannot be recorded
        fields = {"csrf": _csrf(page.text), "role": "approver", "status": "completed",
                  "summary": "Too late.", "next_role": "(nobody)"}  # fmt: skip
        late = await console.post("/inbox/req-1/answer", data=fields)
        assert late.status_code == 409
        assert "request req-1 failed: no answer came within its answer_within" in late.text
        assert (await console.get("/inbox/req-1/answer")).headers["location"] == "/inbox/req-1"


async def test_the_form_bounds_its_fields_and_says_so(
    team: Path, console: httpx.AsyncClient
) -> None:
    page = await console.get("/inbox/req-1")
    # No hard cut (a long paste's end dropped unseen): a live count, and the refusal's why.
    assert 'name="summary" required rows="3">' in page.text
    assert 'data-count="summary" data-unit="characters" data-most="2000"' in page.text
    assert 'name="output" rows="6">' in page.text
    assert 'data-count="output" data-unit="bytes as JSON" data-most="65536"' in page.text
    fields = {"csrf": _csrf(page.text), "role": "approver", "status": "completed",
              "summary": "Approved.", "next_role": "(nobody)"}  # fmt: skip
    long = await console.post("/inbox/req-1/answer", data={**fields, "summary": "x" * 2001})
    assert long.status_code == 400
    assert "the summary is 2,001 characters, over the form&#x27;s 2,000" in long.text
    big = await console.post("/inbox/req-1/answer", data={**fields, "output": "y" * 70_000})
    assert big.status_code == 400
    assert "the output is 70,002 bytes as JSON, over the contract&#x27;s 65,536" in big.text
    assert (await console.get("/api/inbox")).json()["waiting"][0]["request_id"] == "req-1"
    # GET on the form's address (a refused answer's page, reloaded): back to the form.
    again = await console.get("/inbox/req-1/answer?role=approver")
    assert (again.status_code, again.headers["location"]) == (303, "/inbox/req-1?role=approver")
    done = await console.post("/inbox/req-1/answer", data={**fields, "output": "The note."})
    assert done.status_code == 303
    record = json.loads(await anyio.to_thread.run_sync(lambda: cli(team, "export", "req-1")))
    assert record["result"]["output"] == "The note."


async def test_the_request_page_clips_long_summaries_and_names_a_latest_result(
    team: Path, console: httpx.AsyncClient
) -> None:
    notes = team / "long.jsonl"
    notes.write_text(json.dumps({"type": "note", "actor": "reviewer", "summary": "z" * 1000}))
    await anyio.to_thread.run_sync(lambda: cli(team, "append", "req-1", "--from", str(notes)))
    page = (await console.get("/requests/req-1")).text
    timeline = page.split("<h2>Timeline</h2>")[1].split("</section>")[0]
    assert (
        "z" * 240 + '… <a class="clipped" href="/api/requests/req-1">(1,000 characters' in timeline
    )
    assert "z" * 241 not in timeline
    assert "<h2>Latest result (reviewer)</h2>" in page  # in progress: the approver has it
    assert 'action="/requests/req-1#prompt-of"' in page and 'id="prompt-of"' in page


async def test_a_role_the_team_lacks_refuses_only_the_prompt(console: httpx.AsyncClient) -> None:
    page = await console.get("/requests/req-1?role=bogus")
    assert page.status_code == 200
    assert "<h2>Timeline</h2>" in page.text
    assert "unknown role &#x27;bogus&#x27;" in page.text
    assert "roles are: writer, reviewer, approver" in page.text


async def test_the_team_and_the_inbox_say_times_as_the_commands_do(
    console: httpx.AsyncClient,
) -> None:
    team = (await console.get("/")).text
    # Only the openai backend has a server: a command's, a person's roles show none.
    assert "<td>approver</td><td>human: a person answers (inbox)</td><td>-</td>" in team
    assert "<td>writer</td><td>command: python" in team.replace("python3", "python")
    inbox = (await console.get("/inbox")).text
    assert re.search(r'<td><time datetime="[^"]+" title="[^"]+">\d+s</time></td><td>-</td>', inbox)
    assert 'data-live="/events/inbox" data-event="inbox"' in inbox
    assert "Drawn at <time" in inbox and "redrawn live as it changes" in inbox


async def test_a_login_lands_where_it_was_going_and_only_there(team: Path) -> None:
    async with _client(team, TOKEN) as client:
        icon = await client.get("/favicon.ico")  # served before the login: no 404 in a tab
        assert icon.status_code == 200 and icon.headers["content-type"] == "image/svg+xml"
        sent = await client.get("/inbox/req-1?role=approver")
        assert sent.headers["location"] == "/login?next=%2Finbox%2Freq-1%3Frole%3Dapprover"
        login = await client.get(sent.headers["location"])
        assert '<input type="hidden" name="next" value="/inbox/req-1?role=approver">' in login.text
        csrf = _csrf(login.text)
        for wanted, lands in (("//evil.example/x", "/"), ("https://evil.example", "/"),
                              ("/\\evil.example", "/"), ("/inbox/req-1?role=approver",
                              "/inbox/req-1?role=approver")):  # fmt: skip
            done = await client.post("/login", data={"csrf": csrf, "token": TOKEN, "next": wanted})
            assert (done.status_code, done.headers["location"]) == (303, lands), wanted
