"""Real MCP servers built with the official SDK, for dhub's MCP client to talk to: one served
over Streamable HTTP on a socket (``http_server``), and the same tools as a stdio program's
source (``STDIO_SOURCE``), which dhub starts in its sandbox."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from importlib.metadata import version

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from tests.support.served import serving

# The SDK, as the sandbox installs it for a stdio server's ``dependencies``.
MCP_REQUIREMENT = f"mcp=={version('mcp')}"

# One program for both transports: run as a file it serves stdio; imported, ``build`` gives it.
STDIO_SOURCE = '''
import asyncio
import os
import sys

from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("arith")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def environment(name: str) -> str:
    """The value of one of the server's environment variables."""
    return os.environ.get(name, "<unset>")


@server.tool()
def fail(reason: str) -> str:
    """Always fails, saying why."""
    raise ValueError(reason)


@server.tool()
async def nap(seconds: float) -> str:
    """Sleeps."""
    await asyncio.sleep(seconds)
    return "awake"


@server.tool()
def whoami() -> dict:
    """Who and where the server process is."""
    return {"uid": os.getuid(), "pid": os.getpid(), "cwd": os.getcwd(),
            "can_read_etc_shadow": os.access("/etc/shadow", os.R_OK)}


@server.tool()
def crash() -> str:
    """Ends the server process at once."""
    os._exit(3)


if __name__ == "__main__":
    server.run("stdio")
'''


def build_http_server() -> MCPServer:
    server = MCPServer("weather")

    @server.tool()
    def forecast(city: str, days: int = 1) -> str:
        """The forecast for a city."""
        return f"Sunny in {city} for {days} day(s)"

    @server.tool()
    def header(name: str, ctx: Context) -> str:
        """The value of one header of the request that called this tool."""
        return (ctx.headers or {}).get(name.lower(), "<absent>")

    @server.tool()
    def fail(reason: str) -> str:
        """Always fails, saying why (a ToolError's message reaches the client)."""
        raise ToolError(reason)

    @server.tool()
    def structured(n: int) -> dict[str, int]:
        """A structured result."""
        return {"n": n, "square": n * n}

    @server.tool(name="dotted.name")
    def dotted() -> str:
        """A tool whose name model providers would refuse."""
        return "ok"

    return server


@contextmanager
def http_server() -> Iterator[str]:
    """The Streamable HTTP server's endpoint URL while it serves."""
    app = build_http_server().streamable_http_app()
    with serving(app) as url:  # type: ignore[arg-type]
        yield f"{url}/mcp"
