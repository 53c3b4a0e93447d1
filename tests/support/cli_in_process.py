"""Running the CLI in the test's own process, its output captured by pytest's ``capsys``."""

from __future__ import annotations

from pathlib import Path

import pytest

from teams_runtime.cli import main
from teams_runtime.codecs.config import NatsSettings


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """The exit status, standard output and standard error of ``teams-runtime ARGV...``;
    argparse's own errors exit through ``SystemExit``."""
    try:
        status = main(list(argv))
    except SystemExit as exit_:
        status = int(exit_.code or 0)
    out, err = capsys.readouterr()
    return status, out, err


def init_nats_workspace(root: Path, settings: NatsSettings) -> Path:
    """``teams-runtime init ROOT --backend nats`` for ``settings`` (a server's, with the
    test's own prefix: a team of its own on a shared server)."""
    assert main(["init", str(root), "--backend", "nats", "--nats-url", settings.url]) == 0
    config = root / "team_runtime.yaml"
    config.write_text(config.read_text().replace("prefix: teams", f"prefix: {settings.prefix}"))
    return root
