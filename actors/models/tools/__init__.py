"""Tools a role's model calls on the ``openai`` backend: the loop of tool rounds in one model
call (``run_rounds``), what offers tools (``Toolbox``), what they did (``ToolSession``), and
MCP servers' tools (``open_mcp_servers``)."""

from __future__ import annotations

from teams_runtime.actors.models.tools._loop import PLAIN, Turn, run_rounds
from teams_runtime.actors.models.tools._mcp import McpServers, open_mcp_servers
from teams_runtime.actors.models.tools._session import Toolbox, ToolSession, combined

__all__ = [
    "PLAIN",
    "McpServers",
    "ToolSession",
    "Toolbox",
    "Turn",
    "combined",
    "open_mcp_servers",
    "run_rounds",
]
