"""What starting the command line and importing the package load: only what is used.

Each check runs in a fresh interpreter, since this one has imported everything already. How
long start-up takes is measured in tests/benchmarks/startup.py, not here.
"""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
from pathlib import Path

import pytest

from teams_runtime.cli import main
from teams_runtime.cli._parser import COMMANDS, command_parsers

# What a command that needs none of them must not load: the HTTP client (and through it its
# own CLI, rich and click), the NATS client, the live view, and any actor.
HEAVY = ("httpx", "nats", "rich", "click", "loguru", "opentelemetry", "teams_runtime.actors")


def _loaded_after(code: str, *args: str) -> list[str]:
    """The heavy modules in ``sys.modules`` after ``code`` runs in a fresh interpreter."""
    probe = f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    done = subprocess.run(
        [sys.executable, "-c", probe, *args], capture_output=True, text=True, check=True
    )
    modules = json.loads(done.stdout.splitlines()[-1])
    return [name for name in modules if name.split(".")[0] in HEAVY or name.startswith(HEAVY)]


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
    run = "from teams_runtime.cli import main\nimport sys\nmain(sys.argv[1:])"
    # --version exits from inside the parser: catch it so the probe still prints.
    version = f"try:\n    {run.replace(chr(10), chr(10) + '    ')}\nexcept SystemExit:\n    pass"
    assert _loaded_after(version, "--version") == []
    assert main(["init", str(tmp_path / "ws")]) == 0
    assert _loaded_after(run, "status", "--workspace", str(tmp_path / "ws")) == []


def test_every_command_is_declared_by_its_family_with_its_handler() -> None:
    parsers = command_parsers()
    assert list(parsers) == [command.name for command in COMMANDS]
    assert len(parsers) == 19  # with retry, purge-strays, inbox and answer
    for command in COMMANDS:  # the code that runs it sits beside its flags
        handler = parsers[command.name].get_default("handler")
        assert inspect.isfunction(handler), command.name
        assert handler.__module__ == f"teams_runtime.cli.{command.family}", command.name


def test_version_prints_the_installed_version_on_stdout() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "teams_runtime", "--version"], capture_output=True, text=True
    )
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.startswith("teams-runtime ") and done.stdout.count("\n") == 1
    assert done.stdout.split()[1][0].isdigit()


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
