"""teams-runtime: a runtime for teams of model-backed roles with bounded prompt context.

The names below are imported when first used (``from teams_runtime import Team`` imports the
actors then), so a program that needs a small part, such as ``teams-runtime --version``,
does not pay for the whole runtime at start-up.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from teams_runtime.exceptions import (
    ActorBusy,
    ActorStopped,
    AnswerRefused,
    AskTimeout,
    BackendError,
    ConfigError,
    EnvelopeError,
    ModelFailure,
    PromptTooLarge,
    RecordError,
    RequestStateError,
    TeamsRuntimeError,
    UnknownRequestError,
    UnsafeRequestIdError,
)
from teams_runtime.library_logs import keep_library_logs_quiet

if TYPE_CHECKING:
    from teams_runtime.actors.context import ContextHandle, open_context
    from teams_runtime.actors.intake import submit
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

# A library adds no log sinks and stays quiet until the application enables it (the CLI does).
keep_library_logs_quiet()


__all__ = [
    "ActorBusy",
    "ActorStopped",
    "AnswerRefused",
    "AskTimeout",
    "BackendError",
    "Backfill",
    "ConfigError",
    "ContextHandle",
    "EnvelopeError",
    "FileRecordStore",
    "FileWorkQueue",
    "MessageEnvelope",
    "ModelFailure",
    "Projection",
    "PromptBundle",
    "PromptContextConfig",
    "PromptTooLarge",
    "RecordError",
    "RecordStore",
    "RequestStateError",
    "RunSummary",
    "Team",
    "TeamConfig",
    "TeamsRuntimeError",
    "UnknownRequestError",
    "UnsafeRequestIdError",
    "WorkQueue",
    "build_prompt",
    "load_team_config",
    "notice_text",
    "open_context",
    "project_request",
    "submit",
]

# Where each name that is imported on first use lives (the errors above are imported at once).
_LAZY = {
    "ContextHandle": "teams_runtime.actors.context",
    "open_context": "teams_runtime.actors.context",
    "submit": "teams_runtime.actors.intake",
    "RunSummary": "teams_runtime.actors.team",
    "Team": "teams_runtime.actors.team",
    "PromptContextConfig": "teams_runtime.codecs.config",
    "TeamConfig": "teams_runtime.codecs.config",
    "MessageEnvelope": "teams_runtime.codecs.envelopes",
    "Backfill": "teams_runtime.codecs.projection_reply",
    "Projection": "teams_runtime.codecs.projection_reply",
    "notice_text": "teams_runtime.policy.projection",
    "project_request": "teams_runtime.policy.projection",
    "PromptBundle": "teams_runtime.policy.prompts",
    "build_prompt": "teams_runtime.policy.prompts",
    "FileRecordStore": "teams_runtime.storage",
    "FileWorkQueue": "teams_runtime.storage",
    "RecordStore": "teams_runtime.storage",
    "WorkQueue": "teams_runtime.storage",
    "load_team_config": "teams_runtime.storage",
}


def __getattr__(name: str) -> Any:
    """Import a public name on first use, then keep it here like any other attribute."""
    try:
        module = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module 'teams_runtime' has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
