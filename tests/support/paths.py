"""Where the tests find the project and the programs they run, from any test folder."""

from __future__ import annotations

from pathlib import Path

__all__ = ["FAKE_MODEL", "PROJECT_ROOT"]

# tests/support/paths.py: the project root (the package) is two folders up.
PROJECT_ROOT = Path(__file__).resolve().parents[2]
# The model CLI the tests run as a subprocess (see its docstring for its modes).
FAKE_MODEL = Path(__file__).resolve().with_name("fake_model.py")
