"""Issue 23's goals (speed at scale), each measured here and printed with its ratio: the table
`make bench` ends with. Peers run in the same process (LangGraph's savers) or on the same
machine in the same run (a bare FastAPI app); bounds are the issue's.

Sections (``--only``, comma-separated):

- ``steps``: a saved step, one run at a time (bench/runs.py): SQLite ms per node of a 20-node
  chain, and PostgreSQL against LangGraph's PostgresSaver for the chain, fan-out and loop shapes;
- ``throughput``: 1,000 concurrent 10-node runs whose function waits 10 ms (bench/runs.py (b)),
  on SQLite and PostgreSQL, with saved steps per second and this process's CPU per step;
- ``admission``: 1,000 runs submitted at once to the embedded server (bench/admission.py);
- ``api``: list 50 of 10,000 agents against the bare FastAPI app (bench/api_latency.py);
- ``sandbox``: bench/scale.py's stock scenario (a chain of 10 code nodes, one worker taking
  100 runs at a time) under bubblewrap: CPU per run of dhub's processes and of the sandbox's;
  and bench/cold_start.py: a new function's first call when a spare sandbox waits (goal: "a
  few ms", taken as 10), against a whole cold start.

Needs PostgreSQL at 127.0.0.1:5432 and the bench group (``make bench`` installs it). About 8
minutes; ``--quick`` about 4. Writes bench/results/goals-<UTC time>.json.

    .venv/bin/python bench/goals.py [--quick] [--only steps,throughput,admission,api,sandbox]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
RESULTS = BENCH / "results"
SECTIONS = ("steps", "throughput", "admission", "api", "sandbox")
STEPS_PER_RUN = 11  # bench/runs.py's 10-node chain: its nodes and its end


@dataclass
class Row:
    goal: str
    measured: float
    unit: str
    bound: float  # the number: an upper bound, or (at_least) a lower one
    ratio: float  # measured / bound, or against the peer when the goal names one
    met: bool
    note: str = ""


def at_most(goal: str, measured: float, bound: float, unit: str, note: str = "") -> Row:
    return Row(goal, measured, unit, bound, measured / bound, measured <= bound, note)


def at_least(goal: str, measured: float, bound: float, unit: str, note: str = "") -> Row:
    return Row(goal, measured, unit, bound, measured / bound, measured >= bound, note)


# -- saved steps and throughput: in this process, bench/runs.py's own measurements ---------------


def _runs() -> Any:
    sys.path.insert(0, str(BENCH))
    import runs

    return runs


def steps(quick: bool) -> list[Row]:
    runs = _runs()
    count = 10 if quick else 20
    rows = []
    sqlite = []
    for _ in range(3):
        with tempfile.TemporaryDirectory() as tmp:
            url = f"sqlite:///{tmp}/lone.db"
            sqlite.append(asyncio.run(runs.dhub_per_node(url, "chain", 20, count)) * 1e3)
    rows.append(at_most("SQLite: a lone run's saved step (20-node chain)",
                        statistics.median(sqlite), 0.3, "ms/node",
                        f"median of 3 ({min(sqlite):.3f}-{max(sqlite):.3f})"))  # fmt: skip
    from langgraph.checkpoint.postgres import PostgresSaver

    for kind in runs.SHAPES:
        runs.fresh_pg()
        dhub = asyncio.run(runs.dhub_per_node(runs.PG_BENCH, kind, 20, count)) * 1e3
        runs.fresh_pg()
        with PostgresSaver.from_conn_string(runs.PG_BENCH) as saver:
            saver.setup()
            peer = runs.langgraph_per_node(saver, kind, 20, count) * 1e3
        ratio = dhub / peer
        rows.append(Row(f"PostgreSQL: saved step, {kind} of 20, vs PostgresSaver", dhub,
                        "ms/node", 0.5, ratio, ratio <= 0.5,
                        f"PostgresSaver {peer:.3f} ms/node; goal: at most half"))  # fmt: skip
    return rows


def throughput(quick: bool) -> list[Row]:
    runs = _runs()
    count = 1000
    rows = []
    for name, bound, url_of in (
        ("SQLite", 1.5, lambda tmp: f"sqlite:///{tmp}/c.db"),
        ("PostgreSQL", 2.0, lambda tmp: runs.PG_BENCH),
    ):
        with tempfile.TemporaryDirectory() as tmp:
            if name == "PostgreSQL":
                runs.fresh_pg()
            cpu = time.process_time()
            wall = asyncio.run(runs.concurrent(url_of(tmp), count))
            cpu = time.process_time() - cpu
        steps_total = count * STEPS_PER_RUN
        note = (f"{steps_total / wall:,.0f} saved steps/s (goal 5,000), this process "
                f"{cpu / steps_total * 1e3:.2f} ms CPU/step")  # fmt: skip
        rows.append(at_most(f"{name}: 1,000 concurrent 10-node runs, 10 ms waits",
                            wall, bound, "s", note))  # fmt: skip
    floor = asyncio.run(runs.in_memory_concurrent(count))
    rows.append(at_most("(floor) the same runs with nothing saved", floor, 1.5, "s",
                        "engine, executor and asyncio alone"))  # fmt: skip
    return rows


# -- the rest: their own scripts, in processes of their own ---------------------------------------


def _script(args: list[str]) -> None:
    print("$", " ".join(["python", *args]), flush=True)
    subprocess.run([sys.executable, *args], cwd=BENCH.parent, check=True)


def _newest(prefix: str, since: float) -> dict[str, Any]:
    found = [p for p in RESULTS.glob(f"{prefix}-*.json") if p.stat().st_mtime >= since]
    if not found:
        raise RuntimeError(f"bench/{prefix}.py wrote no results")
    return dict(json.loads(max(found, key=lambda p: p.stat().st_mtime).read_text()))


def admission(quick: bool) -> list[Row]:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "admission.json"
        _script(["bench/admission.py", "--runs", "1000", "--json", str(out)])
        side = json.loads(out.read_text())["admission"]
    note = f"throughput {side['throughput_runs_s']:.0f} runs/s (variable-node chains)"
    first, ratio = side["first_finished_s"], side["ratio_to_throughput"]
    return [
        at_most("Admission: first of 1,000 runs finished", first, 1.0, "s"),
        at_most("Admission: all finished, against 1,000 / throughput", ratio, 1.2, "x", note),
        at_most("Admission: API p99 meanwhile", side["api_p99_ms"], 50.0, "ms"),
    ]


def api(quick: bool) -> list[Row]:
    since = time.time()
    _script(["bench/api_latency.py", "--duration", "5" if quick else "10"])
    summary = _newest("api_latency", since)["summary"]
    name = next(k for k in summary if k.startswith("list"))
    entry = summary[name]
    note = f"dhub {entry['dhub']['rps']:,.0f} req/s, bare {entry['bare']['rps']:,.0f}"
    return [at_least("API: list 50 of 10,000, against bare FastAPI", entry["ratio"], 0.5, "x",
                     note)]  # fmt: skip


def sandbox(quick: bool) -> list[Row]:
    since = time.time()
    runs = "200" if quick else "500"
    _script(["bench/scale.py", "--only", "1", "--runs", runs, "--sandbox", "bubblewrap",
             "--waiting", ""])  # fmt: skip
    [batch] = [b for b in _newest("scale", since)["throughput"] if b["workers"] == 1]
    span = batch["wall_s"]
    # runs done: those finished, or (cut by the budget) the runs' worth of steps saved
    done = batch["finished"] if batch["complete"] else (
        batch["steps_per_s"] * span / batch["steps_per_run"])  # fmt: skip
    sandboxed = sum(v for k, v in batch["cpu_pct"].items() if "sandbox" in k)
    per_run = sandboxed / 100 * span / max(done, 1) * 1000
    note = f"{batch['runs_per_s']:.1f} runs/s; the sandbox's own share {per_run:.1f} ms/run"
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "cold_start.json"
        _script(["bench/cold_start.py", "--json", str(out)])
        cold = json.loads(out.read_text())
    return [
        at_most("Sandbox: scale.py stock scenario (bubblewrap), CPU per run",
                batch["dhub_cpu_ms_per_run"], 15.0, "ms", note),
        at_most("Sandbox: a new function's first call, from a spare", cold["spare_first_call_ms"],
                10.0, "ms", f"a whole cold start {cold['cold_ms']:.1f} ms (bubblewrap, p50)"),
    ]  # fmt: skip


MEASURES: dict[str, Callable[[bool], list[Row]]] = {
    "steps": steps, "throughput": throughput, "admission": admission, "api": api,
    "sandbox": sandbox,
}  # fmt: skip


def table(rows: list[Row]) -> str:
    lines = [f"{'goal':<58}{'measured':>12} {'bound':>8}{'ratio':>8}  met", "-" * 94]
    for r in rows:
        lines.append(f"{r.goal:<58}{r.measured:>9.3f} {r.unit:<5}{r.bound:>5g}"
                     f"{r.ratio:>8.2f}  {'yes' if r.met else 'NO'}")  # fmt: skip
        if r.note:
            lines.append(f"    {r.note}")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer runs per measure")
    parser.add_argument("--only", default=",".join(SECTIONS), help="sections, comma-separated")
    args = parser.parse_args()
    chosen = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = set(chosen) - set(SECTIONS)
    if unknown:
        parser.error(f"--only takes {', '.join(SECTIONS)}; not {', '.join(sorted(unknown))}")
    rows: list[Row] = []
    failed: dict[str, str] = {}
    for section in chosen:
        print(f"== {section}", flush=True)
        try:
            rows += MEASURES[section](args.quick)
        except Exception as exc:  # one broken measure must not hide the others
            failed[section] = repr(exc)
            print(f"{section}: could not be measured: {exc!r}", flush=True)
    print()
    print(table(rows))
    for section, why in failed.items():
        print(f"NOT MEASURED: {section}: {why}")
    RESULTS.mkdir(exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    out = RESULTS / f"goals-{stamp}.json"
    out.write_text(json.dumps({"rows": [asdict(r) for r in rows], "failed": failed}, indent=2))
    print(f"results: {out.relative_to(BENCH.parent)}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
