"""teams-runtime: a runtime for teams of model-backed roles with bounded prompt context.

The errors are imported with the package; every other name when it is first used (``from
teams_runtime import Team`` imports the actors then), so a program that needs a small part,
such as ``teams-runtime --version``, does not pay for the whole runtime at start-up.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from teams_runtime import exceptions
from teams_runtime._deprecated import renamed
from teams_runtime._lazy import first_use
from teams_runtime.exceptions import *  # noqa: F403 (every error is public: exceptions.__all__)

# Where each name imported on first use lives. mypy reads these lines for the names' real
# types; at run time nothing here is executed, and ``_lazy.first_use`` reads these same lines
# from this file to know which module to import when a name is first looked up.
if TYPE_CHECKING:
    from teams_runtime.actors.context import ContextHandle, open_context
    from teams_runtime.actors.intake import RequestOutcome, submit, wait_for_request
    from teams_runtime.actors.team import RunSummary, Team
    from teams_runtime.codecs.config import PromptContextConfig, TeamConfig
    from teams_runtime.codecs.envelopes import MessageEnvelope
    from teams_runtime.codecs.projection_reply import Backfill, Projection
    from teams_runtime.policy.projection import notice_text, project_request
    from teams_runtime.policy.prompts import PromptBundle, build_prompt
    from teams_runtime.storage import (
        FileRecordStore,
        FileWorkQueue,
        RecordStore,
        WorkQueue,
        load_team_config,
    )

# What the package exports, written out: mypy (strict, no implicit re-exports) takes a
# package's exports only from a literal ``__all__`` and from ``+=`` of another module's.
__all__ = [
    "Backfill",
    "ContextHandle",
    "FileRecordStore",
    "FileWorkQueue",
    "MessageEnvelope",
    "Projection",
    "PromptBundle",
    "PromptContextConfig",
    "RecordStore",
    "RequestOutcome",
    "RunSummary",
    "Team",
    "TeamConfig",
    "WorkQueue",
    "build_prompt",
    "load_team_config",
    "notice_text",
    "open_context",
    "project_request",
    "submit",
    "wait_for_request",
]
__all__ += exceptions.__all__


def __getattr__(name: str) -> Any:
    """Import a public name on first use, then keep it here like any other attribute; an old
    name (``exceptions._RENAMED``) with a ``DeprecationWarning``."""
    if name in exceptions._RENAMED:
        return renamed(__name__, name, exceptions._RENAMED)
    return first_use(__name__, name)


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
