"""The data files tests read: all under ``tests/fixtures/``, in the repository (a test never
reads a folder outside it; ``tests/test_stand_alone.py`` guards that)."""

from __future__ import annotations

from pathlib import Path

__all__ = ["FIXTURES", "fixture_text"]

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def fixture_text(name: str) -> str:
    """The text of ``tests/fixtures/<name>``."""
    return (FIXTURES / name).read_text(encoding="utf-8")
