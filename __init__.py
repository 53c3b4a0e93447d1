"""teams-runtime: a runtime for teams of model-backed roles with bounded prompt context."""

from __future__ import annotations

from loguru import logger

from teams_runtime.actors.context import ContextHandle, open_context
from teams_runtime.actors.intake import submit
from teams_runtime.actors.team import RunSummary, Team
from teams_runtime.codecs.config import PromptContextConfig, TeamConfig
from teams_runtime.codecs.envelopes import MessageEnvelope
from teams_runtime.codecs.projection_reply import Backfill, Projection
from teams_runtime.exceptions import (
    ActorBusy,
    ActorStopped,
    AskTimeout,
    ConfigError,
    EnvelopeError,
    ModelFailure,
    RecordError,
    TeamsRuntimeError,
    UnknownRequestError,
    UnsafeRequestIdError,
)
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
logger.disable("teams_runtime")

__all__ = [
    "ActorBusy",
    "ActorStopped",
    "AskTimeout",
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
    "RecordError",
    "RecordStore",
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
