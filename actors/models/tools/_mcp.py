"""MCP servers' tools (``model.tools.mcp``), through the official ``mcp`` SDK (the ``[mcp]``
extra): each server started once per worker (by its name, whichever roles name it), its
session held open by one task (its one owner) for as long as the Team runs, and stopped with
it. A role's toolbox offers the tools its servers' allow-lists name and the server has.

Secrets: a stdio server's ``env`` goes to its process only; an HTTP server's ``headers_env``
names variables read from the environment at start, sent as headers only. Nothing logged
names more than the server, its tools' names and an error's type.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import anyio
from anyio.abc import TaskStatus

from teams_runtime._logs import logger
from teams_runtime.actors.models.tools._session import Toolbox, combined
from teams_runtime.codecs.config import McpServerConfig, ModelConfig
from teams_runtime.codecs.formats import JsonObject
from teams_runtime.codecs.model import tool_spec
from teams_runtime.exceptions import ConfigError, TeamsRuntimeError

__all__ = ["McpServers", "open_mcp_servers"]

_START_SECONDS = 60.0  # how long a server may take to start and list its tools


class _Server:
    """One MCP server's session (held by its owner task) and the tools it offers."""

    def __init__(self, config: McpServerConfig) -> None:
        self.config = config
        self.session: Any = None  # mcp.ClientSession, once started
        self.specs: list[JsonObject] = []


class _ServerTools:
    """The allow-listed tools of one server (a ``Toolbox``)."""

    def __init__(self, server: _Server) -> None:
        self._server = server

    def specs(self) -> list[JsonObject]:
        return self._server.specs

    async def call(self, name: str, arguments: JsonObject) -> str:
        if self._server.session is None:
            return f"error: the MCP server {self._server.config.name} is not running"
        result = await self._server.session.call_tool(name, arguments)
        texts = [
            getattr(block, "text", None) or f"[{getattr(block, 'type', 'content')}]"
            for block in getattr(result, "content", None) or ()
        ]
        text = "\n".join(texts)
        return f"error: {text}" if getattr(result, "is_error", False) else text


class McpServers:
    """The MCP servers of a worker's roles, by name."""

    def __init__(self) -> None:
        self._servers: dict[str, _Server] = {}

    def toolbox_for(self, model: ModelConfig) -> Toolbox | None:
        """The tools of the servers a role's ``model.tools.mcp`` names."""
        if not _takes_tools(model):
            return None
        boxes: list[Toolbox] = [_ServerTools(self._servers[c.name]) for c in model.tools.mcp]
        return combined(boxes) if boxes else None


def _takes_tools(model: ModelConfig) -> bool:
    """Whether a role of this model calls tools (the ``openai`` backend; a person's role
    and the dry run ignore a team's tools)."""
    return model.backend == "openai"


@asynccontextmanager
async def open_mcp_servers(models: list[ModelConfig]) -> AsyncIterator[McpServers]:
    """Start each server the roles' ``models`` name (one per name: the same name written
    twice with different settings is a ``ConfigError``), and stop them all on leaving. Raises
    ``TeamsRuntimeError`` for a server that cannot start (content-free: its type only)."""
    servers = McpServers()
    for config in (server for model in models if _takes_tools(model) for server in model.tools.mcp):
        known = servers._servers.get(config.name)
        if known is not None and known.config != config:
            raise ConfigError(
                f"team_runtime.yaml model.tools.mcp names the server {config.name!r} with "
                "different settings for different roles; give each its own name."
            )
        servers._servers[config.name] = _Server(config)
    if not servers._servers:
        yield servers
        return
    async with anyio.create_task_group() as group:
        for server in servers._servers.values():
            with anyio.fail_after(_START_SECONDS):
                await group.start(_hold, server)
        try:
            yield servers
        finally:
            group.cancel_scope.cancel()  # every server stops with the team


async def _hold(server: _Server, *, task_status: TaskStatus[None]) -> None:
    """Start ``server``, keep its session open until cancelled (the team stops)."""
    config = server.config
    try:
        from mcp import ClientSession
    except ImportError:
        raise ConfigError(
            "team_runtime.yaml model.tools.mcp needs the MCP SDK: pip install 'teams-runtime[mcp]'."
        ) from None
    started = False
    try:
        async with AsyncExitStack() as stack:
            read, write = await stack.enter_async_context(_transport(config))
            session = await stack.enter_async_context(ClientSession(read, write))
            await session.initialize()
            listed = await session.list_tools()
            offered = {tool.name: tool for tool in listed.tools}
            missing = [name for name in config.tools if name not in offered]
            if missing:
                logger.warning(
                    "MCP server {} has no tool named {}; its other allowed tools are offered",
                    config.name,
                    ", ".join(missing),
                )
            server.session = session
            server.specs = [
                tool_spec(name, offered[name].description or "", dict(offered[name].input_schema))
                for name in config.tools
                if name in offered
            ]
            logger.info("MCP server {} started: {} tools", config.name, len(server.specs))
            started = True
            task_status.started()
            await anyio.sleep_forever()
    except Exception as exc:
        server.session = None
        if started:  # its tools answer that it stopped: the team goes on
            logger.warning("MCP server {} stopped ({})", config.name, type(exc).__name__)
            return
        raise TeamsRuntimeError(
            f"the MCP server {config.name} (model.tools.mcp) could not start "
            f"({type(exc).__name__}); check its command or url"
        ) from None


def _transport(config: McpServerConfig) -> Any:
    """The SDK's client transport for ``config``: stdio or streamable HTTP."""
    if config.command:
        from mcp import StdioServerParameters
        from mcp.client.stdio import stdio_client

        env = dict(os.environ) | config.env
        params = StdioServerParameters(command=config.command[0], args=config.command[1:], env=env)
        return stdio_client(params)
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    headers = {header: os.environ.get(name, "") for header, name in config.headers_env.items()}
    return streamable_http_client(config.url, http_client=create_mcp_http_client(headers=headers))
