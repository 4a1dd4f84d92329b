"""Streaming overhead of dhub's provider layer against the bare OpenAI SDK, same server, same run.

A local server speaking OpenAI's Chat Completions wire protocol (tests/support/wire, in its own
process so it does not share this one's GIL) streams the same 50-delta answer to both sides:

- **bare SDK**: ``AsyncOpenAI.chat.completions.create(stream=True)``, iterating the chunks;
- **dhub client**: ``Providers.client("openai").stream(request)`` — the catalog check, the
  retry/timeout wrapper, the OpenAI adapter (the same SDK underneath), usage and the final
  message;
- **dhub llm node**: a one-``llm``-node workflow through the executor with a live callback,
  measured from the run's start to its first ``llm.delta`` (the engine's share added).

Reports the median and p90 time to first delta and the median time per later delta, with the
difference to the bare SDK; rounds alternate between the sides. Goal: under 1 ms added to the
first delta.

    .venv/bin/python bench/providers.py [--rounds 300]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).parent / "results"
DELTAS = 50
MODEL = "gpt-4o-mini"
PROMPT = "Write a one-line headline for this alert."


def serve() -> None:
    """The server process: every chat completion streams the same answer."""
    sys.path.insert(0, str(ROOT))
    from tests.support.wire import OpenAIReply, OpenAIServer
    from tests.support.wire.server import RecordedRequest, Rendered

    reply = OpenAIReply([f"w{i} " for i in range(DELTAS)])

    class Server(OpenAIServer):
        def scripted(self, request: RecordedRequest) -> Rendered:
            return reply.render(request)

    server = Server()
    server.start()
    print(server.base_url, flush=True)
    sys.stdin.read()  # until the bench closes our stdin
    server.stop()


Sample = tuple[float, float]  # time to first delta, time per later delta (seconds)


async def bare(base_url: str, key: str) -> Callable[[], Awaitable[Sample]]:
    import openai

    client = openai.AsyncOpenAI(base_url=base_url, api_key=key, max_retries=0)

    async def once() -> Sample:
        began = time.perf_counter()
        first, count = 0.0, 0
        stream = await client.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": PROMPT}], stream=True,
            stream_options={"include_usage": True},
        )  # fmt: skip
        async for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                count += 1
                if count == 1:
                    first = time.perf_counter()
        ended = time.perf_counter()
        return first - began, (ended - first) / (count - 1)

    return once


def providers_for(base_url: str, key: str) -> Any:
    from pydantic import SecretStr

    from dhub.providers.config import EntryConfig, ProvidersConfig
    from dhub.providers.registry import Providers

    entry = EntryConfig(type="openai", base_url=base_url, api_key=SecretStr(key))
    return Providers.from_config(ProvidersConfig(entries={"openai": entry}))


async def dhub_client(base_url: str, key: str) -> Callable[[], Awaitable[Sample]]:
    from dhub.providers.types import Message, ModelRequest, TextDelta

    client = providers_for(base_url, key).client("openai", MODEL)
    request = ModelRequest(MODEL, (Message("user", PROMPT),))

    async def once() -> Sample:
        began = time.perf_counter()
        first, count = 0.0, 0
        async for item in client.stream(request):
            if isinstance(item, TextDelta):
                count += 1
                if count == 1:
                    first = time.perf_counter()
        ended = time.perf_counter()
        return first - began, (ended - first) / (count - 1)

    return once


async def dhub_node(base_url: str, key: str) -> Callable[[], Awaitable[Sample]]:
    from dhub.engine.compile import compile_document
    from dhub.runtime.executor import run_workflow
    from dhub.runtime.model import ProviderModel
    from dhub.runtime.ports import FakeClock, NoModel  # noqa: F401  (FakeClock: no sleeps)

    graph = compile_document({
        "name": "bench", "description": "", "mode": "workflow", "input_mode": "event",
        "nodes": [
            {"id": "start", "type": "start", "config": {}},
            {"id": "ask", "type": "llm", "config": {"model_provider": "openai", "model": MODEL,
                                                    "prompt": PROMPT, "output": "text"}},
            {"id": "end", "type": "end", "config": {}},
        ],
        "edges": [{"source": "start", "target": "ask"}, {"source": "ask", "target": "end"}],
    })  # fmt: skip
    model = ProviderModel(providers_for(base_url, key))

    async def once() -> Sample:
        stamps: list[float] = []
        began = time.perf_counter()
        result = await run_workflow(
            graph, {}, functions=None, model=model, clock=FakeClock(), human=None,  # type: ignore[arg-type]
            live=lambda _: stamps.append(time.perf_counter()),
        )  # fmt: skip
        assert result.status == "succeeded", result.error
        return stamps[0] - began, (stamps[-1] - stamps[0]) / (len(stamps) - 1)

    return once


def summary(samples: list[Sample]) -> dict[str, float]:
    firsts = sorted(s[0] for s in samples)
    return {
        "first_ms_median": statistics.median(firsts) * 1000,
        "first_ms_p90": firsts[int(len(firsts) * 0.9)] * 1000,
        "per_delta_us_median": statistics.median(s[1] for s in samples) * 1e6,
    }


async def measure(base_url: str, key: str, rounds: int) -> dict[str, dict[str, float]]:
    sides = {"bare SDK": await bare(base_url, key), "dhub client": await dhub_client(base_url, key),
             "dhub llm node": await dhub_node(base_url, key)}  # fmt: skip
    samples: dict[str, list[Sample]] = {name: [] for name in sides}
    for _ in range(20):  # warm up connections and caches
        for once in sides.values():
            await once()
    for _ in range(rounds):
        for name, once in sides.items():
            samples[name].append(await once())
    return {name: summary(found) for name, found in samples.items()}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        return serve()
    server = subprocess.Popen([sys.executable, __file__, "--serve"], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, cwd=ROOT)  # fmt: skip
    try:
        base_url = server.stdout.readline().strip()  # type: ignore[union-attr]
        results = asyncio.run(measure(base_url, "sk-test-wire-openai", args.rounds))
    finally:
        server.stdin.close()  # type: ignore[union-attr]
        server.wait(10)
    base = results["bare SDK"]
    print(f"{DELTAS} deltas per answer, {args.rounds} rounds, local wire server (own process)")
    print(f"{'':16}{'first ms p50':>14}{'p90':>8}{'added p50':>11}{'µs/delta':>10}{'added':>8}")
    for name, row in results.items():
        added = row["first_ms_median"] - base["first_ms_median"]
        per = row["per_delta_us_median"] - base["per_delta_us_median"]
        print(f"{name:16}{row['first_ms_median']:14.3f}{row['first_ms_p90']:8.3f}"
              f"{added:+11.3f}{row['per_delta_us_median']:10.1f}{per:+8.1f}")  # fmt: skip
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"providers-{time.strftime('%Y%m%dT%H%M%S')}.json"
    out.write_text(json.dumps({"deltas": DELTAS, "rounds": args.rounds, "results": results},
                              indent=2))  # fmt: skip


if __name__ == "__main__":
    main()
