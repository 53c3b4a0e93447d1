"""Names imported on first use: a module is imported the first time one of its names is needed.

Two places defer imports with it, so that ``teams-runtime --version`` or ``status`` never loads
the actors, httpx or rich that other work needs:

- the command line's parser (``cli._parser``): a command's module (its flags and the code that
  runs it) is imported only when that command is given;
- the package's ``__init__``: ``from teams_runtime import Team`` imports the actors then
  (``first_use``). Where each name lives is written once, as the imports under
  ``if TYPE_CHECKING:`` that give mypy its type; ``first_use`` reads those lines from the
  source the first time a name is looked up, as scientific Python's ``lazy_loader`` reads a
  stub (SPEC 1), so no second table can drift from them.
"""

from __future__ import annotations

import importlib
import sys
from functools import cache
from typing import Any

__all__ = ["first_use", "imported"]


def imported(module: str, name: str) -> Any:
    """``name`` of ``module``, importing the module now if nothing has yet."""
    return getattr(importlib.import_module(module), name)


def first_use(package: str, name: str) -> Any:
    """``name`` of ``package``, imported from the module the package's ``__init__`` imports it
    from under ``if TYPE_CHECKING:``, and kept as the package's attribute from then on (the
    next read finds it without a call). ``AttributeError`` when it imports no such name."""
    module = _modules_of_names(package).get(name)
    if module is None:
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    value = imported(module, name)
    setattr(sys.modules[package], name, value)
    return value


@cache
def _modules_of_names(package: str) -> dict[str, str]:
    """Each name ``package``'s ``__init__`` imports under ``if TYPE_CHECKING:``, with the module
    it imports it from."""
    import ast  # here: only a program that reads one of these names pays for it (~2 ms)

    spec = sys.modules[package].__spec__
    # The loader's own reading of the source: a file, or a member of a zip archive.
    get_source = getattr(spec.loader, "get_source", None) if spec is not None else None
    source = get_source(package) if get_source is not None else None
    if source is None:
        raise AttributeError(f"module {package!r} has no source to find its names in")
    tree = ast.parse(source)
    return {
        alias.asname or alias.name: node.module
        for block in tree.body
        if isinstance(block, ast.If)
        and isinstance(block.test, ast.Name)
        and block.test.id == "TYPE_CHECKING"
        for node in block.body
        if isinstance(node, ast.ImportFrom) and node.module is not None
        for alias in node.names
    }
