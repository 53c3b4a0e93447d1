"""Old public names kept for one release: each still imports and works, with a
``DeprecationWarning`` that names the new one (issue 30, "one word, one meaning")."""

from __future__ import annotations

import sys
import warnings
from collections.abc import Mapping
from typing import Any

__all__ = ["renamed"]


def renamed(module: str, name: str, renames: Mapping[str, str]) -> Any:
    """What ``module`` now calls ``name`` (``renames``: old name to new), with a warning; for a
    module's ``__getattr__``. ``AttributeError`` when ``name`` was never renamed."""
    new = renames.get(name)
    if new is None:
        raise AttributeError(f"module {module!r} has no attribute {name!r}")
    warnings.warn(
        f"{module}.{name} is deprecated: use {module}.{new}", DeprecationWarning, stacklevel=3
    )
    return getattr(sys.modules[module], new)
