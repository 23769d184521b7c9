"""A small MCP server for the tests, written with the ``mcp`` SDK's MCPServer (FastMCP in mcp 1).

Run as a process: ``python tests/mcp_server.py`` speaks MCP over stdin/stdout,
``python tests/mcp_server.py http PORT`` streamable HTTP on 127.0.0.1:PORT at ``/mcp``.
Its tools: :func:`museum_hours` answers what nothing but this server knows (the spoken call's
question); :func:`table_free` takes arguments; the others make it slow, fail, exit, or say which
process answered.
"""

from __future__ import annotations

import asyncio
import os
import sys

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations

OPENS, CLOSES = "7:45", "19:15"
"""The museum's hours: an answer a caller can only get from this server (no model guesses it)."""

server = MCPServer("test-city", log_level="WARNING")


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def museum_hours(day: str) -> dict:
    """When the city museum opens and closes on a day of the week."""
    return {"day": day, "opens": OPENS, "closes": CLOSES}


@server.tool()
def table_free(time: str, people: int = 2) -> str:
    """Whether a table is free at a time today, for a number of people."""
    return f"A table for {people} is free at {time}."


@server.tool()
async def slow(seconds: float) -> str:
    """Answers after a while."""
    await asyncio.sleep(seconds)
    return "late"


@server.tool()
def broken() -> str:
    """Always fails."""
    raise ToolError("the booking system is down")


@server.tool()
def crash() -> str:
    """Ends the server's process in the middle of the call."""
    os._exit(3)


@server.tool()
def process_id() -> int:
    """The server process's id."""
    return os.getpid()


if __name__ == "__main__":
    if sys.argv[1:2] == ["http"]:
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run()
