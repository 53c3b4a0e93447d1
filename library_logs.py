"""The library logs nothing until the application turns its logging on.

teams-runtime logs through loguru and adds no sink: an application (the CLI does) calls
``logger.enable("teams_runtime")`` and adds its own. Until then every line of the package must
be switched off, from before the first one can be written.

loguru takes about 40 ms to import (it brings asyncio), longer than ``teams-runtime status``
may take to start, so importing the package must not import it. Instead the switch is
flipped the moment loguru is imported, whoever imports it: at once if it already is, else by
a finder that waits at the head of ``sys.meta_path`` for loguru's import and steps aside after
it. An application that enables the package's logs after importing both (in either order)
keeps them on, as when the package imported loguru itself.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType

__all__ = ["keep_library_logs_quiet"]

_PACKAGE = "teams_runtime"


def _silence(loguru: ModuleType) -> None:
    loguru.logger.disable(_PACKAGE)


class _SilenceWhenImported:
    """A meta path finder that finds nothing itself: it wraps loguru's own loader so that
    loguru's logger is told to keep this package quiet right after loguru is executed."""

    def find_spec(
        self, name: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if name != "loguru":
            return None
        if self in sys.meta_path:
            sys.meta_path.remove(self)  # one import to watch; the finders after us find it
        spec = importlib.util.find_spec(name)
        loader = spec.loader if spec is not None else None
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        execute = loader.exec_module

        def exec_module(module: ModuleType) -> None:
            execute(module)
            _silence(module)

        loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def keep_library_logs_quiet() -> None:
    """Switch the package's log lines off now if loguru is imported, else when it is."""
    loguru = sys.modules.get("loguru")
    if loguru is not None:
        _silence(loguru)
    elif not any(isinstance(finder, _SilenceWhenImported) for finder in sys.meta_path):
        sys.meta_path.insert(0, _SilenceWhenImported())
