"""What starting the command line and importing the package load: only what is used.

Each check runs in a fresh interpreter, since this one has imported everything already. How
long start-up takes is measured in tests/benchmarks/startup.py, not here.
"""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

from teams_runtime.cli import main
from teams_runtime.cli._parser import COMMANDS, command_parsers

# What a command that needs none of them must not load: the HTTP client (and through it its
# own CLI, rich and click), the NATS client, the live view, and any actor.
HEAVY = ("httpx", "nats", "rich", "click", "loguru", "opentelemetry", "teams_runtime.actors")


def _modules_after(code: str, *args: str) -> list[str]:
    """The modules in ``sys.modules`` after ``code`` runs in a fresh interpreter."""
    probe = f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    done = subprocess.run(
        [sys.executable, "-c", probe, *args], capture_output=True, text=True, check=True
    )
    modules: list[str] = json.loads(done.stdout.splitlines()[-1])
    return modules


def _loaded_after(code: str, *args: str) -> list[str]:
    """The heavy modules in ``sys.modules`` after ``code`` runs in a fresh interpreter."""
    modules = _modules_after(code, *args)
    return [name for name in modules if name.split(".")[0] in HEAVY or name.startswith(HEAVY)]


_RUN = "from teams_runtime.cli import main\nimport sys\nmain(sys.argv[1:])"
# --version exits from inside the parser: catch it so the probe still prints.
_RUN_TO_EXIT = f"try:\n    {_RUN.replace(chr(10), chr(10) + '    ')}\nexcept SystemExit:\n    pass"


@pytest.mark.parametrize(
    "code",
    [
        pytest.param("import teams_runtime", id="the-package"),
        pytest.param("import teams_runtime.cli", id="the-cli"),
        pytest.param(
            "from teams_runtime.cli._parser import build_parser; build_parser()", id="its-parser"
        ),
    ],
)
def test_importing_loads_no_client_no_view_and_no_actor(code: str) -> None:
    assert _loaded_after(code) == []


def test_version_and_status_load_no_client_no_view_and_no_actor(tmp_path: Path) -> None:
    assert _loaded_after(_RUN_TO_EXIT, "--version") == []
    assert main(["init", str(tmp_path / "ws")]) == 0
    assert _loaded_after(_RUN, "status", "--workspace", str(tmp_path / "ws")) == []


def test_status_of_an_unchanged_config_loads_no_yaml_nor_what_only_writers_need(
    tmp_path: Path,
) -> None:
    # The first read parses team_runtime.yaml and caches it (storage/_config_cache.py); the
    # next reads it back without PyYAML. Temporary names need no secrets (hmac, OpenSSL).
    assert main(["init", str(tmp_path / "ws")]) == 0
    assert main(["status", "--workspace", str(tmp_path / "ws")]) == 0
    loaded = _modules_after(_RUN, "status", "--workspace", str(tmp_path / "ws"))
    unwanted = ("yaml", "secrets", "hmac", "hashlib", "difflib")
    assert [name for name in loaded if name.split(".")[0] in unwanted] == []


def test_version_loads_no_command_nor_what_commands_need() -> None:
    # Only the parser of cli/: no family module, no flag check, no msgspec, YAML or metadata
    # library (the version is read from the install's METADATA file).
    loaded = _modules_after(_RUN_TO_EXIT, "--version")
    ours = [name for name in loaded if name.startswith("teams_runtime.cli.")]
    assert ours == ["teams_runtime.cli._parser"]
    assert [name for name in loaded if name.split(".")[0] in ("msgspec", "yaml")] == []
    assert "importlib.metadata" not in loaded


def test_other_commands_load_no_web_server() -> None:
    # The console's Starlette and uvicorn come with `serve` only (and the web extra).
    loaded = _modules_after(_RUN_TO_EXIT, "serve", "--help")
    assert [name for name in loaded if name.split(".")[0] in ("starlette", "uvicorn")] == []


def test_every_command_is_declared_by_its_family_with_its_handler() -> None:
    parsers = command_parsers()
    assert list(parsers) == [command.name for command in COMMANDS]
    assert len(parsers) == 21  # with retry, purge-strays, inbox, answer, replay and serve
    for command in COMMANDS:  # the code that runs it sits beside its flags
        handler = parsers[command.name].get_default("handler")
        assert inspect.isfunction(handler), command.name
        assert handler.__module__ == f"teams_runtime.cli.{command.family}", command.name


def test_version_prints_the_installed_version_on_stdout() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "teams_runtime", "--version"], capture_output=True, text=True
    )
    assert (done.returncode, done.stderr) == (0, "")
    # Read from the install's METADATA directly (cli/_parser.py): the one importlib.metadata reads.
    assert done.stdout == f"teams-runtime {metadata.version('teams-runtime')}\n"


# Logs as a module of the package does: through teams_runtime._logs' logger, under a package
# module's __name__ (loguru tells the package's lines by the caller's __name__).
_LOG_AS_PACKAGE = """
import io
from loguru import logger
logger.remove()
sink = io.StringIO()
logger.add(sink, format="{message}")
probe = {"__name__": "teams_runtime.probe"}
exec("from teams_runtime._logs import logger\\nlogger.info('from the package')", probe)
print(repr(sink.getvalue()))
"""


@pytest.mark.parametrize(
    ("before", "after", "expected"),
    [
        pytest.param("from teams_runtime import Team", "", "''", id="package-then-loguru"),
        pytest.param(
            "import loguru\nfrom teams_runtime import Team", "", "''", id="loguru-then-package"
        ),
        pytest.param(
            "from teams_runtime import Team",
            "logger.enable('teams_runtime')",
            "'from the package\\n'",
            id="enabled-after-importing-the-parts-used",
        ),
        pytest.param(
            "import teams_runtime",
            "logger.enable('teams_runtime'); from teams_runtime import Team",
            "''",
            id="enabled-before-they-are-imported-is-undone",
        ),
    ],
)
def test_the_package_logs_nothing_until_the_application_enables_it(
    before: str, after: str, expected: str
) -> None:
    # The library's promise (docs/monitoring.md, "Logging"): quiet until the application calls
    # logger.enable("teams_runtime") after importing the parts of the package it uses.
    code = before + "\n" + _LOG_AS_PACKAGE.replace("logger.remove()", f"logger.remove()\n{after}")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == expected
