"""dhub API throughput and latency against a bare FastAPI endpoint, in the same run.

What it does, start to finish (about 1 minute with the defaults; refuses settings that would
take more than about 3):

1. A fresh temporary data directory; 10,000 agents are seeded in-process straight into its
   SQLite file (each document validated by dhub's own validator, rows written to dhub's own
   tables as AgentService.create writes them; a round-robin mix of the fixture documents in
   tests/fixtures/agents/valid, with unique names), all owned by the admin user, whose API
   token is set through DHUB_ADMIN_TOKEN.
2. The real server, ``dhub serve``, as a subprocess on 127.0.0.1 (default SQLite).
3. The exact bodies of ``GET /api/v1/agents/{id}`` and ``GET /api/v1/agents?limit=50`` are
   fetched from it, and bench/bare_app.py, a bare FastAPI app answering those two routes with
   those bytes, starts as a second subprocess served the same way (uvicorn, one process).
4. A load generator in its own process (``wrk`` when installed, else bench/loadgen.py) drives
   each scenario with N keep-alive connections for a fixed time after a short warm-up,
   alternating dhub and bare. CPU use of the server, the load generator and everything else on
   the machine is read from /proc for each run.
5. A table (requests/s, p50, p99, dhub/bare throughput ratio) is printed and the full results
   are written to bench/results/ as JSON. Every subprocess is stopped on the way out.

    .venv/bin/python bench/api_latency.py                 # 16 connections, 10 s per scenario
    .venv/bin/python bench/api_latency.py --connections 64 --rounds 2 --loadgen python
    .venv/bin/python bench/api_latency.py --only dhub --dhub-cmd "python my_variant.py"
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import resource
import secrets
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
FIXTURES = ROOT / "tests" / "fixtures" / "agents" / "valid"
RESULTS = BENCH / "results"
VENV_BIN = Path(sys.executable).parent
GOAL_RATIO = 0.5  # the goal: at least half the bare endpoint's throughput
TIME_BUDGET_S = 150.0  # for the measured part; seeding and start-up add about 15 s

WRK_SCRIPT = """
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'WRK_JSON {"requests":%d,"duration_us":%d,"bytes":%d,'
    .. '"p50_us":%d,"p90_us":%d,"p99_us":%d,"max_us":%d,"mean_us":%.1f,'
    .. '"errors":{"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d}}\\n',
    summary.requests, summary.duration, summary.bytes,
    latency:percentile(50), latency:percentile(90), latency:percentile(99),
    latency.max, latency.mean,
    e.connect, e.read, e.write, e.status, e.timeout))
end
"""


@dataclass(frozen=True)
class Scenario:
    name: str
    server: str  # "dhub" or "bare"
    path: str


@dataclass
class Result:
    scenario: str
    server: str
    round: int
    url: str
    requests: int
    duration_s: float
    rps: float
    p50_ms: float
    p90_ms: float
    p99_ms: float
    max_ms: float
    mean_ms: float
    errors: dict[str, int]
    # CPU over the measured run, in % of one core; "other" is every other process on the box.
    server_cpu_pct: float
    loadgen_cpu_pct: float
    other_cpu_pct: float


# -- seeding ---------------------------------------------------------------------------------


def load_fixtures() -> list[tuple[str, dict[str, Any]]]:
    paths = sorted(FIXTURES.glob("*.json"))
    if not paths:
        raise SystemExit(f"no fixture documents in {FIXTURES}")
    return [(p.stem, json.loads(p.read_text())) for p in paths]


async def seed(data_dir: Path, token: str, count: int) -> list[tuple[str, str]]:
    """Write ``count`` agents as AgentService.create writes them (agent row, version 1, tags,
    the admin as owner), in bulk. Returns (agent id, fixture name) in insertion order."""
    from sqlalchemy import insert

    from dhub.access.bootstrap import ADMIN_ID, ensure_admin
    from dhub.domain.ids import new_id, now_ms
    from dhub.engine.validate import validate_agent_document
    from dhub.services.agents import _indexed, dump_spec  # the service's own column mapping
    from dhub.settings import default_sqlite_url
    from dhub.store.db import Database
    from dhub.store.tables import agent_versions, agents, resource_owners, resource_tags

    fixtures = load_fixtures()
    db = Database(default_sqlite_url(data_dir))
    try:
        await db.migrate()
        await ensure_admin(db, data_dir, token)
        out: list[tuple[str, str]] = []
        chunk = 1000
        for start in range(0, count, chunk):
            rows: list[dict[str, Any]] = []
            versions: list[dict[str, Any]] = []
            tags: list[dict[str, Any]] = []
            owners: list[dict[str, Any]] = []
            for i in range(start, min(count, start + chunk)):
                stem, base = fixtures[i % len(fixtures)]
                spec = validate_agent_document({**base, "name": f"{base['name']}-{i:05d}"})
                agent_id, now, document = new_id("agent"), now_ms(), dump_spec(spec)
                rows.append(
                    {
                        **_indexed(spec),
                        "id": agent_id,
                        "version": 1,
                        "document": document,
                        "is_builtin": False,
                        "created_by": ADMIN_ID,
                        "created_at": now,
                        "updated_at": now,
                    }
                )
                versions.append(
                    {
                        "agent_id": agent_id,
                        "version": 1,
                        "document": document,
                        "created_by": ADMIN_ID,
                        "created_at": now,
                    }
                )
                tags += [
                    {"resource_id": agent_id, "tag": t} for t in dict.fromkeys(spec.tags or [])
                ]
                owners.append({"resource_id": agent_id, "principal_id": ADMIN_ID})
                out.append((agent_id, stem))
            async with db.write() as conn:
                await conn.execute(insert(agents), rows)
                await conn.execute(insert(agent_versions), versions)
                if tags:
                    await conn.execute(insert(resource_tags), tags)
                await conn.execute(insert(resource_owners), owners)
        return out
    finally:
        await db.dispose()


# -- processes -------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def dhub_serve_command() -> list[str]:
    """``dhub serve``; plain ``dhub`` where the CLI has serve as its only command (Typer then
    takes no command name)."""
    exe = str(VENV_BIN / "dhub")
    probe = subprocess.run([exe, "serve", "--help"], capture_output=True, timeout=60)
    return [exe, "serve"] if probe.returncode == 0 else [exe]


@contextlib.contextmanager
def server(argv: list[str], env: dict[str, str], log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """Run a server subprocess (in its own session) and always stop it."""
    with log.open("wb") as out:
        proc = subprocess.Popen(
            argv, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            yield proc
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)  # uvicorn's graceful shutdown
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout=10)


def wait_ready(url: str, proc: subprocess.Popen[bytes], log: Path, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if httpx.get(url, timeout=2.0).status_code < 500:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise SystemExit(f"server {url} did not start; its log:\n{log.read_text()[-3000:]}")


def show_logs_on_error(work: Path) -> Callable[..., None]:
    """An ExitStack exit callback: when leaving with an exception, show the server logs."""

    def on_exit(exc_type: type[BaseException] | None, *_: object) -> None:
        if exc_type is None:
            return
        for log in sorted(work.glob("*.log")):
            tail = log.read_text(errors="replace")[-2000:]
            print(f"--- end of {log.name}:\n{tail}", file=sys.stderr)

    return on_exit


def process_cpu_s(pid: int) -> float:
    """utime + stime of a process (all its threads), in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def children_cpu_s() -> float:
    """CPU of this process's reaped children (the load generator runs)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def machine_busy_s() -> float:
    """Busy CPU time of the whole machine (all cores), in seconds."""
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = values[3] + values[4]  # idle + iowait
    return (sum(values[:8]) - idle) / os.sysconf("SC_CLK_TCK")


# -- load ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Load:
    tool: str  # "wrk" or "python"
    connections: int
    max_requests: int
    headers: tuple[str, ...]
    wrk_script: Path

    def run(self, url: str, duration: float) -> dict[str, Any]:
        timeout = duration + 30
        if self.tool == "wrk":
            argv = ["wrk", "-t1", f"-c{self.connections}", f"-d{duration:g}s", "--timeout", "5s"]
            for h in self.headers:
                argv += ["-H", h]
            argv += ["-s", str(self.wrk_script), url]
            done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=True)
            line = next(ln for ln in done.stdout.splitlines() if ln.startswith("WRK_JSON "))
            raw: dict[str, Any] = json.loads(line.removeprefix("WRK_JSON "))
            raw["duration_s"] = raw["duration_us"] / 1e6
            raw["rps"] = raw["requests"] / raw["duration_s"]
            return raw
        argv = [sys.executable, str(BENCH / "loadgen.py"), "--url", url]
        argv += ["--connections", str(self.connections), "--duration", str(duration)]
        argv += ["--max-requests", str(self.max_requests)]
        for h in self.headers:
            argv += ["--header", h]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=True)
        loaded: dict[str, Any] = json.loads(done.stdout)
        return loaded


def measure(
    load: Load, scenario: Scenario, base: str, pid: int, rnd: int, duration: float, warmup: float
) -> Result:
    url = base + scenario.path
    if warmup > 0:
        load.run(url, warmup)
    cpu0, gen0, box0, t0 = process_cpu_s(pid), children_cpu_s(), machine_busy_s(), time.monotonic()
    raw = load.run(url, duration)
    wall = time.monotonic() - t0
    server_cpu = process_cpu_s(pid) - cpu0
    gen_cpu = children_cpu_s() - gen0
    other_cpu = max(0.0, machine_busy_s() - box0 - server_cpu - gen_cpu)
    return Result(
        scenario=scenario.name,
        server=scenario.server,
        round=rnd,
        url=url,
        requests=raw["requests"],
        duration_s=raw["duration_s"],
        rps=raw["rps"],
        p50_ms=raw["p50_us"] / 1000,
        p90_ms=raw["p90_us"] / 1000,
        p99_ms=raw["p99_us"] / 1000,
        max_ms=raw["max_us"] / 1000,
        mean_ms=raw["mean_us"] / 1000,
        errors=raw["errors"],
        server_cpu_pct=server_cpu / wall * 100,
        loadgen_cpu_pct=gen_cpu / wall * 100,
        other_cpu_pct=other_cpu / wall * 100,
    )


# -- report ----------------------------------------------------------------------------------


def median_of(results: list[Result]) -> dict[str, float]:
    """Median over rounds of each reported figure (the run itself when there is one round)."""
    keys = ("rps", "p50_ms", "p99_ms", "server_cpu_pct", "loadgen_cpu_pct", "other_cpu_pct")
    out = {k: statistics.median(getattr(r, k) for r in results) for k in keys}
    out["errors"] = sum(sum(r.errors.values()) for r in results)
    return out


def summarize(results: list[Result]) -> dict[str, dict[str, Any]]:
    groups: dict[str, dict[str, list[Result]]] = {}
    for r in results:
        groups.setdefault(r.scenario, {}).setdefault(r.server, []).append(r)
    summary: dict[str, dict[str, Any]] = {}
    for name, by_server in groups.items():
        entry: dict[str, Any] = {s: median_of(rs) for s, rs in by_server.items()}
        if "dhub" in entry and "bare" in entry and entry["bare"]["rps"]:
            entry["ratio"] = entry["dhub"]["rps"] / entry["bare"]["rps"]
            entry["meets_goal"] = entry["ratio"] >= GOAL_RATIO
        summary[name] = entry
    return summary


def table(summary: dict[str, dict[str, Any]]) -> str:
    head = (
        f"{'scenario':<10}{'server':<7}{'req/s':>8}{'p50 ms':>9}{'p99 ms':>9}"
        f"{'server':>8}{'loadgen':>8}{'other':>7}{'errors':>7}{'dhub/bare':>11}"
    )
    sub = f"{'':<10}{'':<7}{'':>8}{'':>9}{'':>9}{'CPU':>8}{'CPU':>8}{'CPU':>7}"
    lines = [head, sub, "-" * len(head)]
    for name, entry in summary.items():
        for srv in ("dhub", "bare"):
            if srv not in entry:
                continue
            m = entry[srv]
            ratio = f"{entry['ratio']:>10.2f}x" if srv == "dhub" and "ratio" in entry else ""
            lines.append(
                f"{name:<10}{srv:<7}{m['rps']:>8.0f}{m['p50_ms']:>9.2f}{m['p99_ms']:>9.2f}"
                f"{m['server_cpu_pct']:>7.0f}%{m['loadgen_cpu_pct']:>7.0f}%"
                f"{m['other_cpu_pct']:>6.0f}%{m['errors']:>7}{ratio}"
            )
    return "\n".join(lines)


def versions() -> dict[str, str]:
    from importlib.metadata import version

    out = {"python": platform.python_version()}
    for dist in ("dhub", "fastapi", "starlette", "uvicorn", "uvloop", "httptools", "sqlalchemy"):
        with contextlib.suppress(Exception):
            out[dist] = version(dist)
    with contextlib.suppress(Exception):
        out["aiosqlite"] = version("aiosqlite")
    if shutil.which("wrk"):
        done = subprocess.run(["wrk", "--version"], capture_output=True, text=True, check=False)
        out["wrk"] = (done.stdout or done.stderr).split("[", 1)[0].strip()
    return out


# -- main ------------------------------------------------------------------------------------


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=10_000, help="agents to seed")
    parser.add_argument("--limit", type=int, default=50, help="page size of the list scenario")
    parser.add_argument("--connections", type=int, default=16, help="concurrent connections")
    parser.add_argument("--duration", type=float, default=10.0, help="seconds per measured run")
    parser.add_argument("--warmup", type=float, default=2.0, help="warm-up seconds before each")
    parser.add_argument("--rounds", type=int, default=1, help="repeat all scenarios; medians")
    parser.add_argument(
        "--max-requests", type=int, default=1_000_000, help="request cap per run (python loadgen)"
    )
    parser.add_argument("--loadgen", choices=("auto", "wrk", "python"), default="auto")
    parser.add_argument(
        "--get-fixture", default="react_support", help="fixture kind of the agent GET fetches"
    )
    parser.add_argument(
        "--only", choices=("both", "dhub"), default="both", help="'dhub': skip the bare app"
    )
    parser.add_argument(
        "--dhub-cmd",
        help="command that serves dhub instead of `dhub serve` (e.g. a patched variant); "
        "--host, --port and --data-dir are appended",
    )
    parser.add_argument(
        "--hold",
        type=float,
        default=0.0,
        help="only keep dhub under load (GET one, then list) this many seconds, measuring "
        "nothing, for attaching a profiler to the printed pid (at most 120)",
    )
    parser.add_argument("--keep", type=Path, help="copy the server logs here at the end")
    args = parser.parse_args()
    per_round = (2 if args.only == "both" else 1) * 2 * (args.duration + args.warmup)
    if args.rounds < 1 or args.rounds * per_round > TIME_BUDGET_S or args.hold > 120:
        parser.error(
            f"rounds x scenarios x (duration + warm-up) must stay within {TIME_BUDGET_S:.0f} s "
            "and --hold within 120 s"
        )
    if args.loadgen == "auto":
        args.loadgen = "wrk" if shutil.which("wrk") else "python"
    elif args.loadgen == "wrk" and not shutil.which("wrk"):
        parser.error("wrk is not installed (apt-get install wrk); use --loadgen python")
    return args


def main() -> int:
    args = parse_args()
    started = time.monotonic()
    token = "dhub_bench_" + secrets.token_urlsafe(24)
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="dhub-bench-") as tmp:
        work = Path(tmp)
        data_dir = work / "data"
        t = time.monotonic()
        seeded = asyncio.run(seed(data_dir, token, args.agents))
        seed_s = time.monotonic() - t
        print(f"seeded {len(seeded)} agents in {seed_s:.1f} s", flush=True)

        kinds = {stem for _, stem in seeded}
        if args.get_fixture not in kinds:
            raise SystemExit(f"--get-fixture must be one of {sorted(kinds)}")
        middle = len(seeded) // 2
        get_id = next(
            aid for aid, stem in seeded[middle:] + seeded[:middle] if stem == args.get_fixture
        )
        get_path = f"/api/v1/agents/{get_id}"
        list_path = f"/api/v1/agents?limit={args.limit}"

        env = {k: v for k, v in os.environ.items() if not k.startswith("DHUB_")}
        env["DHUB_ADMIN_TOKEN"] = token
        dhub_port, bare_port = free_port(), free_port()
        dhub_base, bare_base = f"http://127.0.0.1:{dhub_port}", f"http://127.0.0.1:{bare_port}"
        dhub_argv = shlex.split(args.dhub_cmd) if args.dhub_cmd else dhub_serve_command()
        dhub_argv += ["--host", "127.0.0.1", "--port", str(dhub_port), "--data-dir", str(data_dir)]
        wrk_script = work / "report.lua"
        wrk_script.write_text(WRK_SCRIPT)
        auth = f"Authorization: Bearer {token}"
        load = Load(args.loadgen, args.connections, args.max_requests, (auth,), wrk_script)
        results: list[Result] = []

        with contextlib.ExitStack() as stack:
            stack.push(show_logs_on_error(work))
            dhub_log = work / "dhub.log"
            dhub = stack.enter_context(server(dhub_argv, env, dhub_log))
            wait_ready(f"{dhub_base}/healthz", dhub, dhub_log)
            print(f"dhub serving on {dhub_base} (pid {dhub.pid}): {shlex.join(dhub_argv)}")

            headers = {"Authorization": f"Bearer {token}"}
            one = httpx.get(dhub_base + get_path, headers=headers, timeout=10)
            page = httpx.get(dhub_base + list_path, headers=headers, timeout=10)
            one.raise_for_status()
            page.raise_for_status()
            listed = page.json()
            if one.json()["id"] != get_id or len(listed["data"]) != min(args.limit, args.agents):
                raise SystemExit("dhub returned unexpected bodies; not benchmarking")
            bodies = {"get_one_bytes": len(one.content), "list_bytes": len(page.content)}
            print(
                f"GET one ({args.get_fixture}): {len(one.content)} bytes; list {args.limit}: "
                f"{len(page.content)} bytes, next_cursor {bool(listed['next_cursor'])}",
                flush=True,
            )

            if args.hold > 0:
                print(f"holding dhub under load for {args.hold:g} s (pid {dhub.pid})", flush=True)
                load.run(dhub_base + get_path, args.hold / 2)
                load.run(dhub_base + list_path, args.hold / 2)
                return 0

            pids = {"dhub": dhub.pid}
            bases = {"dhub": dhub_base, "bare": bare_base}
            if args.only == "both":
                (work / "one.json").write_bytes(one.content)
                (work / "list.json").write_bytes(page.content)
                bare_argv = [sys.executable, str(BENCH / "bare_app.py"), "--port", str(bare_port)]
                bare_argv += ["--get-body", str(work / "one.json")]
                bare_argv += ["--list-body", str(work / "list.json")]
                bare_log = work / "bare.log"
                bare = stack.enter_context(server(bare_argv, env, bare_log))
                wait_ready(f"{bare_base}/api/v1/agents?limit=1", bare, bare_log)
                pids["bare"] = bare.pid
                for path, expected in ((get_path, one), (list_path, page)):
                    got = httpx.get(bare_base + path, timeout=10)
                    ctype = got.headers["content-type"] == expected.headers["content-type"]
                    if got.content != expected.content or not ctype:
                        raise SystemExit(f"the bare app does not answer {path} like dhub")

            servers = ("dhub", "bare") if args.only == "both" else ("dhub",)
            scenarios = [
                Scenario(name, srv, path)
                for name, path in (("get_one", get_path), (f"list_{args.limit}", list_path))
                for srv in servers
            ]
            print(
                f"load: {args.loadgen}, {args.connections} connections, {args.warmup:g} s "
                f"warm-up + {args.duration:g} s per run, {args.rounds} round(s)",
                flush=True,
            )
            for rnd in range(1, args.rounds + 1):
                for sc in scenarios:
                    res = measure(
                        load, sc, bases[sc.server], pids[sc.server], rnd, args.duration, args.warmup
                    )
                    results.append(res)
                    print(
                        f"  round {rnd}  {sc.name:<8} {sc.server:<5}{res.rps:8.0f} req/s  "
                        f"p50 {res.p50_ms:6.2f} ms  p99 {res.p99_ms:6.2f} ms  "
                        f"CPU server {res.server_cpu_pct:3.0f}% loadgen "
                        f"{res.loadgen_cpu_pct:3.0f}% other {res.other_cpu_pct:3.0f}%",
                        flush=True,
                    )
            if args.keep:
                args.keep.mkdir(parents=True, exist_ok=True)
                for log in work.glob("*.log"):
                    shutil.copy(log, args.keep / log.name)

    summary = summarize(results)
    cores = os.cpu_count() or 0
    print()
    print(table(summary))
    print(
        f"\nload generator: {args.loadgen}"
        f"{' (1 thread)' if args.loadgen == 'wrk' else ''}, {args.connections} keep-alive "
        f"connections, closed loop; {args.warmup:g} s warm-up + {args.duration:g} s per run"
        f"{f', median of {args.rounds} rounds' if args.rounds > 1 else ''}; {args.agents} "
        f"agents seeded. CPU is % of one core; 'other' is every other process on the machine."
    )
    print(
        f"machine: {cores} cores, shared by the server under test and the load generator "
        "(nothing pinned), so absolute numbers are lower than on a dedicated box: compare the "
        f"ratio. Load average at start: {load_before[0]:.2f}."
    )
    for name, entry in summary.items():
        if "ratio" in entry:
            verdict = "meets" if entry["meets_goal"] else "misses"
            print(
                f"{name}: dhub at {entry['ratio']:.0%} of bare throughput: {verdict} the 50% goal"
            )

    RESULTS.mkdir(exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    out = RESULTS / f"api_latency-{stamp}.json"
    report = {
        "when": stamp,
        "machine": {"cpus": cores, "platform": platform.platform(), "loadavg_start": load_before},
        "versions": versions(),
        "config": {
            **{k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
            "dhub_argv": dhub_argv,
            "seed_s": seed_s,
            **bodies,
        },
        "summary": summary,
        "runs": [asdict(r) for r in results],
        "total_s": time.monotonic() - started,
    }
    out.write_text(json.dumps(report, indent=2))
    print(f"results: {out.relative_to(ROOT)} (total {time.monotonic() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
