"""Model backends: what turns a prompt into the model's reply (dry run, a command, an OpenAI-
compatible server), their servers and checks."""

from __future__ import annotations

from teams_runtime.actors.models._backends import (
    DryRunBackend,
    ModelBackend,
    ModelReply,
    complete_reporting,
    server_away,
)
from teams_runtime.actors.models._checks import start_problem
from teams_runtime.actors.models._probe import ServerProbe, probe_all
from teams_runtime.actors.models._role_backends import role_backends
from teams_runtime.actors.models._servers import ModelServers

__all__ = [
    "DryRunBackend",
    "ModelBackend",
    "ModelReply",
    "ModelServers",
    "ServerProbe",
    "complete_reporting",
    "probe_all",
    "role_backends",
    "server_away",
    "start_problem",
]
