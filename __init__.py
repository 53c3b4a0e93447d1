"""teams-runtime: a runtime for teams of model-backed roles with bounded prompt context."""

from __future__ import annotations

from teams_runtime.codecs.config import PromptContextConfig, TeamConfig, load_team_config
from teams_runtime.exceptions import (
    ActorStopped,
    AskTimeout,
    ConfigError,
    RecordError,
    TeamsRuntimeError,
    UnknownRequestError,
    UnsafeRequestIdError,
)
from teams_runtime.projection import Backfill, Projection, notice_text, project_request

__all__ = [
    "ActorStopped",
    "AskTimeout",
    "Backfill",
    "ConfigError",
    "Projection",
    "PromptContextConfig",
    "RecordError",
    "TeamConfig",
    "TeamsRuntimeError",
    "UnknownRequestError",
    "UnsafeRequestIdError",
    "load_team_config",
    "notice_text",
    "project_request",
]
