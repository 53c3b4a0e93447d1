"""The web console in a real browser (Debian's chromium, headless, driven by Playwright): a
person answers the waiting draft from the inbox's form (choosing its status: none is chosen
for them), a compacted request shows a prompt and its receipt, a payload holding a script tag
shows as text, no dialog opened; an overdue answer shows its state and the button that
applies it; a login lands where it was going, and a restart says "logged out" on an open page.

Run by ``just test-browser`` (``pytest --browser``), never by ``just test``: a machine without
a browser still passes the suite. Here a browser that cannot start is a failure, never a skip.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Dialog, Page, expect, sync_playwright

from ..support.console_team import SCRIPT_TAG, compacted_request, console_team
from ..support.processes import stderr_until

# Where the browser is: $TEAMS_RUNTIME_CHROMIUM, else Debian's chromium on the PATH.
CHROMIUM_ENV = "TEAMS_RUNTIME_CHROMIUM"
TOKEN_ENV = "TEAMS_RUNTIME_CONSOLE_TOKEN"
TOKEN = "a-console-token-long-enough"
# The page the docs show, written where this names when set (docs/console.md).
SCREENSHOT_ENV = "TEAMS_RUNTIME_CONSOLE_SCREENSHOT"


def _chromium() -> str:
    found = os.environ.get(CHROMIUM_ENV) or shutil.which("chromium") or "/usr/bin/chromium"
    if not Path(found).is_file():
        pytest.fail(
            f"no chromium at {found}: install Debian's (apt-get install -y chromium) or set "
            f"${CHROMIUM_ENV} to a Chromium executable; the browser tests need one."
        )
    return found


def _serve(
    root: Path, port: int = 0, token: str | None = None
) -> tuple[subprocess.Popen[str], str]:
    """``teams-runtime serve`` on ``root`` as a real process on a loopback port (``0``: a free
    one), behind a login when ``token`` is given: the process and its URL."""
    env = (
        {**os.environ, TOKEN_ENV: token}
        if token
        else {k: v for k, v in os.environ.items() if k != TOKEN_ENV}
    )
    server = subprocess.Popen(
        [sys.executable, "-m", "teams_runtime", "serve", "--workspace", str(root),
         "--port", str(port)],
        stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=env,
    )  # fmt: skip
    try:
        said = stderr_until(server, "Uvicorn running on http://127.0.0.1:", 30)
    except BaseException:
        _stop(server)
        raise
    found = re.search(r"http://127\.0\.0\.1:(\d+)", said)
    assert found is not None, said
    return server, f"http://127.0.0.1:{found.group(1)}"


def _stop(server: subprocess.Popen[str]) -> None:
    server.send_signal(signal.SIGINT)
    server.communicate(timeout=30)


@pytest.fixture
def console(tmp_path: Path, fake_model: Path) -> Iterator[str]:
    """``teams-runtime serve`` on the writer/reviewer/approver team (and a compacted
    ``req-3``), as a real process on a free loopback port: its URL."""
    root = console_team(tmp_path / "ws", fake_model)
    compacted_request(root)
    server, url = _serve(root)
    try:
        yield url
    finally:
        _stop(server)


@contextlib.contextmanager
def _chromium_page() -> Iterator[Page]:
    """A headless chromium's page, failing (never skipping) when the browser cannot start;
    any dialog (an ``alert``) it opens fails the test. Started once the workspace is made:
    Playwright's loop then holds this thread, where the commands run their own."""
    # Root (a CI container) cannot use Chromium's sandbox: it refuses to start with it.
    args = ["--no-sandbox"] if os.geteuid() == 0 else []
    dialogs: list[str] = []

    def refuse(dialog: Dialog) -> None:
        dialogs.append(dialog.message)
        dialog.dismiss()

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=_chromium(), args=args)
        # A context of its own, so a test can open a second tab in it (same cookies).
        context = browser.new_context(viewport={"width": 1100, "height": 760})
        opened = context.new_page()
        opened.on("dialog", refuse)
        yield opened
        browser.close()
    assert dialogs == [], f"the page opened a dialog: {dialogs}"


@pytest.fixture
def page(console: str) -> Iterator[Page]:
    """A page for ``console``'s tests."""
    with _chromium_page() as opened:
        yield opened


def test_a_person_answers_the_waiting_draft_from_the_inbox(console: str, page: Page) -> None:
    page.goto(f"{console}/inbox")
    row = page.locator("tbody tr", has_text="req-1")
    expect(row).to_contain_text("approver")
    expect(row).to_contain_text("reviewer")  # from whom the draft came
    row.get_by_role("link", name="req-1").click()
    expect(page.locator("h1")).to_have_text("Waiting: req-1 for approver")
    expect(page.locator("pre").last).to_contain_text("Approve the reviewed draft")
    form = page.locator("form.answer")
    # Nothing is chosen for the person: the browser holds the form back until they choose.
    expect(form.locator("select[name=status]")).to_have_value("")
    form.locator("textarea[name=summary]").fill("Approved: ship the launch note.")
    page.get_by_role("button", name="Answer").click()
    expect(page.locator("h1")).to_have_text("Waiting: req-1 for approver")
    assert form.locator("select[name=status]").evaluate("node => !node.validity.valid")
    form.locator("select[name=status]").select_option("completed")
    form.locator("select[name=next_role]").select_option(
        label="nobody: the request ends with the status"
    )
    screenshot = os.environ.get(SCREENSHOT_ENV)
    if screenshot:
        page.evaluate("window.scrollTo(0, 0)")  # the held-back click scrolled to the status
        page.screenshot(path=screenshot)
    page.get_by_role("button", name="Answer").click()
    # On to the request's page (a redirect: a reload posts nothing again), saying what was done.
    expect(page.locator("h1")).to_have_text("Request req-1")
    expect(page.get_by_role("status")).to_have_text(
        "Recorded the approver answer to req-1 (completed); the request is completed."
    )
    page.go_back()  # the form, consumed: where to go from here
    expect(page.locator("h1")).to_have_text("Nothing waits")
    expect(page.get_by_role("link", name="the inbox")).to_be_visible()
    page.go_forward()
    expect(page.locator("table").first.locator("td").first).to_have_text("completed")
    result = page.locator("section").filter(has=page.get_by_role("heading", name="Result"))
    expect(result).to_contain_text("Approved: ship the launch note.")
    page.goto(f"{console}/inbox")
    expect(page.locator("main")).to_contain_text("No answer waits.")


def test_a_compacted_request_shows_a_prompt_and_its_receipt(console: str, page: Page) -> None:
    page.goto(f"{console}/requests/req-3")
    page.locator("select[name=role]").select_option("reviewer")
    page.get_by_role("button", name="Show").click()
    expect(page).to_have_url(f"{console}/requests/req-3?role=reviewer#prompt-of")
    receipt = page.locator(".receipt")
    expect(receipt).to_contain_text("26 events: 8 included, 18 omitted")
    expect(receipt).to_contain_text('"omitted_events": 18')  # the notice, as prompt --json
    prompt = page.locator("#prompt")
    expect(prompt).to_contain_text("Review round 24")
    expect(prompt).to_contain_text('"summary": "Review round 17"')  # the tail: the last 8
    expect(prompt).not_to_contain_text('"summary": "Review round 16"')  # omitted
    timeline = page.locator("section", has_text="Timeline")
    expect(timeline.locator("tbody tr")).to_have_count(26)
    expect(timeline).to_contain_text("omitted")


def test_a_payload_holding_a_script_tag_shows_as_text(console: str, page: Page) -> None:
    for path, where in (
        ("/requests/req-2?role=writer", "#prompt"),  # the scope, in the writer's prompt
        ("/requests/req-3?role=reviewer", "#prompt"),  # a note's payload
        ("/api/requests/req-3", "body"),
    ):
        page.goto(f"{console}{path}")
        expect(page.locator(where)).to_contain_text(SCRIPT_TAG)
        # The only script in the page is the console's own (none in the JSON's).
        sources = page.locator("script").evaluate_all("nodes => nodes.map(n => n.src)")
        assert all(src.endswith("/static/console.js") for src in sources), path
    page.goto(f"{console}/requests")
    expect(page.locator("tbody tr")).to_have_count(3)


@pytest.fixture
def overdue_team(tmp_path: Path, fake_model: Path) -> Path:
    """The team whose approver has a second to answer."""
    return console_team(tmp_path / "ws", fake_model, answer_within=1)


def test_an_overdue_answer_shows_its_state_and_the_button_applies_it(overdue_team: Path) -> None:
    server, url = _serve(overdue_team)
    try:
        with _chromium_page() as page:
            page.goto(f"{url}/inbox/req-1")
            for _ in range(30):  # its second to answer runs out
                if page.get_by_text("Overdue:").count():
                    break
                page.wait_for_timeout(500)
                page.reload()
            alert = page.get_by_role("alert")
            expect(alert).to_contain_text("Overdue: no answer came within its answer_within")
            expect(alert).to_contain_text("an answer now is refused")
            expect(page.locator("form.answer")).to_have_count(0)
            page.get_by_role("button", name="Apply on_failure").click()
            expect(page.locator("main")).to_contain_text(
                "No answer to req-1 (approver) within its answer_within: the request failed."
            )
            expect(page.locator("main")).to_contain_text("No answer waits.")
    finally:
        _stop(server)


@pytest.fixture
def team(tmp_path: Path, fake_model: Path) -> Path:
    return console_team(tmp_path / "ws", fake_model)


def test_a_login_lands_where_it_was_going_and_a_restart_says_logged_out(team: Path) -> None:
    server, url = _serve(team, token=TOKEN)
    try:
        with _chromium_page() as page:
            page.goto(f"{url}/inbox/req-1?role=approver")
            expect(page.locator("h1")).to_have_text("Log in")
            page.locator("input[name=token]").fill(TOKEN)
            page.get_by_role("button", name="Log in").click()
            expect(page).to_have_url(f"{url}/inbox/req-1?role=approver")
            page.goto(f"{url}/")
            expect(page.locator("#team")).to_contain_text("approver")
            _stop(server)  # a restart logs everyone out: the open page says so
            server, _ = _serve(team, int(url.rsplit(":", 1)[1]), token=TOKEN)
            notice = page.locator("#live-notice")
            expect(notice).to_contain_text(
                "Logged out: this page is no longer updated", timeout=20_000
            )
            notice.get_by_role("link", name="Log in again").click()
            page.locator("input[name=token]").fill(TOKEN)
            page.get_by_role("button", name="Log in").click()
            expect(page).to_have_url(f"{url}/")
            page.get_by_role("button", name="Log out").click()
            expect(page.get_by_role("status")).to_have_text("Logged out.")
    finally:
        _stop(server)


def _run_once(root: Path) -> None:
    """The team's models take what waits (the writer, the reviewer), as `run --once` does."""
    argv = [sys.executable, "-m", "teams_runtime", "run", "--once", "--workspace", str(root)]
    subprocess.run(argv, check=True, capture_output=True, timeout=120)


def test_a_form_open_in_two_tabs_answers_only_the_question_it_shows(team: Path) -> None:
    server, url = _serve(team)
    try:
        with _chromium_page() as first:
            second = first.context.new_page()
            for tab in (first, second):
                tab.goto(f"{url}/inbox/req-1")
            form = first.locator("form.answer")
            form.locator("select[name=status]").select_option("blocked")
            form.locator("textarea[name=summary]").fill("Shorter, please.")
            form.locator("select[name=next_role]").select_option("writer")
            first.get_by_role("button", name="Answer").click()
            expect(first).to_have_url(re.compile(r"/requests/req-1\?answered="))
            expect(first.get_by_role("status")).to_have_text(
                "Recorded the approver answer to req-1 (blocked); handed to writer: "
                "`teams-runtime run` takes it from here."
            )
            # The other tab's form learns it from the inbox's events: it says so, takes nothing.
            gone = second.locator("#live-notice")
            expect(gone).to_contain_text("This question was answered or replaced elsewhere")
            expect(second.locator("button", has_text="Answer")).to_be_disabled()
            _run_once(team)  # the approver is asked again: a new question under req-1
            # A form sent anyway (its fields enabled again by hand) is refused, not recorded on
            # the new question.
            second.evaluate(
                "document.querySelectorAll('form.answer *').forEach(n => n.disabled = false)"
            )
            again = second.locator("form.answer")
            again.locator("select[name=status]").select_option("completed")
            again.locator("textarea[name=summary]").fill("Ship it.")
            again.locator("select[name=next_role]").select_option(
                label="nobody: the request ends with the status"
            )
            second.get_by_role("button", name="Answer").click()
            expect(second.get_by_role("alert").first).to_contain_text(
                "the question you saw was answered; a new one waits: reload"
            )
            second.goto(f"{url}/requests/req-1")
            expect(second.locator("table").first.locator("td").first).to_have_text("in_progress")
    finally:
        _stop(server)


def test_a_logout_in_one_tab_stops_the_live_pages_of_the_others(team: Path) -> None:
    server, url = _serve(team, token=TOKEN)
    try:
        with _chromium_page() as watching:
            watching.goto(f"{url}/")
            watching.locator("input[name=token]").fill(TOKEN)
            watching.get_by_role("button", name="Log in").click()
            expect(watching.locator("#team")).to_contain_text("approver")
            other = watching.context.new_page()
            other.goto(f"{url}/inbox")
            other.get_by_role("button", name="Log out").click()
            expect(other.get_by_role("status")).to_have_text("Logged out.")
            expect(watching.locator("#live-notice")).to_contain_text(
                "Logged out: this page is no longer updated", timeout=20_000
            )
    finally:
        _stop(server)


def test_a_long_summary_is_counted_never_cut_and_a_draft_survives_a_reload(
    console: str, page: Page
) -> None:
    page.goto(f"{console}/inbox/req-1")
    summary = page.locator("textarea[name=summary]")
    count = page.locator("[data-count=summary]")
    expect(count).to_have_text("0 / 2,000 characters")
    summary.fill("x" * 2345)  # a long paste: kept whole, counted, and said to be too long
    assert summary.input_value() == "x" * 2345
    expect(count).to_have_text(
        "2,345 / 2,000 characters: 345 too many, so the answer would be refused"
    )
    expect(count).to_have_class(re.compile(r"\bover\b"))
    page.reload()  # the draft is kept in this tab (a session that ended loses nothing)
    expect(page.locator("textarea[name=summary]")).to_have_value("x" * 2345)
    page.locator("select[name=status]").select_option("completed")
    page.locator("select[name=next_role]").select_option(
        label="nobody: the request ends with the status"
    )
    page.get_by_role("button", name="Answer").click()
    expect(page.get_by_role("alert")).to_contain_text(
        "the summary is 2,345 characters, over the form's 2,000"
    )
