"""What dhub adds to an MCP tool call (issue 20): a call through dhub's runtime path (the knowledge
port of a run: the run's user read again, the one reference check on the MCP server, its secrets
revealed, the pooled connection) against a direct call with the official SDK's client on an open
session to the same server, in the same process, interleaved round by round.

    .venv/bin/python bench/mcp_client.py [--calls 300] [--rounds 5]

Both transports: a Streamable HTTP server (the SDK's, served by uvicorn in a thread) and a stdio
server (the SDK's, as a program: run directly by the SDK's stdio client, and by dhub in its
sandbox under bubblewrap). The goal is under 1 ms added per call.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import uvicorn
from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters
from mcp.server.mcpserver import MCPServer

from dhub.access.bootstrap import ADMIN_ID, ensure_admin
from dhub.access.principal import Principal
from dhub.domain.mcp import BOUND, OPERATION
from dhub.engine.state import CallKnowledge
from dhub.sandbox.envs import base_python
from dhub.sandbox.runner import SandboxRunner, SandboxSettings
from dhub.services.knowledge import KnowledgeCalls
from dhub.services.mcp_client import McpClients
from dhub.services.resources import ResourceService
from dhub.store.db import Database

STDIO = '''
from mcp.server.mcpserver import MCPServer

server = MCPServer("bench")


@server.tool()
def add(a: int, b: int) -> int:
    """Add."""
    return a + b


if __name__ == "__main__":
    server.run("stdio")
'''


def http_server() -> tuple[str, uvicorn.Server]:
    server = MCPServer("bench")

    @server.tool()
    def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    config = uvicorn.Config(server.streamable_http_app(), port=0, log_level="warning")
    runner = uvicorn.Server(config)
    thread = threading.Thread(target=runner.run, daemon=True)
    thread.start()
    while not runner.started:
        time.sleep(0.01)
    port = runner.servers[0].sockets[0].getsockname()[1]
    return f"http://127.0.0.1:{port}/mcp", runner


async def timed(calls: int, call: Callable[[], Awaitable[Any]]) -> tuple[list[float], float]:
    """Each call's wall time (ms), and the process's CPU time per call (ms): steadier on a
    loaded machine, and in one process both the client's and (HTTP) the server's work."""
    samples = []
    cpu = time.process_time()
    for _ in range(calls):
        start = time.perf_counter()
        await call()
        samples.append((time.perf_counter() - start) * 1000)
    return samples, (time.process_time() - cpu) * 1000 / calls


async def main(calls: int, rounds: int) -> None:
    url, http = http_server()
    folder = Path(tempfile.mkdtemp(prefix="dhub-bench-mcp-"))
    source = folder / "server.py"
    source.write_text(STDIO)
    db = Database(f"sqlite:///{folder / 'dhub.db'}")
    await db.migrate()
    await ensure_admin(db, folder, "bench-token")
    admin = Principal(ADMIN_ID, is_admin=True)
    resources = ResourceService(db)
    docs = {
        "http": {"name": "h", "description": "", "transport": "streamable_http", "url": url},
        "stdio": {"name": "s", "description": "", "transport": "stdio", "source": STDIO,
                  "dependencies": [f"mcp=={_version('mcp')}"]},
    }  # fmt: skip
    sandbox = SandboxRunner(SandboxSettings(envs_dir=folder / "envs"))
    clients = McpClients(sandbox, allowed_hosts=["127.0.0.1"])
    port = KnowledgeCalls(db, ADMIN_ID, "run.bench", clients)
    env_python = None
    results: dict[str, dict[str, list[float]]] = {}
    cpu_results: dict[str, dict[str, float]] = {}
    for transport, doc in docs.items():
        server_id = (await resources.create(admin, "mcp_server", doc)).record.id
        request = CallKnowledge(
            "c", "n", OPERATION, {"a": 1, "b": 2, BOUND: {"server": server_id, "tool": "add"}}
        )

        async def through_dhub(request: CallKnowledge = request) -> None:
            done = await port.call(request)
            assert done.ok, done.error

        await through_dhub()  # connect (and for stdio, build its environment) first
        if transport == "stdio":
            env_python = str(next((folder / "envs").glob("*/bin/python")))
            params = StdioServerParameters(command=env_python, args=["-I", str(source)])
            direct = Client(params, cache=None)
        else:
            direct = Client(url, cache=None)
        async with direct:

            async def direct_call(direct: Client = direct) -> None:
                await direct.call_tool("add", {"a": 1, "b": 2})

            await direct_call()
            runs: dict[str, list[float]] = {"direct": [], "dhub": []}
            cpus: dict[str, list[float]] = {"direct": [], "dhub": []}
            for _ in range(rounds):
                for path, call in (("direct", direct_call), ("dhub", through_dhub)):
                    samples, cpu = await timed(calls, call)
                    runs[path] += samples
                    cpus[path].append(cpu)
        results[transport] = runs
        cpu_results[transport] = {k: statistics.median(v) for k, v in cpus.items()}
    await clients.close()
    await sandbox.close()
    await db.dispose()
    http.should_exit = True
    print(f"{calls} calls x {rounds} rounds per path; python {sys.version.split()[0]}, "
          f"base {base_python()}")  # fmt: skip
    print(f"{'transport':10} {'path':7} {'median ms':>10} {'p95 ms':>8} {'added ms':>9}"
          f" {'CPU ms':>8} {'added':>7}")  # fmt: skip
    for transport, runs in results.items():
        base = statistics.median(runs["direct"])
        base_cpu = cpu_results[transport]["direct"]
        for path, samples in runs.items():
            median = statistics.median(samples)
            p95 = statistics.quantiles(samples, n=20)[18]
            cpu = cpu_results[transport][path]
            added = "" if path == "direct" else f"{median - base:+.3f}"
            added_cpu = "" if path == "direct" else f"{cpu - base_cpu:+.3f}"
            print(f"{transport:10} {path:7} {median:10.3f} {p95:8.3f} {added:>9}"
                  f" {cpu:8.3f} {added_cpu:>7}")  # fmt: skip


def _version(name: str) -> str:
    from importlib.metadata import version

    return version(name)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    asyncio.run(main(args.calls, args.rounds))
