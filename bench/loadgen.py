"""A small closed-loop HTTP/1.1 load generator, the fallback of bench/api_latency.py when
``wrk`` is not installed.

N keep-alive connections each send one GET, read the whole response, and send the next, until
the duration or the request budget is spent. Only loopback targets are accepted. Prints one
JSON object with the same keys as the wrk run of api_latency.py (latencies in microseconds).

    python bench/loadgen.py --url http://127.0.0.1:8000/api/v1/agents?limit=50 \
        --connections 16 --duration 10 --header "Authorization: Bearer ..."
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import json
import time
from urllib.parse import urlsplit

LOOPBACK_NAMES = {"localhost"}


def is_loopback(host: str) -> bool:
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class Stats:
    def __init__(self) -> None:
        self.latencies_ns: list[int] = []
        self.bytes = 0
        self.status_errors = 0
        self.read_errors = 0
        self.connect_errors = 0


async def read_response(reader: asyncio.StreamReader) -> tuple[int, int]:
    """Read one response; returns (status, total bytes). Needs Content-Length (no chunking)."""
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    status = int(lines[0].split(b" ", 2)[1])
    length = 0
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    if length:
        await reader.readexactly(length)
    return status, len(head) + length


async def worker(
    host: str, port: int, request: bytes, deadline: float, budget: list[int], stats: Stats
) -> None:
    try:
        reader, writer = await asyncio.open_connection(host, port)
    except OSError:
        stats.connect_errors += 1
        return
    try:
        while time.monotonic() < deadline and budget[0] > 0:
            budget[0] -= 1
            start = time.perf_counter_ns()
            writer.write(request)
            try:
                status, size = await read_response(reader)
            except (asyncio.IncompleteReadError, ConnectionError):
                stats.read_errors += 1
                return
            stats.latencies_ns.append(time.perf_counter_ns() - start)
            stats.bytes += size
            if not 200 <= status < 400:
                stats.status_errors += 1
    finally:
        writer.close()


def percentile(sorted_values: list[int], q: float) -> float:
    if not sorted_values:
        return 0.0
    index = min(len(sorted_values) - 1, max(0, round(q / 100 * len(sorted_values)) - 1))
    return float(sorted_values[index])


async def run(
    url: str, connections: int, duration: float, max_requests: int, headers: list[str]
) -> dict[str, object]:
    parts = urlsplit(url)
    host, port = parts.hostname or "", parts.port or 80
    if parts.scheme != "http" or not is_loopback(host):
        raise SystemExit(f"loadgen only targets http:// on the loopback interface, not {url!r}")
    target = parts.path + (f"?{parts.query}" if parts.query else "")
    head = [f"GET {target} HTTP/1.1", f"Host: {host}:{port}", *headers, "", ""]
    request = "\r\n".join(head).encode()
    stats = Stats()
    budget = [max_requests]
    start = time.monotonic()
    deadline = start + duration
    await asyncio.gather(
        *(worker(host, port, request, deadline, budget, stats) for _ in range(connections))
    )
    elapsed = time.monotonic() - start
    lat = sorted(stats.latencies_ns)
    return {
        "requests": len(lat),
        "duration_s": elapsed,
        "rps": len(lat) / elapsed if elapsed else 0.0,
        "bytes": stats.bytes,
        "p50_us": percentile(lat, 50) / 1000,
        "p90_us": percentile(lat, 90) / 1000,
        "p99_us": percentile(lat, 99) / 1000,
        "max_us": (lat[-1] / 1000) if lat else 0.0,
        "mean_us": (sum(lat) / len(lat) / 1000) if lat else 0.0,
        "errors": {
            "connect": stats.connect_errors,
            "read": stats.read_errors,
            "status": stats.status_errors,
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--max-requests", type=int, default=2_000_000)
    parser.add_argument("--header", action="append", default=[])
    args = parser.parse_args()
    coro = run(args.url, args.connections, args.duration, args.max_requests, args.header)
    try:
        import uvloop
    except ImportError:
        result = asyncio.run(coro)
    else:
        result = uvloop.run(coro)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
