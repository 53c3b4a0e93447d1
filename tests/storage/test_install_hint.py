"""The hint for a missing extra (the NATS client) says how to install it for the way the
package was installed: a checkout, a wheel file, or a wheel by name from an index."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from teams_runtime.storage.install_hint import extra_install_command

from ..support.paths import PROJECT_ROOT

_SHOW = (
    "from teams_runtime.storage.install_hint import extra_install_command as c; print(c('nats'))"
)


def test_a_checkout_is_told_to_install_the_extra_into_itself() -> None:
    # The tests run from an editable install (`pip install -e`): its folder is the project's.
    command = extra_install_command("nats")
    assert command.startswith("pip install -e '") and command.endswith("[nats]'")
    folder = Path(command.removeprefix("pip install -e '").removesuffix("[nats]'"))
    assert (folder / "pyproject.toml").is_file()
    assert 'name = "teams-runtime"' in (folder / "pyproject.toml").read_text()


def _wheel(tmp_path: Path) -> Path:
    source = tmp_path / "src"
    shutil.copytree(
        PROJECT_ROOT,
        source,
        ignore=shutil.ignore_patterns(".*", "build", "*.egg-info", "__pycache__"),
    )
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
         "-w", str(tmp_path / "wheels"), str(source)],
        check=True, capture_output=True,
    )  # fmt: skip
    (wheel,) = (tmp_path / "wheels").glob("teams_runtime-*.whl")
    return wheel


def _hint_in(target: Path) -> str:
    """The hint as the package installed in ``target`` gives it (its own code and metadata
    first on the path; its dependencies from this environment)."""
    env = {**os.environ, "PYTHONPATH": str(target)}
    # -P: the current folder (a checkout holding the editable install's egg-info) is not put
    # first on the path, where its metadata would stand in for the installed wheel's.
    done = subprocess.run(
        [sys.executable, "-P", "-c", _SHOW], env=env, check=True, capture_output=True, text=True
    )
    return done.stdout.strip()


def test_a_wheel_is_told_its_file_and_a_named_install_the_name(tmp_path: Path) -> None:
    wheel = _wheel(tmp_path)
    pip = [sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "-q", "--target"]
    subprocess.run([*pip, str(tmp_path / "by-file"), str(wheel)], check=True, capture_output=True)
    assert _hint_in(tmp_path / "by-file") == f"pip install '{wheel}[nats]'"
    subprocess.run(
        [*pip, str(tmp_path / "by-name"), "--find-links", str(wheel.parent), "teams-runtime"],
        check=True, capture_output=True,
    )  # fmt: skip
    assert _hint_in(tmp_path / "by-name") == "pip install 'teams-runtime[nats]'"


def test_a_nats_workspace_without_the_client_is_told_how_to_install_it(tmp_path: Path) -> None:
    # The hint is imported only on this path (it reads the install's metadata): check it runs.
    (tmp_path / "team_runtime.yaml").write_text("backend: {kind: nats}\n")
    block_nats = (
        "import sys; sys.modules['nats'] = None; from teams_runtime.cli import main; "
        f"sys.exit(main(['status', '--workspace', {str(tmp_path)!r}]))"
    )
    done = subprocess.run(
        [sys.executable, "-P", "-c", block_nats], capture_output=True, text=True, check=False
    )
    assert done.returncode == 2
    assert done.stderr.startswith("teams-runtime: error: team_runtime.yaml backend.kind is nats")
    assert "install it with: pip install -e '" in done.stderr and "[nats]'" in done.stderr
