"""What recording metrics costs (DHUB_METRICS on against off; docs/observability.md).

(a) durable runs, as bench/runs.py measures them: ms per node of a chain of 20 code nodes on
    SQLite (every step saved and, with metrics on, timed and counted), and 200 concurrent runs
    of a 10-step chain whose function waits 10 ms;
(b) HTTP: GET /healthz through the whole app (middleware, routing, a database read), in
    process, per request;
(c) one scrape of GET /metrics after those runs;
(d) each hook alone, in a loop: what recording adds per step, model call or sandbox call.

Off and on alternate, ROUNDS times each (each first half the time); the median of each is
kept (this machine's runs vary by about 30% from one to the next: bench/README.md). Goal: on
within 5% of off.

    .venv/bin/python bench/metrics.py
"""

from __future__ import annotations

import asyncio
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from dhub.api.app import create_app
from dhub.api.metrics import HttpMetrics
from dhub.observability import metrics
from dhub.settings import Settings
from runs import concurrent, dhub_per_node  # bench/ is on sys.path: bench/runs.py's runs

RESULTS = Path(__file__).parent / "results"
ROUNDS = 8
REQUESTS = 2000


def alternate(measure: Callable[[], float]) -> tuple[float, float]:
    """The medians of ``measure()`` with metrics off and on, rounds alternating."""
    seen: dict[str, list[float]] = {"off": [], "on": []}
    for round_ in range(ROUNDS):  # each first in every other round: no order favoured
        for mode in ("off", "on") if round_ % 2 == 0 else ("on", "off"):
            metrics.configure(mode)
            seen[mode].append(measure())
    metrics.configure("off")
    return statistics.median(seen["off"]), statistics.median(seen["on"])


def per_node(tmp: str) -> float:
    path = Path(tmp) / f"chain-{time.perf_counter_ns()}.db"
    return asyncio.run(dhub_per_node(f"sqlite:///{path}", "chain", 20, 20)) * 1e3


def concurrent_runs(tmp: str) -> float:
    path = Path(tmp) / f"concurrent-{time.perf_counter_ns()}.db"
    return asyncio.run(concurrent(f"sqlite:///{path}", 200))


def http(client: TestClient) -> float:
    """µs per GET /healthz, ``REQUESTS`` of them one after the other."""
    started = time.perf_counter()
    for _ in range(REQUESTS):
        assert client.get("/healthz").status_code == 200
    return (time.perf_counter() - started) / REQUESTS * 1e6


def hooks() -> dict[str, float]:
    """µs per call of each hook with metrics on (off: one test of a flag), in a loop: the
    bound on what recording can add, free of the runs' noise."""
    usage = {"input_tokens": 120, "output_tokens": 30, "reasoning_tokens": 0, "cached_tokens": 0}
    calls: dict[str, Callable[[], None]] = {
        "step saved": lambda: metrics.step_saved(
            "agent.x", 0.001, first=False, ended=None, created_at=None
        ),
        "run's last step": lambda: metrics.step_saved(
            "agent.x", 0.001, first=False, ended="succeeded", created_at=1
        ),
        "model call": lambda: metrics.model_answered("openai", "gpt", usage, 0.5),
        "sandbox call": lambda: metrics.sandbox_called("ok", 0.01),
        "step saved, off": lambda: metrics.step_saved(
            "agent.x", 0.001, first=False, ended=None, created_at=None
        ),
    }
    costs = {}
    for name, call in calls.items():
        metrics.configure("off" if name.endswith("off") else "on")
        started = time.perf_counter()
        for _ in range(100_000):
            call()
        costs[name] = (time.perf_counter() - started) / 100_000 * 1e6
        print(f"{'µs per hook: ' + name:48} {costs[name]:10.2f}")
    for mode in ("on", "off"):
        metrics.configure(mode)
        name = f"request in HttpMetrics, {mode}"
        costs[name] = asyncio.run(_middleware())
        print(f"{'µs per ' + name:48} {costs[name]:10.2f}")
    metrics.configure("off")
    return costs


async def _middleware(count: int = 100_000) -> float:
    """µs per request through ``HttpMetrics`` around an app that answers at once."""

    async def answer(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    async def send(message: Any) -> None:
        pass

    async def receive() -> Any:
        return {"type": "http.request"}

    wrapped = HttpMetrics(answer)
    scope = {"type": "http", "method": "GET", "path": "/healthz"}
    started = time.perf_counter()
    for _ in range(count):
        await wrapped(scope, receive, send)
    return (time.perf_counter() - started) / count * 1e6


def main() -> None:
    rows: dict[str, Any] = {"µs per hook": hooks()}
    with tempfile.TemporaryDirectory() as tmp:
        table = [
            ("ms per node, chain of 20, SQLite", lambda: per_node(tmp)),
            ("s for 200 concurrent 10 x 10 ms runs, SQLite", lambda: concurrent_runs(tmp)),
        ]
        settings = Settings(
            data_dir=Path(tmp) / "data",
            database_url=f"sqlite:///{tmp}/app.db",
            admin_token="bench_admin_token_0123456789",
            metrics="on",
        )
        with TestClient(create_app(settings)) as client:
            http(client)  # warm up: the first requests build caches
            table.append(("µs per GET /healthz", lambda: http(client)))
            for name, measure in table:
                off, on = alternate(measure)
                rows[name] = {"off": off, "on": on, "overhead_pct": (on / off - 1) * 100}
                print(f"{name:48} off {off:10.3f}  on {on:10.3f}  {(on / off - 1) * 100:+6.1f}%")
            metrics.configure("on")
            started = time.perf_counter()
            scraped = client.get("/metrics")
            ms = (time.perf_counter() - started) * 1e3
            series = sum(1 for line in scraped.text.splitlines() if not line.startswith("#"))
            rows["ms per scrape"] = {"ms": ms, "series": series}
            print(f"{'ms per scrape of GET /metrics':48} {ms:.2f} ({series} series)")
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"metrics-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}.json"
    out.write_text(json.dumps(rows, indent=2))
    print(f"results: {out}")


if __name__ == "__main__":
    main()
