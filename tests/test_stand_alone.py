"""The tests stand on the repository alone: a fresh clone with nothing beside it collects every
test, and no file of the project names a folder outside it."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# What a path out of the repository looks like in the project's own files: the design folder the
# project was specified from sits beside it on the developers' machines, never in a clone.
OUTSIDE = ("../shared", "shared/fixtures", "shared/design")


def _tracked_files() -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.decode()
    return [ROOT / name for name in listed.split("\0") if name and (ROOT / name).is_file()]


def test_no_file_of_the_project_names_a_folder_outside_it() -> None:
    this = Path(__file__).resolve()
    naming = [
        f"{path.relative_to(ROOT)}: {needle}"
        for path in _tracked_files()
        if path != this and path.suffix in {".py", ".toml", ".md", ".yaml", ".yml", ""}
        for needle in OUTSIDE
        if needle in path.read_text(encoding="utf-8", errors="replace")
    ]
    assert naming == []


@pytest.mark.long
def test_a_copy_with_nothing_beside_it_collects_every_test(tmp_path: Path) -> None:
    # Only the tracked files, in a folder of their own: nothing beside it, no build leftovers.
    copy = tmp_path / "alone" / "teams-runtime"
    for path in _tracked_files():
        target = copy / path.relative_to(ROOT)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)
    collected = subprocess.run(
        [sys.executable, "-P", "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"],
        cwd=copy, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert collected.returncode == 0, collected.stdout[-4000:] + collected.stderr[-4000:]
    assert " error" not in collected.stdout.splitlines()[-1]
