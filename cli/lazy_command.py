"""A command's function, imported only when that command runs.

The parser names every command's function but imports none: ``teams-runtime --version`` or
``status`` would otherwise load the whole runtime (the actors, httpx, rich) before doing
anything, and start several times slower than Python itself.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["LazyCommand"]


@dataclass(frozen=True)
class LazyCommand:
    """The function ``function`` of the module ``module``, called with the parsed flags."""

    module: str
    function: str

    def resolve(self) -> Callable[[argparse.Namespace], int]:
        """Import the module and return the function."""
        command: Callable[[argparse.Namespace], int] = getattr(
            importlib.import_module(self.module), self.function
        )
        return command

    def __call__(self, args: argparse.Namespace) -> int:
        """Run the command; its exit status."""
        return self.resolve()(args)
