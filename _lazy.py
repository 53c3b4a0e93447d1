"""Names imported on first use: a module is imported the first time one of its names is needed.

The command line's parser uses it: a command's module (its flags and the code that runs it) is
imported only when that command is given, so ``teams-runtime --version`` or ``status`` never
loads the actors, httpx or rich that other commands need.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["imported"]


def imported(module: str, name: str) -> Any:
    """``name`` of ``module``, importing the module now if nothing has yet."""
    return getattr(importlib.import_module(module), name)
