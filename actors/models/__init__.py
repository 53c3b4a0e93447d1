"""Model backends: what turns a prompt into the model's reply (dry run, a command, an OpenAI-
compatible server), their servers and checks, and each server's window and tokenizer."""

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
from teams_runtime.actors.models.windows import (
    MOST_DEFAULT_RESERVE,
    AutoBudget,
    ServerFacts,
    ServerTokenizer,
    ServerWindow,
    TokenizerGone,
    auto_budget,
    default_reserve,
    find_tokenizer,
    probe_window,
)

__all__ = [
    "MOST_DEFAULT_RESERVE",
    "AutoBudget",
    "DryRunBackend",
    "ModelBackend",
    "ModelReply",
    "ModelServers",
    "ServerFacts",
    "ServerProbe",
    "ServerTokenizer",
    "ServerWindow",
    "TokenizerGone",
    "auto_budget",
    "complete_reporting",
    "default_reserve",
    "find_tokenizer",
    "probe_all",
    "probe_window",
    "role_backends",
    "server_away",
    "start_problem",
]
