"""The public API: every exported name exists, and every error a caller may catch is exported."""

from __future__ import annotations

import subprocess
import sys

import teams_runtime
import teams_runtime.exceptions as exceptions


def _public_errors() -> dict[str, type[BaseException]]:
    return {
        name: value
        for name, value in vars(exceptions).items()
        if not name.startswith("_")
        and isinstance(value, type)
        and issubclass(value, BaseException)
        and value.__module__ == exceptions.__name__
    }


def test_every_name_in_all_exists_and_is_named_so() -> None:
    assert len(set(teams_runtime.__all__)) == len(teams_runtime.__all__)
    for name in teams_runtime.__all__:
        value = getattr(teams_runtime, name)
        # A re-export, not something else under the name (a module, an alias).
        assert getattr(value, "__name__", name) == name, name


def test_every_name_in_all_exists_in_a_fresh_interpreter() -> None:
    # Here the names were imported already; a new process reads each one first through the
    # package's lazy lookup.
    code = (
        "import teams_runtime\n"
        "missing = [n for n in teams_runtime.__all__ if not hasattr(teams_runtime, n)]\n"
        "print(missing)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_a_name_imports_its_own_module_when_first_read_and_nothing_before() -> None:
    code = (
        "import sys\n"
        "import teams_runtime\n"
        "loaded = lambda: [m in sys.modules for m in ('teams_runtime.codecs.config', "
        "'teams_runtime.actors')]\n"
        "before = loaded()\n"
        "teams_runtime.TeamConfig\n"
        "print(before, loaded())"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[False, False] [True, False]"


def test_an_unknown_name_is_an_attribute_error() -> None:
    assert not hasattr(teams_runtime, "NoSuchName")
    assert "Team" in dir(teams_runtime)


def test_every_public_error_is_exported_from_the_exceptions_module_and_the_package() -> None:
    errors = _public_errors()
    assert "StorageError" in errors and len(errors) >= 10
    assert sorted(errors) == sorted(exceptions.__all__)
    for name, error in errors.items():
        assert name in teams_runtime.__all__, name
        assert getattr(teams_runtime, name) is error, name


def test_every_public_error_is_a_teams_runtime_error() -> None:
    for name, error in _public_errors().items():
        assert issubclass(error, teams_runtime.TeamsRuntimeError), name
