"""What recording metrics costs (DHUB_METRICS on against off; docs/observability.md).

(a) durable runs, as bench/runs.py measures them: ms per node of a chain of 20 code nodes on
    SQLite (every step saved and, with metrics on, timed and counted), and 200 concurrent runs
    of a 10-step chain whose function waits 10 ms;
(b) HTTP: GET /healthz through the whole app (middleware, routing, a database read), in
    process, per request;
(c) one scrape of GET /metrics after those runs.

Off and on alternate, ROUNDS times each; the median of each is kept (this machine's runs vary
by about 30% from one to the next: bench/README.md). Goal: on within 5% of off.

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
from dhub.observability import metrics
from dhub.settings import Settings
from runs import concurrent, dhub_per_node  # bench/ is on sys.path: bench/runs.py's runs

RESULTS = Path(__file__).parent / "results"
ROUNDS = 5
REQUESTS = 2000


def alternate(measure: Callable[[], float]) -> tuple[float, float]:
    """The medians of ``measure()`` with metrics off and on, rounds alternating."""
    seen: dict[str, list[float]] = {"off": [], "on": []}
    for _ in range(ROUNDS):
        for mode in ("off", "on"):
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


def main() -> None:
    rows: dict[str, Any] = {}
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
