"""What tracing costs a durable run: the same runs with traces off and on, exporting over
OTLP/HTTP to a local stand-in of a collector (a tiny HTTP server on 127.0.0.1, in a process of
its own as a real collector is, that reads each request and answers 200), dhub in one process
as in production.

(a) ms per node, one run at a time, of a chain of 20 code nodes and of a chain of 20 llm nodes
    (their model port an honest fake that answers at once with token counts: a ``chat`` span
    per call), every step saved on SQLite (the shapes of bench/runs.py);
(b) 200 concurrent runs of a 10-step chain whose function waits 10 ms (bench/runs.py (b)).

Off, on, and on with the standard sampler at 10% (``OTEL_TRACES_SAMPLER`` =
``parentbased_traceidratio``, ``OTEL_TRACES_SAMPLER_ARG=0.1``) alternate, ROUNDS times each, and
the medians are compared (goal: under 5% slower). On: the OpenTelemetry SDK with its batch span
processor and OTLP/HTTP exporter, as ``OTEL_EXPORTER_OTLP_ENDPOINT`` sets it up
(docs/observability.md), the database engines instrumented too.

    .venv/bin/python bench/traces.py
"""

from __future__ import annotations

import asyncio
import gc
import json
import multiprocessing
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
LABELS = ("off", "on", "sampled")
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "5"))
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
    """Wall time of each measure, and the process's CPU time for all three (every thread:
    the exporter's included), which other processes on the machine disturb less."""
    url = f"sqlite:///{tmp}/{label}{i}"
    cpu = time.process_time()
    rows = {
        "code_chain_ms_per_node": asyncio.run(per_node(f"{url}a.db", chain(20), 20, 20)),
        "llm_chain_ms_per_node": asyncio.run(per_node(f"{url}b.db", llm_chain(20), 20, 20)),
        "concurrent_200_s": asyncio.run(concurrent(f"{url}c.db", 200)),
    }
    if label != "off":
        traces.uninstall()  # flushes the spans still batched: their export counts too
    rows["cpu_s_all_three"] = time.process_time() - cpu
    return rows


def serve_collector(port: Any, counts: Any) -> None:
    """The stand-in collector's process: a real collector is never dhub's process, so its
    work (reading megabytes of spans) must not count as dhub's CPU or take its GIL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), Collector)
    port.value = server.server_port

    def count() -> None:
        while True:
            time.sleep(0.2)
            counts[0], counts[1] = Collector.received, Collector.bytes

    threading.Thread(target=count, daemon=True).start()
    server.serve_forever()


def main() -> None:
    port, counts = multiprocessing.Value("i", 0), multiprocessing.Array("d", 2)
    collector = multiprocessing.Process(target=serve_collector, args=(port, counts), daemon=True)
    collector.start()
    while not port.value:
        time.sleep(0.01)
    os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"] = f"http://127.0.0.1:{port.value}"
    gc.freeze()  # as the server does once started (api/app.py)
    samples: dict[str, dict[str, list[float]]] = {label: {} for label in LABELS}
    with tempfile.TemporaryDirectory() as tmp:
        measure(tmp, "warm", 0)  # imports, the first database: in neither column
        for i in range(ROUNDS):
            for label in LABELS:
                os.environ.pop("OTEL_TRACES_SAMPLER", None)
                if label == "sampled":  # the standard sampler variables, 1 run in 10 traced
                    os.environ["OTEL_TRACES_SAMPLER"] = "parentbased_traceidratio"
                    os.environ["OTEL_TRACES_SAMPLER_ARG"] = "0.1"
                if label != "off":
                    assert traces.start()
                for key, value in measure(tmp, label, i).items():
                    samples[label].setdefault(key, []).append(value)
    time.sleep(0.5)  # the collector's last counts
    received, sent = int(counts[0]), counts[1]
    collector.terminate()
    assert received > 0, "no span reached the stand-in collector"
    rows: dict[str, Any] = {"rounds": ROUNDS, "export_requests": received,
                            "exported_kib": sent / 1024}  # fmt: skip
    print(f"{'measure':24} {'off':>8} {'on':>8} {'overhead':>9} {'10% sampled':>12} "
          f"{'overhead':>9}")  # fmt: skip
    for key in samples["off"]:
        off, on, sampled = (statistics.median(samples[label][key]) for label in LABELS)
        rows[key] = {
            "off": off,
            "on": on,
            "on_overhead_pct": (on / off - 1) * 100,
            "sampled": sampled,
            "sampled_overhead_pct": (sampled / off - 1) * 100,
        }
        print(f"{key:24} {off:8.3f} {on:8.3f} {(on / off - 1) * 100:8.1f}% {sampled:12.3f} "
              f"{(sampled / off - 1) * 100:8.1f}%")  # fmt: skip
    print(f"OTLP requests received: {received} ({sent / 1024:.0f} KiB)")
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"traces-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}.json"
    out.write_text(json.dumps(rows, indent=2))
    print(f"results: {out}")


if __name__ == "__main__":
    main()
