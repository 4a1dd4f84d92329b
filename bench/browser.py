"""Browser tools: the call time of the page-title tool of examples/page_title.yaml (a tool with
``require_browser``: headless Chromium driven with Playwright in the sandbox), on

- a **cold** worker (``SandboxSettings(warm=False)``): bubblewrap, the interpreter, Playwright's
  driver and Chromium all start for the call;
- a **warm** worker (the product's default): the sandbox, the interpreter and the driver are
  running already, so a call starts Chromium, opens the page and closes Chromium;

each with a ``data:`` page (no network) and with a page served by this script on the host's
outside address (``network: true``, as the example has it). Then where a warm call's time
goes: Chromium's start, a new page, loading it, closing Chromium, and what the server side
adds. Prints p50/min/max per case and writes bench/results/browser-<UTC time>.json. Needs
bubblewrap and Debian's chromium (``make install`` installs both).

    .venv/bin/python bench/browser.py      # about a minute; make bench runs it too
"""

from __future__ import annotations

import asyncio
import http.server
import json
import os
import platform
import socket
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import yaml

from dhub.sandbox.runner import FunctionCall, SandboxRunner, SandboxSettings

ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).parent / "results"
EXAMPLE = yaml.safe_load((ROOT / "examples" / "page_title.yaml").read_text())
SOURCE = next(n for n in EXAMPLE["nodes"] if n["id"] == "title")["config"]["tool"]["function"][
    "source"
]
DATA_PAGE = "data:text/html,<title>Hello, browser</title>"
COLD_CALLS, WARM_CALLS = 5, 10
PHASES = """
import time
from dhub_browser import browser


def main(url: str) -> dict:
    begun = time.perf_counter()
    with browser() as launched:
        started = time.perf_counter()
        page = launched.new_page()
        opened = time.perf_counter()
        page.goto(url)
        title = page.title()
        loaded = time.perf_counter()
    closed = time.perf_counter()
    return {"title": title, "launch": started - begun, "new_page": opened - started,
            "goto_title": loaded - opened, "close": closed - loaded, "inside": closed - begun}
"""


def serve() -> tuple[http.server.ThreadingHTTPServer, str]:
    """A page on every address of this host; its URL at the outside one."""

    class Page(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = b"<!doctype html><title>Hello, browser</title><p>hi"
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("0.0.0.0", 0), Page)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.connect(("192.0.2.1", 9))  # picks the outside address; sends nothing
        address = probe.getsockname()[0]
    return server, f"http://{address}:{server.server_address[1]}/"


async def timed(runner: SandboxRunner, source: str, url: str, network: bool) -> tuple[float, Any]:
    call = FunctionCall(source, {"url": url}, 120, network=network, owner="bench", browser=True)
    begun = time.perf_counter()
    result = await runner.call(call)
    elapsed = time.perf_counter() - begun
    assert result.ok, result
    return elapsed, result.value


def row(case: str, seconds: list[float]) -> dict[str, Any]:
    return {
        "case": case,
        "calls": len(seconds),
        "p50_s": statistics.median(seconds),
        "min_s": min(seconds),
        "max_s": max(seconds),
    }


async def case(envs: Path, warm: bool, url: str, network: bool) -> dict[str, Any]:
    runner = SandboxRunner(SandboxSettings(envs_dir=envs, warm=warm))
    try:
        if warm:  # the first call starts the worker (and a spare): not counted
            await timed(runner, SOURCE, url, network)
            await runner.pool.settle()
        seconds = []
        for _ in range(WARM_CALLS if warm else COLD_CALLS):
            elapsed, value = await timed(runner, SOURCE, url, network)
            assert value["title"] == "Hello, browser", value
            seconds.append(elapsed)
            if warm:
                await runner.pool.settle()  # a spare starting meanwhile is not the call's time
    finally:
        await runner.close()
    where = "network, host page" if network else "data: page"
    return row(f"{'warm' if warm else 'cold'}, {where}", seconds)


async def phases(envs: Path) -> dict[str, float]:
    runner = SandboxRunner(SandboxSettings(envs_dir=envs))
    try:
        await timed(runner, PHASES, DATA_PAGE, False)
        await runner.pool.settle()
        found: dict[str, list[float]] = {}
        for _ in range(WARM_CALLS):
            elapsed, value = await timed(runner, PHASES, DATA_PAGE, False)
            await runner.pool.settle()
            for name in ("launch", "new_page", "goto_title", "close"):
                found.setdefault(name, []).append(value[name])
            found.setdefault("server side", []).append(elapsed - value["inside"])
    finally:
        await runner.close()
    return {name: statistics.median(values) for name, values in found.items()}


async def main() -> None:
    server, host_page = serve()
    try:
        with tempfile.TemporaryDirectory(prefix="dhub-bench-envs-") as envs:
            rows = [
                await case(Path(envs), warm, url, network)
                for warm in (False, True)
                for url, network in ((DATA_PAGE, False), (host_page, True))
            ]
            parts = await phases(Path(envs))
    finally:
        server.shutdown()
    print(f"{'case':28} {'calls':>5} {'p50 s':>7} {'min s':>7} {'max s':>7}")
    for r in rows:
        print(f"{r['case']:28} {r['calls']:>5} {r['p50_s']:>7.2f} {r['min_s']:>7.2f} "
              f"{r['max_s']:>7.2f}")  # fmt: skip
    print("a warm call, p50 of each part (s): "
          + ", ".join(f"{name} {value:.2f}" for name, value in parts.items()))  # fmt: skip
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"browser-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}.json"
    machine = {"cpus": os.cpu_count(), "python": platform.python_version(),
               "platform": platform.platform(), "load": os.getloadavg()}  # fmt: skip
    out.write_text(json.dumps({"machine": machine, "rows": rows, "warm_parts": parts}, indent=2))
    print(f"results: {out}")


if __name__ == "__main__":
    asyncio.run(main())
