"""A small MCP server over stdio for the tests (the ``mcp`` extra): ``shout`` answers its text
in capitals, ``fail`` raises, ``whisper`` is never allow-listed by the tests."""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

app = MCPServer("echo")


@app.tool()
def shout(text: str) -> str:
    """Say ``text`` in capitals."""
    return text.upper()


@app.tool()
def fail(text: str) -> str:
    """Always fails."""
    raise ValueError("this tool always fails")


@app.tool()
def whisper(text: str) -> str:
    """Say ``text`` in small letters."""
    return text.lower()


if __name__ == "__main__":
    app.run()
