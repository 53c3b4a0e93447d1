"""The shell and Python blocks of README.md and docs/*.md run as a reader would paste them.

Every fenced ``sh``, ``bash``, ``console`` or ``python`` block of a page runs, in order, in one
bash session that starts in an empty temporary folder (so ``cd my-ws`` in one block holds for
the next, as in the reader's terminal); the session fails at the first command that fails. In a
``console`` block, lines starting with ``$ `` are commands and the lines after one are its
expected output, compared exactly (trailing spaces aside). A ``python`` block is a program of
its own, run by this interpreter in the session's folder (as ``python example.py`` there).

A block that needs something the test cannot have (a real model, a NATS server, a ``run``
that serves until Ctrl-C, a package install) is marked on the line just before its fence::

    <!-- docs-test: skip (needs a real model) -->

``teams-runtime`` on the session's PATH runs the package under test with this interpreter.
"""

from __future__ import annotations

import os
import re
import shlex
import stat
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from teams_runtime.codecs.config import parse_team_config
from teams_runtime.codecs.model._replies import TokenUsage
from teams_runtime.codecs.prompt_records import decode_prompt_record
from teams_runtime.codecs.roles import ROLES
from teams_runtime.policy.pricing import call_cost, rate_card_notes

from .support.file_map import page_with_map

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
RUN_LANGUAGES = {"sh", "bash", "console", "python"}
SKIP_MARKER = re.compile(r"<!--\s*docs-test:\s*skip\s*\((?P<reason>[^)]+)\)\s*-->")
_FENCE = re.compile(r"^```(?P<language>[\w-]*)\s*$")


@dataclass(frozen=True)
class Block:
    """One fenced block: where it starts (1-based line of the fence), its language and text."""

    line: int
    language: str
    text: str
    skip: str  # the reason given by a skip marker, "" if it runs


def blocks_of(page: str) -> list[Block]:
    """The fenced blocks of a Markdown page, with the skip marker of each."""
    lines = page.splitlines()
    found: list[Block] = []
    number = 0
    while number < len(lines):
        opening = _FENCE.match(lines[number])
        if opening is None:
            number += 1
            continue
        end = number + 1
        while end < len(lines) and lines[end].rstrip() != "```":
            end += 1
        before = next((text for text in reversed(lines[:number]) if text.strip()), "")
        marker = SKIP_MARKER.search(before)
        found.append(
            Block(
                line=number + 1,
                language=opening["language"],
                text="\n".join(lines[number + 1 : end]),
                skip=marker["reason"] if marker else "",
            )
        )
        number = end + 1
    return found


def _console_script(block: Block) -> str:
    """A console block as bash: run each ``$`` command, then compare what it printed."""
    script: list[str] = []
    command: list[str] = []
    expected: list[str] = []

    def flush() -> None:
        if not command:
            return
        script.append(f'{" ".join(command)} > "$DOCS_TEST_OUT"')
        script.append(
            "diff --ignore-trailing-space -u - \"$DOCS_TEST_OUT\" <<'__DOCS_TEST_EXPECTED__'"
        )
        script.extend([*expected, "__DOCS_TEST_EXPECTED__"])
        command.clear()
        expected.clear()

    for text in block.text.splitlines():
        if text.startswith("$ "):
            flush()
            command.append(text[2:])
        elif command and command[-1].endswith("\\") and not expected:
            command.append(text)
        elif command:
            expected.append(text)
    flush()
    return "\n".join(script)


def _python_script(block: Block) -> str:
    """A python block as bash: the block, as it is, run as a program by this interpreter."""
    end = "__DOCS_TEST_PYTHON__"
    return f"{shlex.quote(sys.executable)} - <<'{end}'\n{block.text}\n{end}"


def session_script(page: Path) -> str:
    """The bash session that runs a page's blocks; a failure names the block's line."""
    parts = [
        "set -eo pipefail",
        f"trap 'echo \"docs-test: {page.name}: the block at line $DOCS_TEST_LINE failed\" >&2' ERR",
    ]
    for block in blocks_of(page.read_text(encoding="utf-8")):
        if block.language not in RUN_LANGUAGES or block.skip:
            continue
        body = block.text
        if block.language == "console":
            body = _console_script(block)
        elif block.language == "python":
            body = _python_script(block)
        parts += [f"DOCS_TEST_LINE={block.line}", body]
    return "\n".join(parts) + "\n"


@pytest.fixture
def reader_path(tmp_path: Path) -> dict[str, str]:
    """An environment whose ``teams-runtime`` is the package under test."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "teams-runtime"
    script.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m teams_runtime "$@"\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    environment = {key: value for key, value in os.environ.items() if key != "PYTEST_CURRENT_TEST"}
    environment["PATH"] = f"{bin_dir}{os.pathsep}{environment.get('PATH', '')}"
    environment["DOCS_TEST_OUT"] = str(tmp_path / "console-output.txt")
    environment["NO_COLOR"] = "1"
    environment["HOME"] = str(tmp_path / "home")  # `~` in a block stays inside the test
    return environment


def test_blocks_are_found_with_their_markers() -> None:
    page = "\n".join(
        [
            "```sh",
            "echo one",
            "```",
            "<!-- docs-test: skip (needs a real model) -->",
            "",
            "```bash",
            "echo two",
            "```",
            "```json",
            "{}",
            "```",
        ]
    )
    assert blocks_of(page) == [
        Block(line=1, language="sh", text="echo one", skip=""),
        Block(line=6, language="bash", text="echo two", skip="needs a real model"),
        Block(line=9, language="json", text="{}", skip=""),
    ]


def test_a_console_block_compares_what_the_command_printed(
    tmp_path: Path, reader_path: dict[str, str]
) -> None:
    page = tmp_path / "page.md"
    page.write_text("```console\n$ printf 'a\\nb\\n'\na\nb\n$ echo c\nc\n```\n")
    work = tmp_path / "work"
    work.mkdir()
    run = subprocess.run(["bash", "-c", session_script(page)], cwd=work, env=reader_path)
    assert run.returncode == 0
    page.write_text("```console\n$ echo c\nd\n```\n")
    run = subprocess.run(
        ["bash", "-c", session_script(page)],
        cwd=work,
        env=reader_path,
        capture_output=True,
        text=True,
    )
    assert run.returncode != 0
    assert "docs-test: page.md: the block at line 1 failed" in run.stderr


def test_a_python_block_runs_as_a_program_in_the_session(
    tmp_path: Path, reader_path: dict[str, str]
) -> None:
    """In the session's folder (a file an earlier block made is there), by this interpreter;
    its failure fails the session, naming its line."""
    page = tmp_path / "page.md"
    page.write_text(
        "```sh\nmkdir ws && cd ws && echo 7 > n\n```\n\n"
        "```python\nimport sys\nfrom pathlib import Path\n\n"
        "assert sys.executable == " + repr(sys.executable) + "\n"
        "Path('m').write_text(str(int(Path('n').read_text()) * 6))\n```\n\n"
        "```console\n$ cat m\n42\n```\n\n"
        "```python\nraise SystemExit(3)\n```\n"
    )
    work = tmp_path / "work"
    work.mkdir()
    run = subprocess.run(
        ["bash", "-c", session_script(page)],
        cwd=work,
        env=reader_path,
        capture_output=True,
        text=True,
    )
    assert (work / "ws" / "m").read_text() == "42"
    assert run.returncode == 3
    assert "docs-test: page.md: the block at line 18 failed" in run.stderr


@pytest.mark.long
@pytest.mark.parametrize("page", [pytest.param(page, id=page.name) for page in PAGES])
def test_shell_blocks_run_as_written(
    page: Path, tmp_path: Path, reader_path: dict[str, str]
) -> None:
    work = tmp_path / "reader"
    work.mkdir()
    run = subprocess.run(
        ["bash", "-c", session_script(page)],
        cwd=work,
        env=reader_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, (
        f"{page.relative_to(ROOT)}: a block failed (exit {run.returncode})\n"
        f"--- stdout\n{run.stdout[-4000:]}\n--- stderr\n{run.stderr[-4000:]}"
    )


# --- doc claims that follow from the code --------------------------------------------------


def _fenced(page: str, language: str, after: str) -> str:
    """The text of the first ``language`` block of ``page`` (under docs/) after ``after``."""
    text = (ROOT / "docs" / page).read_text(encoding="utf-8")
    start = text.index(after)
    return next(block.text for block in blocks_of(text[start:]) if block.language == language)


def test_the_example_record_costs_what_the_example_card_says() -> None:
    """monitoring.md's example record, priced by configuration.md's example card for its
    model, costs exactly its cost_usd."""
    record = decode_prompt_record(_fenced("monitoring.md", "json", "## The structured records"))
    config = parse_team_config(
        _fenced("configuration.md", "yaml", "### `telemetry`"), "team_runtime.yaml"
    )
    assert record.model is not None and record.prompt_tokens is not None
    usage = TokenUsage(
        prompt_tokens=record.prompt_tokens,
        completion_tokens=record.completion_tokens or 0,
        cached_prompt_tokens=record.cached_prompt_tokens,
    )
    card = config.telemetry.rate_cards[record.model]
    assert record.cost_usd == pytest.approx(call_cost(card, usage, answered=True), rel=1e-12)


def test_the_example_rate_cards_match_the_example_models() -> None:
    """configuration.md's telemetry example prices every role (config notes nothing); without
    its `provider: local`, config notes what the page shows."""
    text = _fenced("configuration.md", "yaml", "### `telemetry`")
    config = parse_team_config(text, "team_runtime.yaml")
    assert rate_card_notes(config, ROLES) == []
    shown = _fenced("configuration.md", "", "cards match no role's model and which roles")
    without = parse_team_config(text.replace(", provider: local", ""), "team_runtime.yaml")
    assert [f"teams-runtime: note: {note}" for note in rate_card_notes(without, ROLES)] == (
        shown.splitlines()
    )


def test_the_file_map_is_what_the_modules_say() -> None:
    page = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    # `just docs` writes it anew; a module added, moved or redescribed changes it.
    assert page == page_with_map(page), "docs/architecture.md's file map is stale: run just docs"


def test_the_python_pages_first_example_prints_what_the_page_says(tmp_path: Path) -> None:
    """python.md's submit-run-wait example, in a workspace as `init` makes it, prints the
    lines the page shows under it."""
    example = _fenced("python.md", "python", "## Submit, run, wait, read")
    shown = _fenced("python.md", "", "It prints:")
    init = subprocess.run(
        [sys.executable, "-m", "teams_runtime", "init", "app-ws"], cwd=tmp_path, check=False
    )
    assert init.returncode == 0
    run = subprocess.run(
        [sys.executable, "-c", example],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout == shown + "\n"
