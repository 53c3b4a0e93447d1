"""What a role's model needs from this host before a run starts: its command found and
executable, its key's variable set.

Found at start, these refuse the run (``config`` says the same): otherwise every request
would fail at its first call, one by one, and be marked failed.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable, Mapping
from pathlib import Path

from teams_runtime.codecs.config import ModelConfig
from teams_runtime.codecs.formats import count_of
from teams_runtime.codecs.model import header_safe

__all__ = ["command_argv", "model_problem", "start_problem"]


def _filled(model: ModelConfig) -> list[str]:
    # Only these two exact words are replaced: any other brace (a JSON argument) stays.
    return [
        part.replace("{model}", model.name).replace("{reasoning}", model.reasoning)
        for part in model.command
    ]


def command_argv(model: ModelConfig, workspace_root: Path) -> list[str]:
    """The command as it is run: ``{model}`` and ``{reasoning}`` replaced by the role's model
    name and reasoning level, and its program found where ``program_path`` says."""
    argv = _filled(model)
    return [program_path(argv[0], workspace_root), *argv[1:]]


def program_path(program: str, workspace_root: Path) -> str:
    """Where the command's ``program`` is run from: ``./my-model-cli`` or ``bin/model`` live
    in the workspace; a bare name is found on ``PATH`` (when it runs)."""
    if "/" in program and not os.path.isabs(program):
        return str(workspace_root / program)
    return program


def _command_problem(
    model: ModelConfig, workspace_root: Path, environ: Mapping[str, str]
) -> str | None:
    path = "model.command"
    program = _filled(model)[0]
    where = program_path(program, workspace_root)
    if "/" not in program:
        # Found as it will be run: with model.env over this environment.
        found = shutil.which(program, path=model.env.get("PATH", environ.get("PATH")))
        if found is None:
            # The user's own command in the hint: `./NAME` runs one kept in the workspace.
            return (
                f"{path}[0] {program!r} is not found on PATH; install it, or write its path "
                f"(./{program} if it is in the workspace)"
            )
        return None
    if not os.path.exists(where):
        return (
            f"{path}[0] {program!r} names a file that does not exist ({where}); correct the "
            "path or put the program there"
        )
    if os.path.isdir(where) or not os.access(where, os.X_OK):
        return f"{path}[0] {program!r} is not an executable file; make it one (chmod +x {where})"
    return None


def model_problem(
    model: ModelConfig, workspace_root: str | Path, environ: Mapping[str, str] | None = None
) -> str | None:
    """What keeps ``model`` from answering on this host, naming the key (``None``: nothing)."""
    environ = os.environ if environ is None else environ
    if model.backend == "command" and model.command:
        return _command_problem(model, Path(os.path.abspath(workspace_root)), environ)
    if model.backend == "openai" and model.openai is not None and model.openai.api_key_env:
        # The words of the openai backend's own check, which runs again at each call.
        variable = f"the environment variable {model.openai.api_key_env} (model.openai.api_key_env)"
        key = environ.get(model.openai.api_key_env, "")
        if not key:
            return f"{variable} is not set; export the model server's key in it"
        if not header_safe(key):  # the value is never shown
            return (
                f"{variable} holds a space, a line break or a character that is not ASCII, "
                "which no API key has; export only the key in it"
            )
    return None


def _roles_said(roles: list[str], of: int) -> str:
    if len(roles) == of and of > 1:
        return f"every role ({count_of(of, 'role')})"
    return ("role " if len(roles) == 1 else "roles ") + ", ".join(roles)


def start_problem(
    models: Iterable[tuple[str, ModelConfig]], workspace_root: str | Path
) -> str | None:
    """The first problem of the roles' models (``(role, model)`` pairs) as one line naming
    the roles that have it and the key, or ``None`` when every role can start."""
    pairs = list(models)
    problems: dict[str, list[str]] = {}
    for role, model in pairs:
        problem = model_problem(model, workspace_root)
        if problem is not None:
            problems.setdefault(problem, []).append(role)
    if not problems:
        return None
    problem, roles = next(iter(problems.items()))
    return f"{_roles_said(roles, len(pairs))}: {problem}, then start again."
