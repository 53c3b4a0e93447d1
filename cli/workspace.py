"""Which workspace a command works on: ``--workspace``, else the one found like git finds a
repository (the current folder or the nearest parent holding ``team_runtime.yaml``)."""

from __future__ import annotations

import argparse
from pathlib import Path

from teams_runtime.actors.storage import find_workspace
from teams_runtime.cli.output import UserError
from teams_runtime.codecs.config import CONFIG_FILE_NAME

__all__ = ["resolve_workspace"]


def resolve_workspace(args: argparse.Namespace) -> None:
    """Set ``args.workspace`` for a command that takes ``--workspace`` and was not given one.

    Raises ``UserError`` when no folder from here up holds ``team_runtime.yaml``, except for
    ``--record`` (a record file anywhere, read with the defaults when there is no workspace).
    """
    if getattr(args, "workspace", "absent") is not None:
        return  # given on the command line, or a command without a workspace (init, demo)
    try:
        found = find_workspace()
    except FileNotFoundError:  # the shell's folder was removed under it
        raise UserError(
            "the current folder no longer exists; cd to a workspace or pass --workspace DIR."
        ) from None
    if found is not None:
        args.workspace = found
    elif getattr(args, "record", None) is not None:
        args.workspace = Path(".")
    else:
        raise UserError(
            f"no {CONFIG_FILE_NAME} in {Path.cwd()} or any folder above it: this is not inside "
            "a workspace; pass --workspace DIR, or create one with `teams-runtime init DIR`."
        )
