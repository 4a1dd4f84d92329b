"""Admission under a burst (issue 23): 1,000 runs submitted at once to the embedded server,
with admission (``DHUB_MAX_ACTIVE_RUNS``, its default from this machine's cores and memory)
and without it (every run let in at once, as before), one after the other.

The server (``dhub serve``, SQLite in a temporary directory, ``DHUB_MAX_ACTIVE_RUNS`` set)
runs in a process of its own and executes the runs itself; the client speaks to it over TCP.
Each run is a chain of 10 ``variable`` nodes, every step saved: what the engine and the
durable layer cost, nothing else; or (``--code``) of 10 code nodes whose function sleeps 10 ms
in the sandbox, bench/scale.py's stock run. For each side:

- the server's throughput, measured first on 200 runs submitted at once (runs/s);
- then 1,000 runs submitted at once (``POST /api/v1/agents/{id}/runs``, 64 in flight): the
  time until the first run finishes, until all have, and that against 1,000 / throughput
  (goal: at most 1.2x);
- the API's latency meanwhile: ``GET /api/v1/runs/{id}`` every 20 ms from a process of its
  own, p50 and p99 (goal: p99 under 50 ms).

The burst goes out on raw keep-alive streams (httpx cost about a millisecond of CPU per
request: on 2 cores the client would set the pace).

    .venv/bin/python bench/admission.py [--runs 1000] [--limit N]     # about 10 s
    .venv/bin/python bench/admission.py --code --runs 300             # about 2 minutes
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx

from api_latency import dhub_serve_command, free_port, server, wait_ready
from dhub.runtime.admission import default_limit

TOKEN = "dhub_bench_admission_token"
SLEEPER = "import time\n\ndef main():\n    time.sleep(0.01)\n    return {'v': 1}\n"
UNLIMITED = 1 << 30  # every run let in at once


def chain(steps: int, code: bool) -> dict[str, Any]:
    """``steps`` nodes: ``variable`` nodes, or (``code``) code nodes whose function sleeps
    10 ms in the sandbox (bench/scale.py's stock run)."""
    nodes: list[dict[str, Any]] = [{"id": "start", "type": "start", "config": {}}]
    for i in range(steps):
        if code:
            config = {"source": SLEEPER, "outputs": {"v": "number"}}
            nodes.append({"id": f"n{i}", "type": "code", "config": config})
            continue
        operation = {"action": "set", "variable": "x", "value": i}
        nodes.append({"id": f"n{i}", "type": "variable", "config": {"operations": [operation]}})
    nodes.append({"id": "end", "type": "end", "config": {}})
    edges = [{"source": a["id"], "target": b["id"]} for a, b in itertools.pairwise(nodes)]
    return {"name": "burst", "description": "", "mode": "workflow", "input_mode": "event",
            "nodes": nodes, "edges": edges}  # fmt: skip


@asynccontextmanager
async def running_app(data_dir: Path, limit: int) -> Any:
    """``dhub serve`` in a process of its own, spoken to over TCP: requests then arrive as a
    real server sees them (through the ASGI transport, in-process, a request that never
    waits on I/O runs to its end without letting the runs it started move)."""
    os.makedirs(data_dir)
    port = free_port()
    argv = [*dhub_serve_command(), "--host", "127.0.0.1", "--port", str(port),
            "--data-dir", str(data_dir)]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if not k.startswith("DHUB_")}
    env.update(DHUB_ADMIN_TOKEN=TOKEN, DHUB_MAX_ACTIVE_RUNS=str(limit))
    if "DHUB_SANDBOX" in os.environ:
        env["DHUB_SANDBOX"] = os.environ["DHUB_SANDBOX"]
    base = f"http://127.0.0.1:{port}"
    log = data_dir / "dhub.log"
    with server(argv, env, log) as proc:
        wait_ready(f"{base}/healthz", proc, log)
        headers = {"Authorization": f"Bearer {TOKEN}"}
        # idle connections dropped before the server's keep-alive (5 s) closes them under a request
        limits = httpx.Limits(max_connections=80, keepalive_expiry=2)
        async with httpx.AsyncClient(
            base_url=base, timeout=120, headers=headers, limits=limits
        ) as client:
            yield client


async def submit(client: httpx.AsyncClient, agent_id: str, count: int) -> list[str]:
    """``count`` runs, 64 requests in flight on keep-alive connections; their ids in the order
    they were made. Written on raw streams: httpx spent about a millisecond of this process's
    CPU per request, so on 2 cores the client, not the server, set the pace of a burst."""
    url = httpx.URL(str(client.base_url))
    host, port = url.host, url.port or 80
    auth = client.headers["Authorization"]
    body = b'{"inputs":{}}'
    request = (
        f"POST /api/v1/agents/{agent_id}/runs HTTP/1.1\r\nHost: {host}:{port}\r\n"
        f"Authorization: {auth}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode() + body
    ids: list[str] = [""] * count
    todo = iter(range(count))

    async def connection() -> None:
        reader, writer = await asyncio.open_connection(host, port)
        try:
            for i in todo:
                writer.write(request)
                status, answer = await read_answer(reader)
                assert status == 202, answer
                ids[i] = json.loads(answer)["id"]
        finally:
            writer.close()

    await asyncio.gather(*(connection() for _ in range(min(64, count))))
    return ids


async def read_answer(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    """One HTTP/1.1 response: its status and body (the server sends Content-Length)."""
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    length = next(
        (int(v) for n, _, v in (line.partition(b":") for line in lines[1:])
         if n.strip().lower() == b"content-length"),
        0,
    )  # fmt: skip
    return int(lines[0].split(b" ", 2)[1]), await reader.readexactly(length)


async def last_done(client: httpx.AsyncClient, ids: list[str]) -> None:
    """Wait until the last of ``ids`` succeeded (admission lets it in last)."""
    while (await client.get(f"/api/v1/runs/{ids[-1]}")).json()["status"] != "succeeded":  # noqa: ASYNC110
        await asyncio.sleep(0.05)


async def finished(
    client: httpx.AsyncClient, agent_id: str, ids: list[str]
) -> list[dict[str, Any]]:
    """Wait until the runs ``ids`` succeeded; their records. Watches the last one (admission
    lets it in last) and then lists the agent's runs: listing a thousand runs every moment
    would cost the server more than the runs do."""
    await last_done(client, ids)
    wanted = set(ids)
    while True:
        found: list[dict[str, Any]] = []
        cursor = None
        while True:
            params = {"agent_id": agent_id, "status": "succeeded", "limit": 200}
            page = (await client.get("/api/v1/runs", params={**params, "cursor": cursor}
                                     if cursor else params)).json()  # fmt: skip
            found += [r for r in page["data"] if r["id"] in wanted]
            cursor = page.get("next_cursor")
            if not cursor:
                break
        if len(found) == len(wanted):
            return found
        await asyncio.sleep(0.2)


# The probe: a process of its own, so that its latencies are the server's, not the wait of a
# client loop busy with the burst's requests. GET every 20 ms until its stdin closes; then
# prints each latency (ms) as JSON.
PROBE = """
import http.client, json, select, sys, time
host, port, path, auth = sys.argv[1:5]
conn = http.client.HTTPConnection(host, int(port))
latencies = []
while not select.select([sys.stdin], [], [], 0.02)[0]:
    began = time.perf_counter()
    conn.request("GET", path, headers={"Authorization": auth})
    answer = conn.getresponse()
    answer.read()
    assert answer.status == 200, answer.status
    latencies.append((time.perf_counter() - began) * 1000)
print(json.dumps(latencies))
"""


def probe(client: httpx.AsyncClient, run_id: str) -> subprocess.Popen[bytes]:
    """Start probing ``GET /api/v1/runs/{run_id}``; ``probed`` ends it."""
    url = httpx.URL(str(client.base_url))
    argv = [sys.executable, "-c", PROBE, url.host, str(url.port), f"/api/v1/runs/{run_id}",
            client.headers["Authorization"]]  # fmt: skip
    return subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE)


def probed(proc: subprocess.Popen[bytes]) -> list[float]:
    out, _ = proc.communicate(b"stop\n", timeout=60)
    return sorted(json.loads(out))


async def side(tmp: Path, limit: int, runs: int, code: bool) -> dict[str, float]:
    async with running_app(tmp, limit) as client:
        made = await client.post("/api/v1/agents", json=chain(10, code))
        assert made.status_code == 201, made.text
        agent_id = made.json()["id"]
        began_ms = time.time() * 1000  # the throughput: 200 runs at once
        first = await finished(client, agent_id, await submit(client, agent_id, 200))
        throughput = 200 / ((max(r["finished_at"] for r in first) - began_ms) / 1000)
        watched = await submit(client, agent_id, 1)
        await finished(client, agent_id, watched)
        probing = probe(client, watched[0])
        await asyncio.sleep(0.5)  # its interpreter started
        began_ms = time.time() * 1000
        burst = await submit(client, agent_id, runs)
        await last_done(client, burst)
        latencies = probed(probing)  # before listing the runs, which is the bench's own load
        records = await finished(client, agent_id, burst)
    ends = sorted(r["finished_at"] for r in records)
    total = (ends[-1] - began_ms) / 1000
    return {
        "throughput_runs_s": throughput,
        "first_finished_s": (ends[0] - began_ms) / 1000,
        "all_finished_s": total,
        "ratio_to_throughput": total / (runs / throughput),
        "api_p50_ms": statistics.median(latencies),
        "api_p99_ms": latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--limit", type=int, default=default_limit(), help="admission's limit")
    what = "code nodes sleeping 10 ms in the sandbox (DHUB_SANDBOX=unsafe unless set)"
    parser.add_argument("--code", action="store_true", help=what)
    parser.add_argument("--json", type=Path, help="also write both sides' figures here")
    args = parser.parse_args()
    if args.code:
        os.environ.setdefault("DHUB_SANDBOX", "unsafe")
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, limit in (("admission", args.limit), ("all at once", UNLIMITED)):
            where = Path(tmp) / name.replace(" ", "-")
            results[name] = asyncio.run(side(where, limit, args.runs, args.code))
    kind = "code nodes sleeping 10 ms" if args.code else "variable nodes"
    print(f"{args.runs} runs of 10 {kind}, submitted at once; admission limit {args.limit}")
    print(f"{'':22} {'admission':>12} {'all at once':>12}   goal")
    goals = {"first_finished_s": "<= 1 s", "ratio_to_throughput": "<= 1.2",
             "api_p99_ms": "< 50 ms"}  # fmt: skip
    for key in results["admission"]:
        a, b = results["admission"][key], results["all at once"][key]
        print(f"{key:22} {a:12.3f} {b:12.3f}   {goals.get(key, '')}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
