"""What dhub's MCP server adds to a run (issue 20): ``tools/call`` on ``POST /mcp``
(src/dhub/api/mcp.py) through the official ``mcp`` SDK's client, against the same run started
and followed through the REST API, in the same process and the same run, sides taking turns.
Goal: under 1 ms added.

The app is bench/openai_compat.py's (in process over the ASGI transport, SQLite, the demo
model answering the agent's ``llm`` node). The agent is an event workflow (start, llm, end)
taking one start variable, ``ticket``; every call starts one run of it and returns its
outputs once it has succeeded:

- **rest**: ``POST /api/v1/agents/{id}/runs`` with ``stream: true``, its SSE read to the end
  (``run.succeeded`` carries the outputs);
- **mcp, JSON-RPC**: the ``tools/call`` request posted as JSON with httpx (what the SDK sends,
  without the SDK): the server's side of MCP alone;
- **mcp, SDK client**: ``Client.call_tool`` of the official SDK (``mcp.client.client``, over
  ``streamable_http_client`` and httpx2's ASGI transport), one session for every call, as an
  MCP host keeps one.

``--agents N`` first makes N more agents the caller may run: a call finds its tool in the
caller's list of runnable agents, read at each call (docs/mcp.md). Prints the median and p95 of
each side, the process's CPU time, and what each adds to **rest** (median of the per-round
differences).

    .venv/bin/python bench/mcp_server.py                 # about 1 minute
    .venv/bin/python bench/mcp_server.py --agents 100
    .venv/bin/python bench/mcp_server.py --profile "mcp, JSON"  # cProfile of one side's calls
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import httpx2
from fastapi import FastAPI
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client

from openai_compat import (  # bench/ is on sys.path
    API,
    GOAL_MS,
    TOKEN,
    Call,
    Side,
    added,
    measure,
    ok,
    profile,
    report,
    running_app,
    sse_data,
)

TICKET = {"ticket": "Checkout page shows an error"}
EVENT = {
    "name": "bench-event", "description": "Answers a ticket with a model.", "mode": "workflow",
    "input_mode": "event",
    "nodes": [
        {"id": "start", "type": "start", "config": {"variables": [
            {"name": "ticket", "type": "string", "description": "The ticket's text."}]}},
        {"id": "think", "type": "llm", "config": {
            "model_provider": "openai", "model": "gpt-4o-mini", "prompt": "{{ ticket }}",
            "reasoning_effort": "none", "output": "answer"}},
        {"id": "end", "type": "end", "config": {"outputs": [
            {"name": "answer", "type": "string", "value": "{{ answer }}"}]}},
    ],
    "edges": [{"source": "start", "target": "think"}, {"source": "think", "target": "end"}],
}  # fmt: skip
ONE_SESSION = 1 << 30  # turns: every side keeps what ``make`` gave it for the whole run


@asynccontextmanager
async def sdk_session(app: FastAPI) -> AsyncIterator[Client]:
    """The SDK's client on one session with the app, as an MCP host opens one."""
    headers = {"Authorization": f"Bearer {TOKEN}"}
    transport = httpx2.ASGITransport(app=app)
    async with (
        httpx2.AsyncClient(transport=transport, headers=headers, timeout=60) as http,
        Client(streamable_http_client("http://bench/mcp", http_client=http)) as client,
    ):
        yield client


def mcp_sides(client: httpx.AsyncClient, sdk: Client, agent_id: str, expected: str) -> list[Side]:
    def check(outputs: dict[str, Any]) -> None:
        if outputs.get("answer") != expected:
            raise SystemExit(f"unexpected outputs: {outputs!r}")

    async def rest() -> Call:
        async def call() -> None:
            body = {"inputs": TICKET, "stream": True}
            response = await client.post(f"{API}/agents/{agent_id}/runs", json=body)
            check(sse_data(response.content)[-1]["data"]["outputs"])

        return call

    async def json_rpc() -> Call:
        headers = {"Accept": "application/json, text/event-stream"}
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": EVENT["name"], "arguments": TICKET}}  # fmt: skip

        async def call() -> None:
            answer = ok(await client.post("/mcp", json=body, headers=headers))
            check(answer["result"]["structuredContent"]["outputs"])

        return call

    async def official() -> Call:
        async def call() -> None:
            result = await sdk.call_tool(str(EVENT["name"]), TICKET)
            if result.is_error or not isinstance(result.structured_content, dict):
                raise SystemExit(f"the call failed: {result!r}")
            check(result.structured_content["outputs"])

        return call

    return [Side("rest", rest), Side("mcp, JSON-RPC", json_rpc), Side("mcp, SDK client", official)]


async def main_async(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        async with running_app(Path(tmp)) as (app, client), AsyncExitStack() as stack:
            agent_id = ok(await client.post(f"{API}/agents", json=EVENT), 201)["id"]
            for i in range(args.agents):
                ok(await client.post(f"{API}/agents", json={**EVENT, "name": f"other-{i}"}), 201)
            sdk = await stack.enter_async_context(sdk_session(app))
            first = await sdk.call_tool(str(EVENT["name"]), TICKET)
            assert isinstance(first.structured_content, dict), first
            expected = first.structured_content["outputs"]["answer"]
            sides = mcp_sides(client, sdk, agent_id, expected)
            if args.profile:
                chosen = [s for s in sides if s.name.startswith(args.profile)]
                await profile(chosen[0], args.rounds, ONE_SESSION, args.profile_out)
                return
            await measure(sides, args.rounds, args.warmup, ONE_SESSION, args.seed)
            others = f", {args.agents} more agents" if args.agents else ""
            report(sides, f"a run of an event agent (demo model){others}")
            wall, cpu = added(sides[2].times, sides[0].times), added(sides[2].cpu, sides[0].cpu)
            verdict = "met" if wall < GOAL_MS else "NOT met"
            print(f"\ngoal: an MCP call under {GOAL_MS} ms over rest: {verdict} "
                  f"({wall:+.3f} ms wall, {cpu:+.3f} ms CPU)")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--agents", type=int, default=0, help="more runnable agents to make")
    parser.add_argument("--seed", type=int, default=20)
    parser.add_argument("--profile", metavar="SIDE", help="cProfile --rounds calls of one side")
    parser.add_argument("--profile-out", metavar="FILE", help="also write the profile there")
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
