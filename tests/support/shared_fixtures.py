"""Finding the files the project shares with its design (``../shared/fixtures`` beside the
project root), from any checkout: the main one, a worktree, a fresh clone."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["SHARED_FIXTURES_VARIABLE", "shared_fixture"]

# Where to look when the checkout has no `shared` folder beside it (a worktree elsewhere).
SHARED_FIXTURES_VARIABLE = "TEAMS_RUNTIME_SHARED_FIXTURES"


def shared_fixture(name: str) -> Path:
    """The path of the shared fixture ``name``: in ``shared/fixtures`` beside the project
    root (tests/support/ is in the root), else in the folder ``$TEAMS_RUNTIME_SHARED_FIXTURES``
    names. Missing from both: an ``AssertionError`` saying where it was looked for."""
    beside = Path(os.path.abspath(__file__)).parents[3] / "shared" / "fixtures"
    places = [beside]
    if os.environ.get(SHARED_FIXTURES_VARIABLE):
        places.append(Path(os.environ[SHARED_FIXTURES_VARIABLE]))
    for folder in places:
        if (folder / name).is_file():
            return folder / name
    raise AssertionError(
        f"shared fixture {name} not found in {' or '.join(map(str, places))}; set "
        f"{SHARED_FIXTURES_VARIABLE} to the folder holding it"
    )
