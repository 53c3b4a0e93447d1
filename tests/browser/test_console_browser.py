"""The web console in a real browser (Debian's chromium, headless, driven by Playwright): a
person answers the waiting draft from the inbox's form, a compacted request shows a prompt
and its receipt, and a payload holding a script tag shows as text, no dialog opened.

Run by ``just test-browser`` (``pytest --browser``), never by ``just test``: a machine without
a browser still passes the suite. Here a browser that cannot start is a failure, never a skip.
"""

from __future__ import annotations

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


@pytest.fixture
def console(tmp_path: Path, fake_model: Path) -> Iterator[str]:
    """``teams-runtime serve`` on the writer/reviewer/approver team (and a compacted
    ``req-3``), as a real process on a free loopback port: its URL."""
    root = console_team(tmp_path / "ws", fake_model)
    compacted_request(root)
    server = subprocess.Popen(
        [sys.executable, "-m", "teams_runtime", "serve", "--workspace", str(root), "--port", "0"],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )
    try:
        said = stderr_until(server, "Uvicorn running on http://127.0.0.1:", 30)
        found = re.search(r"http://127\.0\.0\.1:(\d+)", said)
        assert found is not None, said
        yield f"http://127.0.0.1:{found.group(1)}"
    finally:
        server.send_signal(signal.SIGINT)
        server.communicate(timeout=30)


@pytest.fixture
def page(console: str) -> Iterator[Page]:
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
        opened = browser.new_page(viewport={"width": 1100, "height": 760})
        opened.on("dialog", refuse)
        yield opened
        browser.close()
    assert dialogs == [], f"the page opened a dialog: {dialogs}"


def test_a_person_answers_the_waiting_draft_from_the_inbox(console: str, page: Page) -> None:
    page.goto(f"{console}/inbox")
    row = page.locator("tbody tr", has_text="req-1")
    expect(row).to_contain_text("approver")
    expect(row).to_contain_text("reviewer")  # from whom the draft came
    row.get_by_role("link", name="req-1").click()
    expect(page.locator("h1")).to_have_text("Waiting: req-1 for approver")
    expect(page.locator("pre").last).to_contain_text("Approve the reviewed draft")
    form = page.locator("form.answer")
    form.locator("select[name=status]").select_option("completed")
    form.locator("textarea[name=summary]").fill("Approved: ship the launch note.")
    form.locator("select[name=next_role]").select_option("")  # nobody: it ends with the status
    screenshot = os.environ.get(SCREENSHOT_ENV)
    if screenshot:
        page.screenshot(path=screenshot)
    page.get_by_role("button", name="Answer").click()
    expect(page.get_by_role("status")).to_have_text(
        "Recorded the approver answer to req-1 (completed); the request is completed."
    )
    page.get_by_role("link", name="the request").click()
    expect(page.locator("h1")).to_have_text("Request req-1")
    expect(page.locator("table").first.locator("td").first).to_have_text("completed")
    result = page.locator("section").filter(has=page.get_by_role("heading", name="Result"))
    expect(result).to_contain_text("Approved: ship the launch note.")
    page.goto(f"{console}/inbox")
    expect(page.locator("main")).to_contain_text("No answer waits.")


def test_a_compacted_request_shows_a_prompt_and_its_receipt(console: str, page: Page) -> None:
    page.goto(f"{console}/requests/req-3")
    page.locator("select[name=role]").select_option("reviewer")
    page.get_by_role("button", name="Show").click()
    expect(page).to_have_url(f"{console}/requests/req-3?role=reviewer")
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
