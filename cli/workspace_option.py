"""Which workspace a command works on: ``--workspace``, else the one found like git finds a
repository (the current folder or the nearest parent holding ``team_runtime.yaml``)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from teams_runtime.cli.output import UserError
from teams_runtime.codecs.config import CONFIG_FILE_NAME

__all__ = ["resolve_workspace"]


def _relative_paths(args: argparse.Namespace) -> list[str]:
    """The paths given to the command (flags and defaults) that are relative to the current
    folder: every ``Path`` value, and ``append --from FILE`` (``-`` is stdin)."""
    found: list[str] = []
    for name, value in vars(args).items():
        for item in value if isinstance(value, list) else [value]:
            if name == "source" and isinstance(item, str) and item != "-":
                item = Path(item)
            if isinstance(item, Path) and not item.is_absolute():
                found.append(str(item))
    return found


def _find_workspace(here: Path) -> Path | None:
    """The workspace around ``here`` (the current folder), as git finds a repository, or
    ``None``: ``here`` or the nearest parent holding ``team_runtime.yaml`` (so a command run
    inside ``.teams_runtime/`` finds its workspace). The answer is relative to ``here`` (``.``,
    ``..``, ``../..``), so messages name files as the user sees them."""
    for up, folder in enumerate([here, *here.parents]):
        candidate = folder / CONFIG_FILE_NAME
        if candidate.exists() or candidate.is_symlink():  # a bad one is loading's error
            return Path(*([".."] * up)) if up else Path(".")
    return None


def resolve_workspace(args: argparse.Namespace) -> None:
    """Set ``args.workspace`` for a command that takes ``--workspace`` and was not given one.

    Raises ``UserError`` when no folder from here up holds ``team_runtime.yaml``, except for
    ``--record`` (a record file anywhere, read with the defaults when there is no workspace),
    and when the current folder was removed and the command needs it: to find the workspace,
    or to resolve a relative path it was given (which would fail half-way).
    """
    try:
        here: Path | None = Path(os.getcwd())
    except FileNotFoundError:  # the shell's folder was removed under it
        here = None
    relative = _relative_paths(args) if here is None else []
    if relative:
        raise UserError(
            f"the current folder no longer exists, so the relative path {relative[0]!r} "
            "leads nowhere; cd to a folder that exists, or give absolute paths."
        )
    if getattr(args, "workspace", "absent") is not None:
        return  # given on the command line, or a command without a workspace (init, demo)
    if here is None:
        raise UserError(
            "the current folder no longer exists; cd to a workspace, or pass --workspace with "
            "an absolute path."
        )
    found = _find_workspace(here)
    if found is not None:
        args.workspace = found
    elif getattr(args, "record", None) is not None:
        args.workspace = Path(".")
    else:
        raise UserError(
            f"no {CONFIG_FILE_NAME} in {here} or any folder above it: this is not inside "
            "a workspace; pass --workspace DIR, or create one with `teams-runtime init DIR`."
        )
