"""The house rules (docs/architecture.md, "The house"): folders by concern with at most twenty
modules each, private modules behind their package, small modules and functions, and typed
data rather than ``dict[str, Any]``."""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

import pytest

from .support.paths import package_modules

ROOT = Path(__file__).resolve().parent.parent
MAX_MODULES_PER_FOLDER = 20
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60
# Lines of the package that say `dict[str, Any]`: data with a known shape has a type of its own
# (a Struct, a TypedDict, a Literal); free-form JSON is `codecs.formats.JsonObject`.
MAX_UNTYPED_DICTS = 40


def _package_modules() -> list[Path]:
    return package_modules()


def _dotted(path: Path) -> str:
    parts = ("teams_runtime", *path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_no_folder_holds_more_than_twenty_modules() -> None:
    per_folder = Counter(path.parent.relative_to(ROOT).as_posix() for path in _package_modules())
    over = {f: n for f, n in per_folder.items() if n > MAX_MODULES_PER_FOLDER}
    assert over == {}


def test_at_least_a_third_of_the_modules_are_private() -> None:
    modules = [p for p in _package_modules() if p.name != "__init__.py"]
    private = [p for p in modules if p.name.startswith("_")]
    assert len(private) * 3 >= len(modules), f"{len(private)} of {len(modules)} private"


def test_a_private_module_is_imported_only_inside_its_package() -> None:
    outside = []
    for path in _package_modules():
        here = _dotted(path)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ImportFrom) or node.level or not node.module:
                continue
            owner, _, last = node.module.rpartition(".")
            if not owner.startswith("teams_runtime") or not last.startswith("_"):
                continue
            if here != owner and not here.startswith(owner + "."):
                outside.append(f"{path.relative_to(ROOT)}: {node.module}")
    assert outside == []


def test_no_module_is_longer_than_four_hundred_lines() -> None:
    long = {
        path.relative_to(ROOT).as_posix(): lines
        for path in _package_modules()
        if (lines := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    }
    assert long == {}


@pytest.mark.parametrize("folder", ["actors", "cli", "codecs", "monitoring", "policy", "storage"])
def test_no_function_is_longer_than_sixty_lines(folder: str) -> None:
    long = {}
    for path in _package_modules():
        if path.relative_to(ROOT).parts[0] != folder:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    long[f"{path.relative_to(ROOT)}:{node.name}"] = length
    assert long == {}


def test_no_more_than_forty_untyped_dicts() -> None:
    untyped = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in _package_modules()
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if "dict[str, Any]" in line
    ]
    assert len(untyped) <= MAX_UNTYPED_DICTS, "\n".join(untyped)
