from __future__ import annotations

import codecs
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import teams_runtime.codecs

from .support.paths import package_modules

ROOT = Path(__file__).resolve().parent.parent


def test_codecs_never_shadows_the_standard_library() -> None:
    assert codecs.lookup("utf-8").name == "utf-8"
    assert Path(codecs.__file__).parent != ROOT
    assert Path(teams_runtime.codecs.__file__).resolve().parent == ROOT / "codecs"


def test_wheel_ships_the_package_without_tests(tmp_path: Path) -> None:
    # Build from a copy: setuptools leaves build/ behind in the folder it builds.
    source = tmp_path / "src"
    shutil.copytree(
        ROOT, source, ignore=shutil.ignore_patterns(".*", "build", "*.egg-info", "__pycache__")
    )
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
         "-w", str(tmp_path), str(source)],
        check=True, capture_output=True,
    )  # fmt: skip
    (wheel,) = tmp_path.glob("teams_runtime-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    # Every module of the package ships (a sub-package missing from pyproject's list would not).
    modules = {f"teams_runtime/{path.relative_to(ROOT).as_posix()}" for path in package_modules()}
    assert modules - set(names) == set()
    assert "teams_runtime/py.typed" in names
    # The license as PEP 639 has it: an SPDX expression, and the file itself in the wheel.
    version = wheel.name.split("-")[1]
    assert f"teams_runtime-{version}.dist-info/licenses/LICENSE" in names
    metadata = zipfile.ZipFile(wheel).read(f"teams_runtime-{version}.dist-info/METADATA")
    assert b"\nLicense-Expression: MIT\n" in metadata
    assert b"\nClassifier: Typing :: Typed\n" in metadata
    stray = [name for name in names if "/tests/" in name or name.startswith(("tests/", "codecs/"))]
    assert stray == []
