"""What the OpenAI-compatible API adds to a turn (issue 20's benchmark): ``POST
/v1/chat/completions`` against ``POST /api/v1/conversations/{id}/messages`` for the same chat
agent, in the same process and the same run, sides taking turns. Goal: under 1 ms added.

The app (``create_app``, SQLite in a temporary directory, the demo model answering the
agent's ``llm`` node, runs executed in the same process as the API) is driven through
httpx's ASGI transport, so no socket and no HTTP parsing is measured: both sides would pay
the same. Each call is one turn of a conversation and its answer:

- **rest**: ``POST /api/v1/conversations/{id}/messages`` with ``stream: true``, its SSE read
  to the end (``run.succeeded`` carries the answer): the cheapest way through /api/v1 to send
  a message and get its reply in one request;
- **rest, 202 + events**: the same message without ``stream``, then ``GET
  /api/v1/runs/{id}/events`` as SSE: what the dhub SDK's ``send_message`` does;
- **chat completions**: ``POST /v1/chat/completions`` naming the agent as ``model`` and the
  conversation in ``X-Dhub-Conversation``, not streamed; **stream**: the same with
  ``stream: true``, its chunks read to ``[DONE]``;
- **openai client**: the official ``openai`` client's ``chat.completions.create`` over the
  same transport (what its own parsing and types add on the client side; for reference).

Every side sends to a conversation of its own, replaced by a fresh one (made untimed) every
``--turns`` calls, so the sides' conversations are always the same length. After a warm-up,
the sides take turns, one call each per round in a new random order (seeded), with
``gc.freeze()`` after set-up and a ``gc.collect()`` before each round. Prints the median and
p95 of each side and what each adds to **rest** (median of the per-round differences, which
cancel most of the machine's drift).

    .venv/bin/python bench/openai_compat.py                 # about 1 minute
    .venv/bin/python bench/openai_compat.py --rounds 1000 --turns 1
    .venv/bin/python bench/openai_compat.py --profile chat  # cProfile of one side's calls
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import pstats
import random
import statistics
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import openai
import orjson
from fastapi import FastAPI

from dhub.api.app import create_app
from dhub.settings import Settings

TOKEN = "bench_interop_token"
API = "/api/v1"
GOAL_MS = 1.0
MESSAGE = "Where is my order?"
# A chat agent whose reply is a model's (the demo model here): start, llm, end.
CHAT = {
    "name": "bench-chat", "description": "Answers with a model.", "mode": "workflow",
    "input_mode": "chat",
    "nodes": [
        {"id": "start", "type": "start", "config": {"variables": [
            {"name": "message", "type": "string"}]}},
        {"id": "think", "type": "llm", "config": {
            "model_provider": "openai", "model": "gpt-4o-mini", "prompt": "{{ sys.message }}",
            "reasoning_effort": "none", "output": "answer"}},
        {"id": "end", "type": "end", "config": {"outputs": [
            {"name": "answer", "type": "string", "value": "{{ answer }}"}]}},
    ],
    "edges": [{"source": "start", "target": "think"}, {"source": "think", "target": "end"}],
}  # fmt: skip

Call = Callable[[], Awaitable[None]]


@asynccontextmanager
async def running_app(data_dir: Path) -> AsyncIterator[tuple[FastAPI, httpx.AsyncClient]]:
    """The app over SQLite in ``data_dir``, its lifespan running (it executes the runs),
    with an admin client speaking to it through the ASGI transport."""
    settings = Settings(
        data_dir=data_dir,
        database_url=f"sqlite:///{data_dir / 'dhub.db'}",
        admin_token=TOKEN,
        demo_model=True,
    )
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        headers = {"Authorization": f"Bearer {TOKEN}"}
        async with httpx.AsyncClient(
            transport=transport, base_url="http://bench", headers=headers, timeout=60
        ) as client:
            yield app, client


def ok(response: httpx.Response, status: int = 200) -> Any:
    if response.status_code != status:
        raise SystemExit(f"{response.request.url}: {response.status_code} {response.text}")
    return response.json()


def sse_data(body: bytes) -> list[Any]:
    """The JSON of each ``data:`` line of an SSE body (``[DONE]`` as the string)."""
    found: list[Any] = []
    for line in body.split(b"\n"):
        if line.startswith(b"data: "):
            data = line[6:]
            found.append("[DONE]" if data == b"[DONE]" else orjson.loads(data))
    return found


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


@dataclass
class Side:
    """One way of making the call: ``make`` gives a call bound to a fresh conversation (or
    whatever the side needs fresh), made untimed every ``turns`` calls."""

    name: str
    make: Callable[[], Awaitable[Call]]
    times: list[float] = field(default_factory=list)  # wall time per call
    cpu: list[float] = field(default_factory=list)  # the process's CPU time per call
    _call: Call | None = None
    _used: int = 0

    async def call(self, turns: int) -> tuple[float, float]:
        if self._call is None or self._used >= turns:
            self._call, self._used = await self.make(), 0
        self._used += 1
        started, cpu = time.perf_counter(), time.process_time()
        await self._call()
        return time.perf_counter() - started, time.process_time() - cpu


def chat_sides(client: httpx.AsyncClient, agent_id: str, expected: str) -> list[Side]:
    async def conversation() -> str:
        made = await client.post(f"{API}/agents/{agent_id}/conversations")
        return str(ok(made, 201)["id"])

    def check(answer: str) -> None:
        if answer != expected:
            raise SystemExit(f"unexpected answer: {answer!r}")

    async def rest() -> Call:
        url = f"{API}/conversations/{await conversation()}/messages"

        async def call() -> None:
            response = await client.post(url, json={"content": MESSAGE, "stream": True})
            last = sse_data(response.content)[-1]
            check(last["data"]["outputs"]["answer"])

        return call

    async def rest_events() -> Call:
        url = f"{API}/conversations/{await conversation()}/messages"
        accept = {"Accept": "text/event-stream"}

        async def call() -> None:
            run = ok(await client.post(url, json={"content": MESSAGE}), 202)
            events = await client.get(f"{API}/runs/{run['id']}/events", headers=accept)
            check(sse_data(events.content)[-1]["data"]["outputs"]["answer"])

        return call

    def completions(stream: bool) -> Callable[[], Awaitable[Call]]:
        async def make() -> Call:
            headers = {"X-Dhub-Conversation": await conversation()}
            body = {"model": CHAT["name"], "stream": stream,
                    "messages": [{"role": "user", "content": MESSAGE}]}  # fmt: skip

            async def call() -> None:
                response = await client.post("/v1/chat/completions", json=body, headers=headers)
                if stream:
                    chunks = sse_data(response.content)
                    check(chunks[1]["choices"][0]["delta"]["content"])
                else:
                    check(ok(response)["choices"][0]["message"]["content"])

            return call

        return make

    sdk = openai.AsyncOpenAI(
        base_url="http://bench/v1", api_key=TOKEN, http_client=client, max_retries=0
    )

    async def official() -> Call:
        headers = {"X-Dhub-Conversation": await conversation()}

        async def call() -> None:
            reply = await sdk.chat.completions.create(
                model=str(CHAT["name"]), messages=[{"role": "user", "content": MESSAGE}],
                extra_headers=headers,
            )  # fmt: skip
            check(reply.choices[0].message.content or "")

        return call

    return [
        Side("rest", rest),
        Side("rest, 202 + events", rest_events),
        Side("chat completions", completions(False)),
        Side("chat completions, stream", completions(True)),
        Side("openai client", official),
    ]


async def measure(sides: list[Side], rounds: int, warmup: int, turns: int, seed: int) -> None:
    order = random.Random(seed)
    for _ in range(warmup):
        for side in sides:
            await side.call(turns)
    gc.collect()
    gc.freeze()
    for _ in range(rounds):
        gc.collect()
        for side in order.sample(sides, len(sides)):
            wall, cpu = await side.call(turns)
            side.times.append(wall)
            side.cpu.append(cpu)


async def profile(side: Side, calls: int, turns: int, dump: str | None) -> None:
    for _ in range(20):
        await side.call(turns)
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(calls):
        await side.call(turns)
    profiler.disable()
    if dump:
        profiler.dump_stats(dump)
    pstats.Stats(profiler).sort_stats("tottime").print_stats(30)


def added(side: list[float], base: list[float]) -> float:
    """What a side adds to the base, in ms: the median of the per-round differences."""
    return statistics.median(a - b for a, b in zip(side, base, strict=True)) * 1000


def report(sides: list[Side], title: str) -> None:
    """Wall time (p50, p95, added) and the process's CPU time (p50, added) per call. The CPU
    time is the steadier figure on a shared machine: other processes' load stretches the
    wall time of every await, not the work done."""
    base = sides[0]
    print(f"\n{title}: {len(base.times)} rounds, ms per call")
    print(f"{'side':28} {'p50':>8} {'p95':>8} {'added':>8} {'CPU p50':>8} {'added':>8}")
    for side in sides:
        p50, p95 = statistics.median(side.times) * 1000, percentile(side.times, 0.95) * 1000
        cpu = statistics.median(side.cpu) * 1000
        more = ("", "")
        if side is not base:
            more = (f"{added(side.times, base.times):+.3f}", f"{added(side.cpu, base.cpu):+.3f}")
        print(f"{side.name:28} {p50:8.3f} {p95:8.3f} {more[0]:>8} {cpu:8.3f} {more[1]:>8}")


async def main_async(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        async with running_app(Path(tmp)) as (_, client):
            agent_id = ok(await client.post(f"{API}/agents", json=CHAT), 201)["id"]
            first = await client.post(
                "/v1/chat/completions",
                json={"model": CHAT["name"], "messages": [{"role": "user", "content": MESSAGE}]},
            )
            expected = ok(first)["choices"][0]["message"]["content"]
            sides = chat_sides(client, agent_id, expected)
            if args.profile:
                chosen = [s for s in sides if s.name.startswith(args.profile)]
                await profile(chosen[0], args.rounds, args.turns, args.profile_out)
                return
            await measure(sides, args.rounds, args.warmup, args.turns, args.seed)
            report(sides, f"a turn of a chat agent (demo model), {args.turns} turns per "
                   "conversation")  # fmt: skip
            wall, cpu = added(sides[2].times, sides[0].times), added(sides[2].cpu, sides[0].cpu)
            verdict = "met" if wall < GOAL_MS else "NOT met"
            print(f"\ngoal: chat completions under {GOAL_MS} ms over rest: {verdict} "
                  f"({wall:+.3f} ms wall, {cpu:+.3f} ms CPU)")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--turns", type=int, default=10, help="calls per conversation")
    parser.add_argument("--seed", type=int, default=20)
    parser.add_argument("--profile", metavar="SIDE", help="cProfile --rounds calls of one side")
    parser.add_argument("--profile-out", metavar="FILE", help="also write the profile there")
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
