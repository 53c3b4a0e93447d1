"""The CLI's log sinks.

The library only emits (through ``teams_runtime._logs``' logger, with ``role``, ``request_id``
and ``purpose`` bound; the prompt records come from ``actors.telemetry._prompt_log``), and its
lines are off until an application turns them on; the CLI does, and adds its sinks, through
``configure_logging``:

- stderr: human-readable, INFO and up;
- ``.teams_runtime/logs/<role>.log``: each role's own lines (the compaction line among them);
- ``.teams_runtime/logs/prompt_context.jsonl``: one ``PromptRecord`` per prompt sent, rotated
  at 10 MB, keeping 10 old files (``prompt_context.<time>.jsonl``).

Nothing logged here ever holds prompt, event, payload or envelope text.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import Any

from teams_runtime._logs import PACKAGE, logger
from teams_runtime.actors.telemetry import RECORD_KEY
from teams_runtime.codecs.roles import ROLES
from teams_runtime.exceptions import RecordError
from teams_runtime.storage import Workspace
from teams_runtime.storage.local_files import ensure_folder

__all__ = [
    "PROMPT_LOG_NAME",
    "configure_logging",
    "log_to_workspace",
    "stop_logging",
]

PROMPT_LOG_NAME = "prompt_context.jsonl"


def _is_record(entry: Any) -> bool:
    return RECORD_KEY in entry["extra"]


def _role_filter(role: str) -> Callable[[Any], bool]:
    def accept(entry: Any) -> bool:
        return bool(entry["extra"].get("role") == role) and not _is_record(entry)

    return accept


def configure_logging(
    workspace: Workspace | None,
    *,
    console_level: str = "INFO",
    console: Callable[[str], None] | None = None,
    roles: Sequence[str] = ROLES,
) -> None:
    """Add the CLI's sinks (replacing any) and turn the library's logging on: a log file for
    each of ``roles`` (the team's, ``TeamConfig.cast``; by default the built-in eight).

    Console lines go to stderr, or to ``console`` (a live view prints them above itself, so
    the two never garble each other)."""
    logger.remove()
    logger.enable(PACKAGE)
    logger.add(
        sys.stderr if console is None else console,
        level=console_level,
        format="<green>{time:HH:mm:ss}</green> <level>{level: <7}</level> {message}",
        filter=lambda entry: not _is_record(entry),
        colorize=None if console is None else False,
        diagnose=False,  # never print variable values (prompt text) in tracebacks
    )
    if workspace is not None:
        log_to_workspace(workspace, roles)


def log_to_workspace(workspace: Workspace, roles: Sequence[str] = ROLES) -> list[int]:
    """Add the workspace's own sinks beside any the program has (each of ``roles``' log, and
    ``prompt_context.jsonl`` for the prompt records ``metrics`` and ``replay`` read) and turn
    the library's lines on: a team run inside a program is then counted as ``run``'s is.
    Returns the sinks' ids (``logger.remove(id)`` each, then ``logger.complete()``, to stop)."""
    logger.enable(PACKAGE)
    logs = workspace.logs_dir
    ensure_folder(logs, workspace.runtime_dir)  # a linked logs folder is refused
    for name in (*(workspace.role_log(role).name for role in roles), PROMPT_LOG_NAME):
        if (logs / name).is_symlink():  # loguru would write through it
            raise RecordError(
                f"{logs / name} is a symbolic link; teams-runtime never writes through links "
                "under .teams_runtime/ (remove the link, then retry)."
            )
    sinks = []
    for role in roles:
        sink = logger.add(
            workspace.role_log(role),
            level="INFO",
            format="{time:YYYY-MM-DDTHH:mm:ss.SSSZZ} {level} {message}",
            filter=_role_filter(role),
            rotation="10 MB",
            retention=10,
            enqueue=True,
            diagnose=False,
        )
        sinks.append(sink)
    sinks.append(
        logger.add(
            logs / PROMPT_LOG_NAME,
            level="INFO",
            format="{extra[" + RECORD_KEY + "]}",
            filter=_is_record,
            rotation="10 MB",
            retention=10,
            enqueue=True,
            diagnose=False,
        )
    )
    return sinks


def stop_logging() -> None:
    """Flush and close the sinks (background writers included); the library is quiet again."""
    logger.complete()
    logger.remove()
    logger.disable(PACKAGE)
