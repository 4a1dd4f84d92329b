"""What tracing costs a durable run: the same runs with traces off and on, exporting over
OTLP/HTTP to a local stand-in of a collector (a tiny HTTP server on 127.0.0.1 that reads each
request and answers 200), everything in one process as in production.

(a) ms per node, one run at a time, of a chain of 20 code nodes and of a chain of 20 llm nodes
    (their model port an honest fake that answers at once with token counts: a ``chat`` span
    per call), every step saved on SQLite (the shapes of bench/runs.py);
(b) 200 concurrent runs of a 10-step chain whose function waits 10 ms (bench/runs.py (b)).

Off and on alternate, ROUNDS times each, and the medians are compared (goal: on is under 5%
slower). On: the OpenTelemetry SDK with its batch span processor and OTLP/HTTP exporter, as
``OTEL_EXPORTER_OTLP_ENDPOINT`` sets it up (docs/observability.md), the database engines
instrumented too.

    .venv/bin/python bench/traces.py
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import statistics
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from dhub.engine.compile import CompiledGraph, compile_document
from dhub.engine.state import CallChat, CallFunction, CallModel, Done
from dhub.observability import traces
from dhub.runtime.durable import RunExecutor
from dhub.runtime.ports import Live, ModelAnswer, RealClock
from runs import chain, database, start_run, start_runs  # bench/ is on sys.path

RESULTS = Path(__file__).parent / "results"
ROUNDS = 5
USAGE = {"input_tokens": 12, "output_tokens": 3, "reasoning_tokens": 0, "cached_tokens": 0}


class Collector(BaseHTTPRequestHandler):
    """The stand-in collector: reads what it is sent, keeps nothing, answers 200."""

    received = 0  # requests
    bytes = 0

    def do_POST(self) -> None:
        size = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(size)
        Collector.received += 1
        Collector.bytes += size
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


class Wait:
    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    async def call(self, request: CallFunction, host: Any = None) -> Done:
        if self.seconds:
            await asyncio.sleep(self.seconds)
        return Done(request.command_id, True, {"v": 1})


class Instant:
    """The model port: answers at once, with token counts (so spans carry usage)."""

    async def complete(self, request: CallModel, live: Live | None = None) -> ModelAnswer:
        return ModelAnswer("ok", USAGE, "end", request.model)

    async def chat(self, request: CallChat, live: Live | None = None) -> ModelAnswer:
        return ModelAnswer({"content": "ok", "tool_calls": []}, USAGE, "end", request.model)


def llm_chain(steps: int) -> dict[str, Any]:
    doc = chain(steps)
    for node in doc["nodes"][1:-1]:
        node.update(type="llm", config={"model_provider": "openai", "model": "bench-model",
                                        "prompt": "Say ok.", "output": "v"})  # fmt: skip
    return doc


def executor(db: Any, graph: CompiledGraph, seconds: float) -> RunExecutor:
    async def graphs(agent_id: str, version: int, user_id: str) -> CompiledGraph:
        return graph

    port = Wait(seconds)
    return RunExecutor(db, graphs, lambda _: port, Instant(), RealClock(), "bench", 60)


async def _database(url: str) -> Any:
    db = await database(url)
    traces.instrument_engines(db.engines)  # nothing when tracing is off
    return db


async def per_node(url: str, doc: dict[str, Any], n: int, runs_count: int) -> float:
    db = await _database(url)
    runs = executor(db, compile_document(doc), 0)
    started = time.perf_counter()
    for _ in range(runs_count):
        result = await runs.wait(await start_run(db, runs))
        assert result is not None and result.status == "succeeded", result
    elapsed = time.perf_counter() - started
    await runs.close()
    await db.dispose()
    return elapsed / (runs_count * n) * 1e3


async def concurrent(url: str, count: int) -> float:
    db = await _database(url)
    runs = executor(db, compile_document(chain(10)), 0.01)
    started = time.perf_counter()
    ids = await start_runs(db, runs, count, concurrently=True)
    results = await asyncio.gather(*(runs.wait(run_id) for run_id in ids))
    elapsed = time.perf_counter() - started
    assert all(r is not None and r.status == "succeeded" for r in results)
    await runs.close()
    await db.dispose()
    return elapsed


def measure(tmp: str, label: str, i: int) -> dict[str, float]:
    url = f"sqlite:///{tmp}/{label}{i}"
    return {
        "code_chain_ms_per_node": asyncio.run(per_node(f"{url}a.db", chain(20), 20, 20)),
        "llm_chain_ms_per_node": asyncio.run(per_node(f"{url}b.db", llm_chain(20), 20, 20)),
        "concurrent_200_s": asyncio.run(concurrent(f"{url}c.db", 200)),
    }


def main() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Collector)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"] = f"http://127.0.0.1:{server.server_port}"
    gc.freeze()  # as the server does once started (api/app.py)
    samples: dict[str, dict[str, list[float]]] = {"off": {}, "on": {}}
    with tempfile.TemporaryDirectory() as tmp:
        measure(tmp, "warm", 0)  # imports, the first database: in neither column
        for i in range(ROUNDS):
            for label in ("off", "on"):
                if label == "on":
                    assert traces.start()
                for key, value in measure(tmp, label, i).items():
                    samples[label].setdefault(key, []).append(value)
                traces.uninstall()  # flushes the spans still batched
    server.shutdown()
    assert Collector.received > 0, "no span reached the stand-in collector"
    rows: dict[str, Any] = {"rounds": ROUNDS, "export_requests": Collector.received,
                            "exported_kib": Collector.bytes / 1024}  # fmt: skip
    print(f"{'measure':28} {'off':>9} {'on':>9} {'overhead':>9}")
    for key in samples["off"]:
        off, on = statistics.median(samples["off"][key]), statistics.median(samples["on"][key])
        rows[key] = {"off": off, "on": on, "overhead_pct": (on / off - 1) * 100}
        print(f"{key:28} {off:9.3f} {on:9.3f} {(on / off - 1) * 100:8.1f}%")
    print(f"OTLP requests received: {Collector.received} ({Collector.bytes / 1024:.0f} KiB)")
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"traces-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}.json"
    out.write_text(json.dumps(rows, indent=2))
    print(f"results: {out}")


if __name__ == "__main__":
    main()
