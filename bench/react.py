"""React loop overhead per iteration: dhub against pydantic-ai and LangGraph, in the same run.

One iteration is one model call that asks for one tool call, the tool running, and its result
going back to the model. A run of N iterations is N such turns and a last model call that
answers with text. The model answers at once, decided by the number of tool results in its
request. The tool is trivial (``ping(n) -> n``). Nothing is saved on any side. What is measured
is each framework's own cost of driving the loop. Sides:

- **dhub**: ``run_workflow`` on a compiled react agent (``compile_agent`` with no token budget,
  so nothing is compacted). The model is ``ProviderModel`` over dhub's ``FunctionModel``, which
  streams its reply through the provider client as a real provider would, and reports usage as
  real providers do. The function port is an in-process fake that answers at once, so the
  sandbox is *not* measured. Two variants: **token budget** compiles the agent with the
  server's default budget (32,000 input tokens, as ``dhub serve`` compiles react agents), so
  each call is checked against it; **usage estimated** replies without usage, so the provider
  client counts the tokens itself.
- **dhub + sandbox**: the first row with the real function port (``SandboxFunctions`` over a
  warm bubblewrap pool), for reference.
- **pydantic-ai**: ``Agent`` with ``pydantic_ai.models.function.FunctionModel`` (its replies
  report usage, so it does not estimate it) and one ``@agent.tool_plain`` tool, ``await
  agent.run(...)`` with a request limit of N + 1 (the default, 50, stops a 50-iteration run).
- **LangGraph**: ``langgraph.prebuilt.create_react_agent`` (deprecated in LangGraph 1.x for
  ``langchain.agents.create_agent``, which is not installed) with a fake chat model
  (``BaseChatModel``, ``bind_tools`` returning itself), through ``ainvoke``; and through sync
  ``invoke`` with a sync tool, which LangGraph's ``ToolNode`` runs in its thread pool.

The async peers' tools are ``async def``: both frameworks run a sync tool in a worker thread,
which dhub's in-process fake does not pay. The peers' fake models answer in one piece, while
dhub's streams its reply, delta by delta, through the provider client: that favours the peers.
Every side runs in one process and one event loop, with ``gc.freeze()`` after set-up and a
``gc.collect()`` before each timed run. For each N (1, 10, 50) every side is warmed up with 3
runs, then the sides take turns, one run each per round in a new random order (seeded), until
the time budget is spent (at least 5 rounds). A fixed or rotating order would give each side
the same predecessor, and a run right after another framework's is slower than one after its
own. Taking turns costs the fastest side most (each of its runs starts with caches that the
side before it filled): ``--alone`` measures each side on its own instead, the budget split
evenly. The script prints µs per iteration (the median run's time / N, and the 90th
percentile) and the ratio to dhub's first row, and writes bench/results/react-<UTC time>.json
(gitignored). The goal: 10x less overhead per iteration than the peers.

    .venv/bin/python bench/react.py             # about 2 minutes; needs the bench group
    .venv/bin/python bench/react.py --alone     # each side on its own
    .venv/bin/python bench/react.py --profile 50 # cProfile of dhub's side at N = 50
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import json
import os
import platform
import pstats
import random
import statistics
import tempfile
import time
import warnings
from collections.abc import Awaitable, Callable, Sequence
from importlib.metadata import version
from pathlib import Path
from typing import Any

from dhub.engine.compile import compile_agent
from dhub.engine.state import AwaitConfirmation, AwaitInput, CallFunction, Done
from dhub.providers.registry import Providers
from dhub.providers.testing import FunctionModel, Reply
from dhub.providers.types import ModelRequest, Usage
from dhub.runtime.executor import run_workflow
from dhub.runtime.model import ProviderModel
from dhub.runtime.ports import Answer, Decision, FunctionPort, RealClock, SandboxFunctions
from dhub.sandbox.runner import SandboxRunner, SandboxSettings

RESULTS = Path(__file__).parent / "results"
SIZES = (1, 10, 50)
TOOL_SOURCE = "def ping(n: int) -> int:\n    return n\n"
ANSWER = "done"
BUDGET = 32_000  # Settings.default_max_input_tokens: what the server compiles react agents with
USAGE = Usage(100, 10)  # what a real provider reports with each reply

Run = Callable[[], Awaitable[None]]


# -- dhub --------------------------------------------------------------------------------------


def _agent_doc(iterations: int) -> dict[str, Any]:
    tool = {"name": "ping", "description": "Echo n.", "function": {"source": TOOL_SOURCE}}
    return {
        "name": "bench", "description": "", "mode": "react", "input_mode": "chat",
        "agent": {"instructions": "Call ping until told otherwise.", "model_provider": "bench",
                  "model": "instant", "tools": [tool], "actors": [],
                  "max_iterations": iterations + 1},
    }  # fmt: skip


def _dhub_reply(iterations: int, usage: Usage | None) -> Callable[[ModelRequest], Reply]:
    def reply(request: ModelRequest) -> Reply:
        done = sum(1 for m in request.messages if m.role == "tool")
        if done >= iterations:
            return Reply(ANSWER, usage=usage)
        call = {"id": f"c{done}", "name": "ping", "arguments": {"n": done}}
        return Reply(tool_calls=[call], usage=usage)

    return reply


class Instant:
    """The function port: ``ping`` answered in process, at once (no sandbox)."""

    def __init__(self) -> None:
        self.calls = 0

    async def call(self, request: CallFunction) -> Done:
        self.calls += 1
        return Done(request.command_id, True, request.inputs["n"])


class Nobody:
    """The human port: the bench's agent has no actors and asks nobody."""

    async def ask(self, request: AwaitInput, problem: str | None = None) -> Answer:
        raise AssertionError("nobody to ask")

    async def confirm(self, request: AwaitConfirmation) -> Decision:
        raise AssertionError("nobody to confirm")


def dhub(
    iterations: int, functions: FunctionPort, usage: Usage | None = USAGE, budget: bool = False
) -> Run:
    graph = compile_agent(_agent_doc(iterations), _budget if budget else None)
    model = FunctionModel(_dhub_reply(iterations, usage), name="bench")
    providers = Providers()
    providers.add(model)
    port, clock, human = ProviderModel(providers), RealClock(), Nobody()

    async def run() -> None:
        result = await run_workflow(graph, {}, functions=functions, model=port, clock=clock,
                                    human=human, context={"message": "Hello"})  # fmt: skip
        assert result.status == "succeeded", result.error
        assert result.outputs == {"answer": ANSWER}, result.outputs
        assert len(model.requests) == iterations + 1, len(model.requests)
        model.requests.clear()  # the test model keeps every request
        if isinstance(functions, Instant):
            assert functions.calls == iterations, functions.calls
            functions.calls = 0

    return run


def dhub_instant(iterations: int) -> Run:
    return dhub(iterations, Instant())


def _budget(provider: str, model: str, wanted: int | None) -> int:
    return BUDGET  # the server's default max_input_tokens (the test model has no window)


def dhub_budget(iterations: int) -> Run:
    return dhub(iterations, Instant(), budget=True)


def dhub_estimated(iterations: int) -> Run:
    return dhub(iterations, Instant(), usage=None)


def dhub_sandbox(functions: SandboxFunctions) -> Callable[[int], Run]:
    return lambda iterations: dhub(iterations, functions)


# -- pydantic-ai -------------------------------------------------------------------------------


def pydantic_ai(iterations: int) -> Run:
    from pydantic_ai import Agent
    from pydantic_ai.messages import (
        ModelMessage,
        ModelRequest,
        ModelResponse,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
    )
    from pydantic_ai.models.function import AgentInfo, FunctionModel
    from pydantic_ai.usage import RequestUsage, UsageLimits

    usage = RequestUsage(input_tokens=USAGE.input_tokens, output_tokens=USAGE.output_tokens)

    def reply(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        done = sum(1 for m in messages if isinstance(m, ModelRequest)
                   for p in m.parts if isinstance(p, ToolReturnPart))  # fmt: skip
        if done >= iterations:
            return ModelResponse(parts=[TextPart(ANSWER)], usage=usage)
        call = ToolCallPart("ping", {"n": done}, tool_call_id=f"c{done}")
        return ModelResponse(parts=[call], usage=usage)

    agent = Agent(FunctionModel(reply), instructions="Call ping until told otherwise.")
    limits = UsageLimits(request_limit=iterations + 1)  # the default is 50 requests
    calls = 0

    @agent.tool_plain
    async def ping(n: int) -> int:
        """Echo n."""
        nonlocal calls
        calls += 1
        return n

    async def run() -> None:
        nonlocal calls
        calls = 0
        result = await agent.run("Hello", usage_limits=limits)
        assert result.output == ANSWER and calls == iterations, (result.output, calls)

    return run


# -- LangGraph ---------------------------------------------------------------------------------


def langgraph(iterations: int, sync: bool = False) -> Run:
    from langchain_core.language_models.chat_models import BaseChatModel
    from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
    from langchain_core.outputs import ChatGeneration, ChatResult
    from langchain_core.tools import tool
    from langgraph.prebuilt import create_react_agent

    class InstantChat(BaseChatModel):
        """Answers at once: a ``ping`` call per tool result so far, then the answer."""

        @property
        def _llm_type(self) -> str:
            return "instant"

        def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> InstantChat:
            return self

        def _generate(self, messages: list[BaseMessage], *_: Any, **__: Any) -> ChatResult:
            done = sum(1 for m in messages if isinstance(m, ToolMessage))
            if done >= iterations:
                message = AIMessage(content=ANSWER)
            else:
                message = AIMessage(content="", tool_calls=[
                    {"id": f"c{done}", "name": "ping", "args": {"n": done}}])  # fmt: skip
            return ChatResult(generations=[ChatGeneration(message=message)])

        async def _agenerate(self, messages: list[BaseMessage], *a: Any, **k: Any) -> ChatResult:
            return self._generate(messages, *a, **k)  # the default would run it in a thread

    calls = 0

    async def ping(n: int) -> int:
        """Echo n."""
        nonlocal calls
        calls += 1
        return n

    def ping_sync(n: int) -> int:
        """Echo n."""
        nonlocal calls
        calls += 1
        return n

    with warnings.catch_warnings():  # moved to langchain.agents.create_agent in LangGraph 1.x
        warnings.simplefilter("ignore", DeprecationWarning)
        app = create_react_agent(InstantChat(), [tool("ping")(ping_sync if sync else ping)],
                                 prompt="Call ping until told otherwise.")  # fmt: skip
    config: Any = {"recursion_limit": 2 * iterations + 10}
    start = {"messages": [("user", "Hello")]}

    async def run() -> None:
        nonlocal calls
        calls = 0
        if sync:  # blocks the loop for the whole run, which nothing else needs meanwhile
            result = app.invoke(start, config)
        else:
            result = await app.ainvoke(start, config)
        assert result["messages"][-1].content == ANSWER and calls == iterations, (result, calls)

    return run


def langgraph_sync(iterations: int) -> Run:
    return langgraph(iterations, sync=True)


# -- measuring ---------------------------------------------------------------------------------


async def measure(
    sides: dict[str, Callable[[int], Run]], iterations: int, budget: float, max_rounds: int
) -> dict[str, list[float]]:
    """Seconds per run of each side, taking turns (in a new random order every round)."""
    runs = {name: make(iterations) for name, make in sides.items()}
    for run in runs.values():  # warm up
        for _ in range(3):
            await run()
    gc.collect()
    gc.freeze()
    times: dict[str, list[float]] = {name: [] for name in runs}
    order = list(runs)
    shuffle = random.Random(iterations).shuffle
    deadline = time.perf_counter() + budget
    rounds = 0
    while rounds < 5 or (time.perf_counter() < deadline and rounds < max_rounds):
        for name in order:
            run = runs[name]
            gc.collect()  # each run pays for collecting its own garbage, not the last side's
            start = time.perf_counter()
            await run()
            times[name].append(time.perf_counter() - start)
        shuffle(order)
        rounds += 1
    gc.unfreeze()
    return times


def _versions() -> dict[str, str]:
    names = ("pydantic-ai-slim", "langgraph", "langgraph-prebuilt", "langchain-core", "pydantic")
    return {name: version(name) for name in names}


async def bench(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="dhub-bench-envs-") as envs:
        sandbox = SandboxFunctions(SandboxRunner(SandboxSettings(envs_dir=Path(envs))), "bench")
        try:
            sides: dict[str, Callable[[int], Run]] = {
                "dhub": dhub_instant,
                "dhub, token budget": dhub_budget,
                "dhub, usage estimated": dhub_estimated,
                "dhub + sandbox": dhub_sandbox(sandbox),
                "pydantic-ai": pydantic_ai,
                "LangGraph (ainvoke)": langgraph,
                "LangGraph (invoke)": langgraph_sync,
            }
            if args.no_sandbox:
                del sides["dhub + sandbox"]
            rows = []
            for n in args.sizes:
                times: dict[str, list[float]] = {}
                if args.alone:
                    for name, make in sides.items():
                        seconds = args.seconds / len(sides)
                        times |= await measure({name: make}, n, seconds, args.max_rounds)
                else:
                    times = await measure(sides, n, args.seconds, args.max_rounds)
                rows.append(_row(n, times))
                _print_row(rows[-1])
        finally:
            await sandbox.close()
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"react-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}.json"
    machine = {"cpus": os.cpu_count(), "python": platform.python_version(),
               "platform": platform.platform()}  # fmt: skip
    settings = {"mode": "alone" if args.alone else "turns", "seconds": args.seconds,
                "max_rounds": args.max_rounds}  # fmt: skip
    out.write_text(json.dumps({"machine": machine, "versions": _versions(),
                               "settings": settings, "rows": rows}, indent=2))  # fmt: skip
    print("ratio = peer's µs per iteration / dhub's (in-process tool); the goal is >= 10x")
    print(f"results: {out}")


def _row(n: int, times: dict[str, list[float]]) -> dict[str, Any]:
    per = {name: statistics.median(ts) / n for name, ts in times.items()}
    p90 = {name: sorted(ts)[int(len(ts) * 0.9)] / n for name, ts in times.items()}
    base = per["dhub"]
    return {
        "iterations": n,
        "runs": {name: len(ts) for name, ts in times.items()},
        "us_per_iteration": {name: s * 1e6 for name, s in per.items()},
        "us_per_iteration_p90": {name: s * 1e6 for name, s in p90.items()},
        "over_dhub": {name: s / base for name, s in per.items()},
    }


def _print_row(row: dict[str, Any]) -> None:
    n = row["iterations"]
    for name, us in row["us_per_iteration"].items():
        print(f"N={n:<3} {name:22} {us:>9.1f} µs/iteration  (p90 "
              f"{row['us_per_iteration_p90'][name]:>9.1f})  {row['over_dhub'][name]:>6.1f}x  "
              f"[{row['runs'][name]} runs]")  # fmt: skip


async def profile(iterations: int, runs: int) -> None:
    """cProfile of dhub's side (in-process tool): the top functions by own and by total time."""
    run = dhub_instant(iterations)
    for _ in range(3):
        await run()
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(runs):
        await run()
    profiler.disable()
    stats = pstats.Stats(profiler)
    print(f"{runs} runs of {iterations} iterations: divide by {runs * iterations} for a figure "
          "per iteration (cProfile slows Python calls down: compare shares, not µs)")  # fmt: skip
    stats.sort_stats("tottime").print_stats(25)
    stats.sort_stats("cumulative").print_stats("src/dhub/", 40)  # dhub's own functions


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES),
                        help="iterations per run (default: 1 10 50)")  # fmt: skip
    parser.add_argument("--seconds", type=float, default=30.0,
                        help="time budget per size, all sides together")  # fmt: skip
    parser.add_argument("--max-rounds", type=int, default=2000)
    parser.add_argument("--no-sandbox", action="store_true", help="skip the sandbox row")
    parser.add_argument("--alone", action="store_true",
                        help="measure each side on its own instead of taking turns")  # fmt: skip
    parser.add_argument("--profile", type=int, metavar="N",
                        help="only profile dhub's side at N iterations per run")  # fmt: skip
    args = parser.parse_args()
    if args.profile:
        asyncio.run(profile(args.profile, max(20, 2000 // args.profile)))
    else:
        asyncio.run(bench(args))


if __name__ == "__main__":
    main()
