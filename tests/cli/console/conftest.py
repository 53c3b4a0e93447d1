"""What the console's tests share: a workspace with a team to watch."""

from __future__ import annotations

from pathlib import Path

import pytest

from ...support.console_team import console_team


@pytest.fixture
def team(tmp_path: Path, fake_model: Path) -> Path:
    return console_team(tmp_path / "ws", fake_model)
