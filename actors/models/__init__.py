"""Model backends: what turns a prompt into the model's reply (dry run, a command, an OpenAI-
compatible server), their servers and checks, and each server's window and tokenizer."""

from __future__ import annotations

from teams_runtime.actors.models._backends import (
    DryRunBackend,
    ModelBackend,
    ModelReply,
    server_away,
)
from teams_runtime.actors.models._checks import start_problem
from teams_runtime.actors.models._probe import ServerProbe, probe_all
from teams_runtime.actors.models._reporting import complete_reporting
from teams_runtime.actors.models._role_backends import role_backends
from teams_runtime.actors.models._servers import ModelServers
from teams_runtime.actors.models.tools import (
    McpServers,
    Toolbox,
    ToolSession,
    combined,
    open_mcp_servers,
)
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
    "McpServers",
    "ModelBackend",
    "ModelReply",
    "ModelServers",
    "ServerFacts",
    "ServerProbe",
    "ServerTokenizer",
    "ServerWindow",
    "TokenizerGone",
    "ToolSession",
    "Toolbox",
    "auto_budget",
    "combined",
    "complete_reporting",
    "default_reserve",
    "find_tokenizer",
    "open_mcp_servers",
    "probe_all",
    "probe_window",
    "role_backends",
    "server_away",
    "start_problem",
]
