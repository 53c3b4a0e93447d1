"""Running the CLI in the test's own process, its output captured by pytest's ``capsys``."""

from __future__ import annotations

import pytest

from teams_runtime.cli import main


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """The exit status, standard output and standard error of ``teams-runtime ARGV...``;
    argparse's own errors exit through ``SystemExit``."""
    try:
        status = main(list(argv))
    except SystemExit as exit_:
        status = int(exit_.code or 0)
    out, err = capsys.readouterr()
    return status, out, err
