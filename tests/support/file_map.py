"""The file map of docs/architecture.md, made from the modules' own docstrings.

The map stands between two markers in the page; ``just docs`` writes it anew, and
``tests/test_docs.py`` fails when the page's map is not what the modules say. Each line is a
module and the first sentence of its docstring, so the map changes when a module does.

Run as a script: ``python tests/support/file_map.py [--write]`` prints the map (or writes it).
"""

from __future__ import annotations

import ast
import re
import sys
import textwrap
from pathlib import Path

__all__ = ["BEGIN", "END", "file_map", "page_with_map"]

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "architecture.md"
BEGIN = "<!-- file-map: begin (made by `just docs` from the docstrings; do not edit) -->"
END = "<!-- file-map: end -->"
# The layers from the top down, as the import rule orders them; a folder's sub-folders follow
# their modules.
_TOP = ["cli", "demo.py", "monitoring", "actors", "storage", "policy", "codecs", "exceptions.py"]
_WIDTH = 100
_NAME_COLUMN = 28


def _summary(path: Path) -> str:
    """The first sentence of the module's docstring, on one line."""
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    paragraph = " ".join(doc.split("\n\n")[0].split())
    match = re.match(r"(.+?\.)(\s|$)", paragraph)
    sentence = match.group(1) if match else paragraph
    return sentence.rstrip(":.")


def _entry(depth: int, name: str, summary: str) -> list[str]:
    indent = "  " * depth
    head = f"{indent}{name}".ljust(_NAME_COLUMN + 2 * depth)
    if len(head) > _NAME_COLUMN + 2 * depth:
        head += " "
    return textwrap.wrap(
        summary,
        width=_WIDTH,
        initial_indent=head,
        subsequent_indent=" " * len(head),
        break_on_hyphens=False,
    ) or [head.rstrip()]


def _folder(path: Path, depth: int) -> list[str]:
    lines = _entry(depth, f"{path.name}/", _summary(path / "__init__.py"))
    modules = sorted(p for p in path.glob("*.py") if p.name != "__init__.py")
    for module in modules:
        lines += _entry(depth + 1, module.name, _summary(module))
    for sub in sorted(p for p in path.iterdir() if (p / "__init__.py").is_file()):
        lines += _folder(sub, depth + 1)
    return lines


def file_map() -> str:
    """The map: every folder and module of the package, top layer first."""
    lines: list[str] = []
    for name in _TOP:
        path = ROOT / name
        lines += _folder(path, 0) if path.is_dir() else _entry(0, name, _summary(path))
    return "```\n" + "\n".join(lines) + "\n```"


def page_with_map(page: str) -> str:
    """``page`` with the text between the markers replaced by the map."""
    before, rest = page.split(BEGIN, 1)
    _, after = rest.split(END, 1)
    return f"{before}{BEGIN}\n{file_map()}\n{END}{after}"


if __name__ == "__main__":
    if sys.argv[1:] == ["--write"]:
        PAGE.write_text(page_with_map(PAGE.read_text(encoding="utf-8")), encoding="utf-8")
    else:
        print(file_map())
