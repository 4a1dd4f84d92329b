"""Sandbox call overhead: a trivial function (``def main(x): return x + 1``) called through

- the warm pool (the product's default: bubblewrap, workers started ahead), after a warm-up,
  by 1, 2 and 4 concurrent callers; with several callers, once all calling one function of one
  owner (one pool key) and once each calling as an owner of its own (a key each);
- cold (``SandboxSettings(warm=False)``): a new bubblewrap sandbox and interpreter per call;
- a bare ``subprocess.run([sys.executable, "-c", ...])`` per call, no sandbox (the floor a
  process per call cannot beat), and the same with ``python -I -S`` (no site-packages).

Each case runs for about 3 s (at least 20 calls). Prints calls/s and p50/p99 latency per case
and writes bench/results/sandbox-<UTC time>.json. Goal: warm pool p50 <= 2 ms and >= 300 calls/s
with one caller. Needs bubblewrap (``make install`` installs it) and root or user namespaces.

    .venv/bin/python bench/sandbox.py      # about 30 s; make bench runs it too
"""

from __future__ import annotations

import asyncio
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from dhub.sandbox.envs import base_python
from dhub.sandbox.runner import FunctionCall, SandboxRunner, SandboxSettings

RESULTS = Path(__file__).parent / "results"
SOURCE = "def main(x):\n    return x + 1\n"
BUDGET = 3.0  # seconds per case
MIN_CALLS = 20


def _row(case: str, callers: int, latencies: list[float], elapsed: float) -> dict[str, Any]:
    ordered = sorted(latencies)
    return {
        "case": case,
        "callers": callers,
        "calls": len(ordered),
        "calls_per_s": len(ordered) / elapsed,
        "p50_ms": statistics.median(ordered) * 1e3,
        "p99_ms": ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1e3,
    }


async def _drive(
    call: Callable[[int, int], Awaitable[None]], callers: int
) -> tuple[list[float], float]:
    """``callers`` loops calling ``call(caller, i)`` until the budget is spent: each call's
    latency, and the wall time of the whole run."""
    latencies: list[float] = []
    deadline = time.perf_counter() + BUDGET

    async def caller(who: int) -> None:
        i = 0
        while time.perf_counter() < deadline or i < MIN_CALLS // callers:
            start = time.perf_counter()
            await call(who, i)
            latencies.append(time.perf_counter() - start)
            i += 1

    begun = time.perf_counter()
    await asyncio.gather(*(caller(who) for who in range(callers)))
    return latencies, time.perf_counter() - begun


async def sandboxed(
    case: str, settings: SandboxSettings, callers: int, shared: bool
) -> dict[str, Any]:
    runner = SandboxRunner(settings)
    try:

        async def call(who: int, i: int) -> None:
            owner = "bench" if shared else f"bench-{who}"
            result = await runner.call(FunctionCall(SOURCE, {"x": i}, 10, owner=owner))
            assert result.ok and result.value == i + 1, result

        if settings.warm:  # start each key's workers and let the pool settle
            for _ in range(3):
                await asyncio.gather(*(call(who, 0) for who in range(callers)))
            await runner.pool.settle()
        latencies, elapsed = await _drive(call, callers)
    finally:
        await runner.close()
    return _row(case, callers, latencies, elapsed)


def bare(case: str, argv: list[str]) -> dict[str, Any]:
    latencies: list[float] = []
    deadline = time.perf_counter() + BUDGET
    begun = time.perf_counter()
    i = 0
    while time.perf_counter() < deadline or i < MIN_CALLS:
        start = time.perf_counter()
        out = subprocess.run(
            [*argv, f"def main(x):\n    return x + 1\nprint(main({i}))"],
            capture_output=True, check=True, text=True,
        )  # fmt: skip
        latencies.append(time.perf_counter() - start)
        assert out.stdout.strip() == str(i + 1), out
        i += 1
    return _row(case, 1, latencies, time.perf_counter() - begun)


async def main() -> None:
    with tempfile.TemporaryDirectory(prefix="dhub-bench-envs-") as envs:
        rows = await _sandbox_rows(Path(envs))
    rows.append(bare("bare python -c", [sys.executable, "-c"]))
    rows.append(bare("bare python -I -S -c", [base_python(), "-I", "-S", "-c"]))

    print(f"{'case':26} {'callers':>7} {'calls':>6} {'calls/s':>9} {'p50 ms':>8} {'p99 ms':>8}")
    for r in rows:
        print(f"{r['case']:26} {r['callers']:>7} {r['calls']:>6} {r['calls_per_s']:>9.0f} "
              f"{r['p50_ms']:>8.2f} {r['p99_ms']:>8.2f}")  # fmt: skip
    solo = rows[0]
    met = solo["p50_ms"] <= 2 and solo["calls_per_s"] >= 300
    print(
        f"goal (warm pool, one caller: p50 <= 2 ms, >= 300 calls/s): {'met' if met else 'NOT met'}"
    )

    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"sandbox-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}.json"
    machine = {"cpus": os.cpu_count(), "python": platform.python_version(),
               "platform": platform.platform(), "bwrap": _bwrap_version()}  # fmt: skip
    out.write_text(json.dumps({"machine": machine, "goal_met": met, "rows": rows}, indent=2))
    print(f"results: {out}")


async def _sandbox_rows(envs: Path) -> list[dict[str, Any]]:
    warm = SandboxSettings(envs_dir=envs)  # no dependencies here: the directory stays empty
    rows = []
    for callers, shared in ((1, True), (2, True), (4, True), (2, False), (4, False)):
        case = "warm pool" + ("" if callers == 1 else (", one key" if shared else ", key each"))
        rows.append(await sandboxed(case, warm, callers, shared))
    cold = SandboxSettings(envs_dir=envs, warm=False)
    rows.append(await sandboxed("cold (warm=False)", cold, 1, True))
    return rows


def _bwrap_version() -> str:
    try:
        return subprocess.run(["bwrap", "--version"], capture_output=True, text=True).stdout.strip()
    except OSError:
        return "not installed"


if __name__ == "__main__":
    asyncio.run(main())
