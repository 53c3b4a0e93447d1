"""Where the tests find the project and the programs they run, from any test folder."""

from __future__ import annotations

from pathlib import Path

__all__ = ["FAKE_MODEL", "PROJECT_ROOT", "package_modules"]

# tests/support/paths.py: the project root (the package) is two folders up.
PROJECT_ROOT = Path(__file__).resolve().parents[2]
# The model CLI the tests run as a subprocess (see its docstring for its modes).
FAKE_MODEL = Path(__file__).resolve().with_name("fake_model.py")


def package_modules() -> list[Path]:
    """Every module of the package: the root's own and those of its sub-packages (a folder
    with an ``__init__.py``), never the tests, nor what else a checkout holds (a virtualenv
    made in it, ``build/``)."""
    modules = list(PROJECT_ROOT.glob("*.py"))
    for folder in PROJECT_ROOT.iterdir():
        if folder.is_dir() and folder.name != "tests" and (folder / "__init__.py").is_file():
            modules += folder.rglob("*.py")
    return sorted(modules)
