"""How to install one of the package's extras, said for the way the package itself was
installed: a checkout (``pip install -e``) gets its folder, a wheel file (or a folder
installed without ``-e``) its path, an install from an index the package's name."""

from __future__ import annotations

import json
from importlib import metadata
from urllib.parse import unquote, urlsplit

__all__ = ["DISTRIBUTION", "extra_install_command"]

DISTRIBUTION = "teams-runtime"


def _installed_from() -> tuple[str, str]:
    """``("checkout", path)`` (installed with ``-e``), ``("file", path)`` (a folder or a
    wheel file) or ``("index", "")``: where pip took the package from, as its
    ``direct_url.json`` (PEP 610) says."""
    try:
        text = metadata.distribution(DISTRIBUTION).read_text("direct_url.json")
        origin = json.loads(text) if text else {}
    except (metadata.PackageNotFoundError, ValueError, OSError):
        return "index", ""
    url = origin.get("url", "") if isinstance(origin, dict) else ""
    parts = urlsplit(url) if isinstance(url, str) else None
    if parts is None or parts.scheme != "file":
        return "index", ""  # an index, or a VCS or web URL: the name finds it again
    path = unquote(parts.path)
    dir_info = origin.get("dir_info")
    editable = isinstance(dir_info, dict) and dir_info.get("editable") is True
    return ("checkout", path) if editable else ("file", path)


def extra_install_command(extra: str) -> str:
    """The ``pip install`` that adds ``extra`` to this installation."""
    kind, path = _installed_from()
    match kind:
        case "checkout":
            return f"pip install -e '{path}[{extra}]'"
        case "file":
            return f"pip install '{path}[{extra}]'"
    return f"pip install '{DISTRIBUTION}[{extra}]'"
