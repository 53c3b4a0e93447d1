"""Every command says what it does in its own ``--help`` (a description, not only the usage),
and docs/cli.md has a section for it whose heading names every flag the command takes."""

from __future__ import annotations

import re

import pytest

from teams_runtime.cli._parser import command_parsers

from ..support.paths import PROJECT_ROOT

CLI_DOC = PROJECT_ROOT / "docs" / "cli.md"


def _headings() -> dict[str, str]:
    found = re.findall(r"^## `([a-z][a-z-]*)([^`]*)`", CLI_DOC.read_text(encoding="utf-8"), re.M)
    return {name: rest for name, rest in found}


@pytest.mark.parametrize("name", sorted(command_parsers()))
def test_every_command_describes_itself_in_its_help(name: str) -> None:
    command = command_parsers()[name]
    assert command.description is not None and len(command.description.split()) >= 10, name
    shown = "".join(command.format_help().split())  # argparse wraps it, even inside words
    assert "".join(command.description.split()) in shown


@pytest.mark.parametrize("name", sorted(command_parsers()))
def test_docs_cli_has_a_section_naming_every_flag(name: str) -> None:
    heading = _headings().get(name)
    assert heading is not None, f"docs/cli.md has no section `## `{name} ...``"
    flags = {
        option
        for action in command_parsers()[name]._actions
        for option in action.option_strings
        if option.startswith("--") and option != "--help"
    }
    missing = sorted(flag for flag in flags if not re.search(rf"{flag}(?![\w-])", heading))
    assert missing == [], f"the heading of `{name}` in docs/cli.md lacks {missing}"
