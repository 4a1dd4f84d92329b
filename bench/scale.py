"""Distributed mode on PostgreSQL: runs/s with 1 and 2 worker processes (and the embedded,
in-process mode for reference), and how many concurrently waiting runs one worker carries.

Everything runs as real processes, as an operator would start them, each scenario on a fresh
PostgreSQL schema of its own (``dhub_bench_<random>`` in the ``test`` database, dropped at
the end), with ``DHUB_ADMIN_TOKEN`` set to a random token and a temporary ``DHUB_DATA_DIR``:

- **embedded**: ``dhub serve`` (no ``DHUB_EXECUTION``): the API process executes the runs;
- **1 worker / 2 workers**: ``dhub serve --no-worker`` (the API only) and 1 or 2
  ``dhub worker --concurrency C`` processes (``DHUB_EXECUTION=distributed``) taking run jobs
  from PostgreSQL (procrastinate).

(a) **throughput**: 1,000 runs of a 10-node workflow, a chain of ``code`` nodes whose function
    sleeps 10 ms (ideal wall time of one run: 0.1 s), submitted through the HTTP API
    (``POST /api/v1/agents/{id}/runs``, 64 requests in flight) while the workers run, timed
    from the first submit to the last run's ``finished_at``. Workers run with dhub's default
    ``--concurrency 100``. A scenario still going after ``--budget`` seconds (the embedded
    server: ``--embedded-budget``) is cut and reported from the steps saved by then. CPU of
    the API process, the workers' own threads, the interpreters they start for code nodes,
    PostgreSQL, this client and the rest of the machine is read from /proc over the same
    interval, and PostgreSQL's commit count from pg_stat_database.
(a') the same for 1 and 2 workers with dhub's warm pool capped at ``--pool-idle`` (20)
    interpreters per function (``DHUB_SANDBOX_WARM_PER_FUNCTION=20``,
    ``DHUB_SANDBOX_WARM_TOTAL=1280``), and each worker executing that many runs at once
    (``--concurrency 20``). Until 2026-12-03 the stock pool kept 2 idle interpreters per
    function, and this showed what a bigger one saves; it now sizes itself to the calls in
    flight, within a memory budget.
(b) **waiting runs**: one worker with ``--concurrency 2000``; N runs (250, 500, 1,000, 2,000)
    submitted at once of a one-node workflow that waits 10 s, either in a code node's function
    (a sandboxed interpreter per waiting call) or for a model (an ``llm`` node; the model is
    tests/support/wire's fake OpenAI server in its own process, answering after 10 s): runs/s
    against the ideal N / 10 s, how many runs were executing at once, the worker's memory.
    The code runs get ``DHUB_SANDBOX_CONCURRENCY=2000`` (``--waiting-sandbox-concurrency``):
    with dhub's default (32 per core, at least 64) a worker runs no more calls at once. Code
    levels above ``--code-waiting-max`` (1,000) are skipped: a waiting call holds ~12 MB.

Code nodes run through dhub's real sandbox, with ``DHUB_SANDBOX=unsafe`` by default: the warm
pool and its interpreters without bubblewrap's namespaces (``--sandbox bubblewrap`` for
those). Each dhub process is put in a cgroup (v2) of its own when this process may make one
(root), so the CPU of every interpreter it started counts as its "sandbox", also bubblewrap's,
which the worker never reaps; without one, those land in "other".

Workers under CPU quotas (issue 25): ``--worker-cpu 0.2`` puts each worker, and the sandboxes
it starts, in a cgroup v1 ``cpu`` group of its own with that quota (cpu_quota.py), so that the
workers and not the machine set the pace; ``--warmup-runs N`` lets each worker's pool warm up
first; ``--kind model`` measures runs of ``llm`` nodes answered by the fake model server
instead of code nodes; ``--only`` takes ``4`` for four workers.

    .venv/bin/python bench/scale.py              # about 9 minutes; needs PostgreSQL
    .venv/bin/python bench/scale.py --quick      # about 5 minutes: 300 runs, 250/1,000 waiting 5 s
    .venv/bin/python bench/scale.py --rounds 3 --only 1,2,1p,2p --waiting ''
    .venv/bin/python bench/scale.py --only 1,2,4 --runs 300 --warmup-runs 150 --worker-cpu 0.2 \
        --waiting '' [--kind model]

Writes bench/results/scale-<UTC time>.json (every scenario, the machine, the versions).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

import cluster as cluster_mod
from cluster import Cluster, pg_commits, postgres_settings
from proc_stats import (
    CpuSnapshot,
    descendants,
    machine_busy_s,
    processes,
    rss_of,
)
from scale_workloads import chain, model_call, model_chain, model_server

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
RESULTS = BENCH / "results"
GOALS = {2: 1.8, 4: 3.2}  # issue 25: n workers at least this many times one, same quota
FINISHED = ("succeeded", "failed", "cancelled")
IN_FLIGHT = 64  # POSTs at once


# -- one batch of runs -----------------------------------------------------------------------


@dataclass
class Batch:
    scenario: str
    workers: int
    concurrency: int
    pool_idle: int
    runs: int
    nodes: int
    wait_s: float
    finished: int = 0
    complete: bool = False  # every run finished within the budget
    wall_s: float = 0.0  # first submit -> last finished_at (or the budget)
    submit_s: float = 0.0  # first submit -> last 202
    runs_per_s: float = 0.0
    ideal_runs_per_s: float = 0.0  # (b): every run at once, nothing but the waits
    latency_p50_s: float = 0.0  # created_at -> finished_at
    latency_p99_s: float = 0.0
    run_p50_s: float = 0.0  # started_at (a worker took it) -> finished_at
    # created_at -> started_at: the queue's wait, p50 and of the first tenth of the runs
    # submitted (taken before the workers had a backlog: the queue's fetch latency)
    start_wait_p50_s: float = 0.0
    start_wait_first_s: float = 0.0
    # The trickle after the burst (``--trickle``): runs one at a time to idle workers, in ms:
    # the job's insert -> a worker's fetch of it (the queue's own latency: NOTIFY, the fetch),
    # the POST's answer, and created_at -> started_at (the first step saved)
    trickle_fetch_ms: list[float] = field(default_factory=list)
    trickle_post_ms: list[float] = field(default_factory=list)
    trickle_start_ms: list[float] = field(default_factory=list)
    steal_retries: int = 0  # measured again this often: the host took a core (--max-steal)
    # Steps saved by all runs, finished or not, per second, and by a finished run: what a
    # scenario cut by the budget did, in runs/s, is progress_runs_per_s.
    steps_per_s: float = 0.0
    steps_per_run: float = 0.0
    progress_runs_per_s: float = 0.0
    statuses: dict[str, int] = field(default_factory=dict)
    submit_errors: int = 0
    cpu_pct: dict[str, float] = field(default_factory=dict)
    # CPU (ms) per run of the API, the workers, their interpreters and PostgreSQL (per run's
    # worth of saved steps, for a scenario cut by the budget)
    dhub_cpu_ms_per_run: float = 0.0
    # transactions PostgreSQL committed per finished run (the whole database: this bench's own
    # polling, about 10 a second, and any other client of it count too)
    pg_commits_per_run: float = 0.0
    peak_running: int = 0  # runs in status running at once (held by an executor)
    peak_interpreters: int = 0  # live descendants of the dhub processes
    peak_rss_mb: dict[str, float] = field(default_factory=dict)  # a process, its interpreters
    log_problems: list[str] = field(default_factory=list)
    rounds: list[float] = field(default_factory=list)  # (a): every round's runs/s
    jobs_started: int = 0  # run jobs the workers started (their logs)
    jobs_deferred_by_workers: int = 0  # run jobs the workers queued themselves (their logs)


async def create_agent(client: httpx.AsyncClient, doc: dict[str, Any]) -> str:
    got = await client.post("/api/v1/agents", json=doc)
    if got.status_code != 201:
        raise SystemExit(f"agent not created: {got.status_code} {got.text[:2000]}")
    agent_id: str = got.json()["id"]
    return agent_id


async def submit(client: httpx.AsyncClient, agent_id: str, count: int) -> int:
    """POST ``count`` runs, IN_FLIGHT requests at once (a failed one is tried twice more);
    the number that never got a 202."""
    gate = asyncio.Semaphore(IN_FLIGHT)
    errors = 0

    async def one() -> None:
        nonlocal errors
        async with gate:
            detail = ""
            for _ in range(3):
                try:
                    got = await client.post(f"/api/v1/agents/{agent_id}/runs", json={"inputs": {}})
                except httpx.TransportError as exc:
                    detail = repr(exc)
                    continue
                if got.status_code == 202:
                    return
                detail = f"{got.status_code} {got.text[:300]}"
            errors += 1
            print(f"    a submit failed: {detail}", file=sys.stderr)

    await asyncio.gather(*(one() for _ in range(count)))
    return errors


def memory_sample(cluster: Cluster, peak: dict[str, float]) -> int:
    """Update ``peak`` (MB: each process, and its interpreters); the live interpreters."""
    everything = processes()
    interpreters = 0
    for p in cluster.procs:
        kids = descendants(p.popen.pid, everything)
        interpreters += len(kids)
        for key, mb in (
            (p.role, rss_of(p.popen.pid) / 2**20),
            (f"{p.role} sandbox", sum(rss_of(k) for k in kids) / 2**20),
        ):
            peak[key] = max(peak.get(key, 0.0), mb)
    return interpreters


# A bench-only trigger on the fresh schema: when each job was inserted and fetched, by the
# clock (procrastinate's own events use now(), the transaction's start, and go with the job,
# which dhub deletes when it succeeds).
JOB_TIMES = """
CREATE TABLE bench_job_times (job_id bigint, status text, at timestamptz DEFAULT clock_timestamp());
CREATE FUNCTION bench_job_time() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO bench_job_times (job_id, status) VALUES (NEW.id, NEW.status::text);
    RETURN NEW;
END $$;
CREATE TRIGGER bench_job_time AFTER INSERT OR UPDATE OF status ON procrastinate_jobs
    FOR EACH ROW EXECUTE FUNCTION bench_job_time();
"""


async def trickle(
    client: httpx.AsyncClient, db: Any, agent_id: str, count: int, result: Batch
) -> None:
    """``count`` runs one at a time, each once the one before finished (the workers idle): the
    queue's fetch latency apart from any backlog."""
    db.execute(JOB_TIMES)
    for _ in range(count):
        began = time.perf_counter()
        got = await client.post(f"/api/v1/agents/{agent_id}/runs", json={"inputs": {}})
        result.trickle_post_ms.append((time.perf_counter() - began) * 1000)
        if got.status_code != 202:
            print(
                f"    a trickle submit failed: {got.status_code} {got.text[:300]}", file=sys.stderr
            )
            continue
        run_id = got.json()["id"]
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            row = db.execute(
                "SELECT created_at, started_at FROM runs WHERE id = %s AND status IN"
                " ('succeeded', 'failed', 'cancelled')",
                (run_id,),
            ).fetchone()
            if row:
                result.trickle_start_ms.append(float(row[1] - row[0]))
                break
            await asyncio.sleep(0.005)
        await asyncio.sleep(0.05)
    fetches = db.execute(
        "SELECT extract(epoch FROM d.at - i.at) * 1000 FROM bench_job_times i JOIN"
        " bench_job_times d ON d.job_id = i.job_id AND d.status = 'doing'"
        " WHERE i.status = 'todo'"
    ).fetchall()
    result.trickle_fetch_ms = [float(ms) for (ms,) in fetches]


async def warm_up(
    client: httpx.AsyncClient,
    db: Any,  # psycopg's connection or cluster.SqliteReader
    agent_id: str,
    runs: int,
    budget: float,
) -> None:
    """``runs`` runs of the agent, submitted at once and waited for (not measured)."""
    await submit(client, agent_id, runs)
    deadline = time.monotonic() + budget
    query = "SELECT count(*) FROM runs WHERE status IN ('succeeded', 'failed', 'cancelled')"
    while time.monotonic() < deadline:
        done = db.execute(query).fetchone()
        if done and done[0] >= runs:
            return
        await asyncio.sleep(0.2)


async def batch(
    cluster: Cluster,
    scenario: str,
    doc: dict[str, Any],
    runs: int,
    nodes: int,
    wait_s: float,
    budget: float,
    warmup: int = 0,
    trickle_runs: int = 0,
) -> Batch:
    """Submit ``runs`` runs of ``doc`` and wait until they all finished (or the budget ran
    out); time from the first submit to the last ``finished_at``. ``warmup`` runs of the same
    agent go first, unmeasured: each worker's warm pool has its interpreters by then."""
    result = Batch(
        scenario, cluster.workers, cluster.concurrency, cluster.pool_idle, runs, nodes, wait_s
    )
    limits = httpx.Limits(max_connections=IN_FLIGHT, max_keepalive_connections=IN_FLIGHT)
    async with httpx.AsyncClient(
        base_url=cluster.base, headers=cluster.headers(), limits=limits, timeout=120
    ) as client:
        agent_id = await create_agent(client, doc)
        with cluster.database() as db:
            if warmup:
                await warm_up(client, db, agent_id, warmup, budget)
            t0 = time.time()
            since = {"t0": int(t0 * 1000)}  # the measured runs: created from now on
            before = CpuSnapshot.take(cluster.procs, cluster.watch)
            commits = pg_commits(db)
            submitting = asyncio.ensure_future(submit(client, agent_id, runs))
            deadline, sampled = time.monotonic() + budget, 0.0
            while time.monotonic() < deadline:
                await asyncio.sleep(0.1)
                if time.monotonic() - sampled > 0.5:
                    sampled = time.monotonic()
                    live = memory_sample(cluster, result.peak_rss_mb)
                    result.peak_interpreters = max(result.peak_interpreters, live)
                counts: dict[str, int] = dict(
                    db.execute(
                        "SELECT status, count(*) FROM runs WHERE created_at >= %(t0)s GROUP BY 1",
                        since,
                    ).fetchall()
                )
                result.peak_running = max(result.peak_running, counts.get("running", 0))
                if not submitting.done():
                    continue
                if not result.submit_s:
                    result.submit_s = time.time() - t0
                    result.submit_errors = submitting.result()
                if sum(counts.get(s, 0) for s in FINISHED) >= runs - result.submit_errors:
                    result.complete = True
                    break
            after = CpuSnapshot.take(cluster.procs, cluster.watch)
            at_end = time.time()
            if not submitting.done():
                submitting.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await submitting
                result.submit_s = at_end - t0
            await asyncio.sleep(1.0)  # PostgreSQL flushes its statistics about once a second
            commits = pg_commits(db) - commits
            rows = db.execute(
                "SELECT created_at, started_at, finished_at FROM runs WHERE finished_at IS NOT"
                " NULL AND created_at >= %(t0)s",
                since,
            ).fetchall()
            statuses = db.execute(
                "SELECT status, count(*) FROM runs WHERE created_at >= %(t0)s GROUP BY 1", since
            ).fetchall()
            steps, per_run = db.execute(
                "SELECT sum(step_count - 1), avg(step_count - 1) FILTER (WHERE finished_at IS"
                " NOT NULL) FROM runs WHERE created_at >= %(t0)s",
                since,
            ).fetchone()
            if trickle_runs and result.complete:
                await trickle(client, db, agent_id, trickle_runs, result)
    result.statuses = dict(statuses)
    result.finished = len(rows)
    # the last run's end, or (cut by the budget) the end of the wait
    last = max(f for _, _, f in rows) / 1000 if result.complete and rows else at_end
    result.wall_s = last - t0
    result.runs_per_s = result.finished / result.wall_s
    if rows:
        latencies = sorted((f - c) / 1000 for c, _, f in rows)
        result.latency_p50_s = statistics.median(latencies)
        result.latency_p99_s = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
        result.run_p50_s = statistics.median((f - (s or c)) / 1000 for c, s, f in rows)
        waits = [((s or c) - c) / 1000 for c, s, _ in sorted(rows)]
        result.start_wait_p50_s = statistics.median(waits)
        result.start_wait_first_s = statistics.median(waits[: max(1, len(waits) // 10)])
    # a finished run's steps (none finished: a chain's, each node's and the end's)
    result.steps_per_run = float(per_run or nodes + 1)
    result.steps_per_s = float(steps or 0) / result.wall_s
    result.progress_runs_per_s = result.steps_per_s / result.steps_per_run
    result.cpu_pct = before.until(after)
    # runs done: the finished ones, or (cut by the budget) the runs' worth of steps saved
    done = result.finished if result.complete else float(steps or 0) / result.steps_per_run
    if done:
        skip = ("client", "other", "machine", "steal", "model server")
        dhub = sum(v for k, v in result.cpu_pct.items() if k not in skip)
        span = after.at - before.at
        result.dhub_cpu_ms_per_run = dhub / 100 * span / done * 1000
        result.pg_commits_per_run = commits / done
    result.log_problems = cluster.problems()[:30]
    for p in cluster.procs:
        if p.role.startswith("worker"):
            text = p.log.read_text(errors="replace")
            result.jobs_started += text.count("Starting job dhub.run")
            result.jobs_deferred_by_workers += text.count("Deferred 1 job")
    return result


# -- scenarios -------------------------------------------------------------------------------


def settings_env(args: argparse.Namespace, sandbox_concurrency: int = 0) -> dict[str, str]:
    env = {"DHUB_RUN_LEASE_SECONDS": args.lease_seconds} if args.lease_seconds else {}
    if sandbox_concurrency or args.sandbox_concurrency:
        env["DHUB_SANDBOX_CONCURRENCY"] = str(sandbox_concurrency or args.sandbox_concurrency)
    return env


def wait_quiet(limit_pct: float, patience: float) -> float:
    """Wait (up to ``patience`` s) until the machine is below ``limit_pct`` % busy over 2 s;
    what it was last."""
    deadline = time.monotonic() + patience
    while True:
        b0, t0 = machine_busy_s(), time.monotonic()
        time.sleep(2.0)
        busy = (machine_busy_s() - b0) / (time.monotonic() - t0) * 100
        if busy < limit_pct or time.monotonic() > deadline:
            return busy


def pct(values: list[float]) -> str:
    ordered = sorted(values)
    p90 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.9))]
    return f"{statistics.median(ordered):.1f} / {p90:.1f}"


def show(b: Batch) -> None:
    cpu = "  ".join(f"{k} {v:.0f}%" for k, v in b.cpu_pct.items() if v >= 0.5 or k == "other")
    state = (
        ""
        if b.complete
        else (
            f"  CUT by the budget: {b.finished}/{b.runs} finished, steps saved as many as "
            f"{b.progress_runs_per_s:.1f} runs/s"
        )
    )
    print(
        f"  {b.scenario:<24} {b.runs_per_s:7.1f} runs/s  wall {b.wall_s:6.1f} s  submit "
        f"{b.submit_s:5.1f} s  latency p50 {b.latency_p50_s:6.2f} s p99 {b.latency_p99_s:6.2f} s"
        f"{state}\n    CPU (% of one core): {cpu}",
        flush=True,
    )
    if b.jobs_started:
        print(
            f"    jobs started {b.jobs_started} for {b.finished} runs ({b.jobs_deferred_by_workers}"
            f" queued by the workers themselves); peak running {b.peak_running}; a run's own "
            f"time p50 {b.run_p50_s:.2f} s; created -> started p50 {b.start_wait_p50_s:.2f} s, "
            f"first tenth {b.start_wait_first_s:.3f} s",
            flush=True,
        )
    if b.trickle_fetch_ms:
        print(
            f"    trickle of {len(b.trickle_start_ms)} runs one at a time (ms, p50 / p90): job"
            f" inserted -> fetched {pct(b.trickle_fetch_ms)}; POST {pct(b.trickle_post_ms)};"
            f" created -> first step saved {pct(b.trickle_start_ms)}",
            flush=True,
        )
    failed = {k: v for k, v in b.statuses.items() if k != "succeeded"}
    if failed or b.submit_errors:
        print(f"    runs not succeeded: {failed}; submits refused: {b.submit_errors}", flush=True)
    for line in b.log_problems[:5]:
        print(f"    log: {line[:200]}", flush=True)


def throughput(args: argparse.Namespace, work: Path, pool_idle: int, rnd: int) -> list[Batch]:
    out = []
    suffix = f", pool {pool_idle}" if pool_idle else ""
    suffix += ", model" if args.kind == "model" else ""
    wait = args.wait_ms / 1000
    doc = model_chain(args.nodes, wait) if args.kind == "model" else chain(args.nodes, wait)
    # With a bigger pool, each worker executes as many runs at once as the pool keeps
    # interpreters per function (more would start interpreters again; 100 would let the pool
    # keep 1,000 of them, 12 GB). The embedded server has no such limit: left out.
    concurrency = pool_idle or args.concurrency
    for key, name, workers in (
        ("embedded", "embedded", 0),
        ("embedded-sqlite", "embedded, SQLite", 0),
        ("1", "1 worker", 1),
        ("2", "2 workers", 2),
        ("4", "4 workers", 4),
    ):
        if pool_idle:
            key += "p"
        if key not in args.only or (pool_idle and not workers):
            continue
        label = f"{name}{suffix}"
        slug = label.replace(" ", "_").replace(",", "") + f"-round{rnd}"
        for attempt in range(1 + args.steal_retries):
            again = f"-again{attempt}" if attempt else ""
            b = scenario(args, work, label, slug + again, key, workers, concurrency, pool_idle, doc)
            b.steal_retries = attempt
            show(b)
            steal = b.cpu_pct.get("steal", 0.0)
            if steal <= args.max_steal or attempt == args.steal_retries:
                break
            print(f"    the host took {steal:.0f}% of a core (steal) during it: measuring it "
                  "again", flush=True)  # fmt: skip
        out.append(b)
    return out


def scenario(
    args: argparse.Namespace, work: Path, label: str, slug: str, key: str, workers: int,
    concurrency: int, pool_idle: int, doc: dict[str, Any],
) -> Batch:  # fmt: skip
    """One throughput scenario on a cluster of its own."""
    quiet = wait_quiet(args.quiet_pct, args.quiet_wait)
    wait = args.wait_ms / 1000
    env = settings_env(args)
    with contextlib.ExitStack() as stack:
        model_pid = 0
        if args.kind == "model":
            model_env, model_pid = stack.enter_context(model_server(wait))
            env.update(model_env)
        cluster = Cluster(work, slug, workers, concurrency, args.sandbox, pool_idle, env,
                          worker_cpu=args.worker_cpu,
                          sqlite=key.startswith("embedded-sqlite"))  # fmt: skip
        if model_pid:
            cluster.watch["model server"] = model_pid
        stack.enter_context(cluster)
        budget = args.budget if workers else args.embedded_budget
        b = asyncio.run(
            batch(cluster, label, doc, args.runs, args.nodes, wait, budget, args.warmup_runs,
                  args.trickle if workers else 0)
        )  # fmt: skip
    b.cpu_pct["machine_before"] = quiet
    return b


def waiting(args: argparse.Namespace, work: Path, kind: str) -> list[Batch]:
    """One worker, N runs at once, each waiting ``--waiting-s`` in a code node's function
    (``code``: a sandboxed interpreter per waiting call) or for the fake model (``model``)."""
    out = []
    for level in args.waiting:
        if kind == "code" and level > args.code_waiting_max:
            continue
        quiet = wait_quiet(args.quiet_pct, args.quiet_wait)
        with contextlib.ExitStack() as stack:
            env = settings_env(args, args.waiting_sandbox_concurrency if kind == "code" else 0)
            doc = chain(1, args.waiting_s)
            if kind == "model":
                model_env, model_pid = stack.enter_context(model_server(args.waiting_s))
                env.update(model_env)
                doc = model_call(args.waiting_s)
            cluster = Cluster(
                work, f"waiting_{kind}_{level}", 1, args.waiting_concurrency, args.sandbox,
                extra_env=env,
            )  # fmt: skip
            if kind == "model":
                cluster.watch["model server"] = model_pid
            with cluster:
                label = f"{level} waiting ({kind})"
                b = asyncio.run(batch(cluster, label, doc, level, 1, args.waiting_s, args.budget))
        b.ideal_runs_per_s = level / args.waiting_s
        b.cpu_pct["machine_before"] = quiet
        show(b)
        out.append(b)
    return out


# -- report ----------------------------------------------------------------------------------


def ratios_of(batches: list[Batch], pool_idle: int) -> dict[int, float]:
    """Runs/s of n workers against one worker's (n > 1), where both completed."""
    by = {b.workers: b.runs_per_s for b in batches if b.pool_idle == pool_idle and b.complete}
    if not by.get(1):
        return {}
    return {n: rate / by[1] for n, rate in sorted(by.items()) if n > 1}


def medians(batches: list[Batch]) -> list[Batch]:
    """Per scenario, the round with the median runs/s (the lower one of an even count), with
    every round's runs/s in ``rounds``."""
    by: dict[str, list[Batch]] = {}
    for b in batches:
        by.setdefault(b.scenario, []).append(b)
    out = []
    for group in by.values():
        ordered = sorted(group, key=lambda b: b.runs_per_s)
        typical = ordered[(len(ordered) - 1) // 2]
        typical.rounds = [round(b.runs_per_s, 1) for b in group]
        out.append(typical)
    return out


def table(throughputs: list[Batch], waits: list[Batch], rounds: int) -> str:
    lines = [
        f"{'scenario':<26}{'runs/s':>8}{'wall s':>8}{'p50 s':>7}{'API':>6}{'workers':>8}"
        f"{'sandbox':>8}{'PG':>6}{'other':>7}{'ms/run':>8}{'tx/run':>8}",
        "-" * 100,
    ]
    for b in throughputs + waits:
        c = b.cpu_pct
        api = c.get("api", c.get("embedded", 0.0))
        own = sum(v for k, v in c.items() if k.startswith("worker") and "sandbox" not in k)
        box = sum(v for k, v in c.items() if k.endswith("sandbox"))
        mark = "" if b.complete else " *"
        rate = b.runs_per_s if b.complete else b.progress_runs_per_s
        lines.append(
            f"{b.scenario + mark:<26}{rate:>8.1f}{b.wall_s:>8.1f}{b.latency_p50_s:>7.2f}"
            f"{api:>5.0f}%{own:>7.0f}%{box:>7.0f}%{c['postgres']:>5.0f}%{c['other']:>6.0f}%"
            f"{b.dhub_cpu_ms_per_run:>8.1f}{b.pg_commits_per_run:>8.1f}"
        )
    if rounds > 1:
        lines.append(f"(a): the median of {rounds} rounds; every round's runs/s:")
        lines += [f"  {b.scenario:<24}{b.rounds}" for b in throughputs]
    lines.append(
        "CPU in % of one core (2 cores = 200%); sandbox: the interpreters of code nodes; other: "
        "the rest of the machine; ms/run: CPU of API + workers + sandbox + PostgreSQL per run; "
        "tx/run: PostgreSQL commits per run."
    )
    if any(not b.complete for b in throughputs + waits):
        lines.append(
            "* cut by the budget: runs/s from the steps saved by then / a finished run's steps, "
            "wall and p50 of the runs that finished"
        )
    return "\n".join(lines)


def versions() -> dict[str, str]:
    from importlib.metadata import version

    out = {"python": platform.python_version()}
    for dist in ("dhub", "procrastinate", "psycopg", "sqlalchemy", "uvicorn", "httpx"):
        with contextlib.suppress(Exception):
            out[dist] = version(dist)
    return out


def dhub_source() -> dict[str, Any]:
    """The commit of the dhub being measured, and the files of src/ that differ from it."""

    def git(*argv: str) -> str:
        done = subprocess.run(
            ["git", "--no-optional-locks", *argv], cwd=ROOT, capture_output=True, text=True
        )
        return done.stdout.strip() if done.returncode == 0 else "?"

    changed = [line[3:] for line in git("status", "--porcelain", "src").splitlines()]
    return {
        "commit": git("rev-parse", "--short", "HEAD"),
        "src_tree": git("rev-parse", "--short", "HEAD:src"),  # what the processes import
        "src_changes": changed,
    }


def cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor()


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000, help="runs per throughput scenario")
    parser.add_argument("--nodes", type=int, default=10, help="code nodes per run")
    parser.add_argument("--wait-ms", type=float, default=10.0, help="each function's sleep")
    parser.add_argument(
        "--concurrency", type=int, default=100, help="dhub worker --concurrency (its default)"
    )
    parser.add_argument("--sandbox", choices=("unsafe", "bubblewrap"), default="unsafe")
    parser.add_argument(
        "--pool-idle",
        type=int,
        default=20,
        help="(a'): (a) again, the warm pool keeping up to N idle interpreters per function "
        "and each worker executing N runs at once (0: skip it)",
    )
    parser.add_argument(
        "--waiting",
        type=lambda s: [int(x) for x in s.split(",") if x],
        default=[250, 500, 1000, 2000],
        help="runs queued at once for (b), comma-separated ('' skips it)",
    )
    parser.add_argument("--waiting-s", type=float, default=10.0, help="how long each waits")
    parser.add_argument(
        "--waiting-kinds",
        type=lambda s: [x for x in s.split(",") if x],
        default=["code", "model"],
        help="what (b)'s runs wait on: a code node's function, the fake model, or both",
    )
    parser.add_argument("--waiting-concurrency", type=int, default=2000)
    parser.add_argument(
        "--waiting-sandbox-concurrency",
        type=int,
        default=2000,
        help="DHUB_SANDBOX_CONCURRENCY of (b)'s code runs: how many calls may wait at once "
        "(0: dhub's default, 32 per core, at least 64)",
    )
    parser.add_argument(
        "--sandbox-concurrency",
        type=int,
        default=0,
        help="DHUB_SANDBOX_CONCURRENCY of (a) (0: dhub's default)",
    )
    parser.add_argument(
        "--code-waiting-max",
        type=int,
        default=1000,
        help="skip (b)'s code levels above this (a waiting code call holds an interpreter, "
        "about 12 MB)",
    )
    parser.add_argument("--budget", type=float, default=100.0, help="seconds per scenario, at most")
    parser.add_argument(
        "--embedded-budget", type=float, default=60.0, help="the same for the embedded server"
    )
    parser.add_argument(
        "--only",
        default="embedded,1,2,1p,2p",
        help="throughput scenarios: embedded (on PostgreSQL), embedded-sqlite (dhub's default"
        " database), 1, 2, 4 (workers), 1p, 2p, 4p (with --pool-idle)",
    )
    parser.add_argument(
        "--kind", choices=("code", "model"), default="code",
        help="throughput scenarios: a chain of code nodes (each function sleeps --wait-ms), or "
        "of llm nodes the fake model server answers after --wait-ms (runs that wait, not work)",
    )  # fmt: skip
    parser.add_argument(
        "--warmup-runs", type=int, default=0, metavar="N",
        help="throughput scenarios: N runs first, unmeasured, so each worker's warm pool has "
        "its interpreters (the steady state rather than the first minute)",
    )  # fmt: skip
    parser.add_argument(
        "--trickle", type=int, default=20, metavar="N",
        help="throughput scenarios with workers: after the burst, N runs one at a time to idle "
        "workers, for the queue's fetch latency apart from a backlog (0: none)",
    )  # fmt: skip
    parser.add_argument(
        "--worker-cpu",
        type=float,
        default=0.0,
        metavar="FRACTION",
        help="each worker (and the sandboxes it starts) in a CPU cgroup of this fraction of a "
        "CPU (e.g. 0.3), so the workers are the bottleneck; the API and PostgreSQL run "
        "unconstrained (needs root and the cgroup v1 cpu controller; else unconstrained)",
    )
    parser.add_argument(
        "--max-steal", type=float, default=10.0, metavar="PCT",
        help="a throughput scenario during which the host took more than PCT %% of a core "
        "(steal: the hypervisor ran others) is measured again, up to --steal-retries times",
    )  # fmt: skip
    parser.add_argument("--steal-retries", type=int, default=2)
    parser.add_argument("--quiet-pct", type=float, default=30.0, help="see --quiet-wait")
    parser.add_argument(
        "--quiet-wait",
        type=float,
        default=30.0,
        help="before each scenario, wait up to this long for the machine to be under "
        "--quiet-pct %% busy (other people's work shares it)",
    )
    parser.add_argument(
        "--lease-seconds",
        help="DHUB_RUN_LEASE_SECONDS for dhub (default: unset, 30 s); the workers' sweep of "
        "lapsed runs runs that often",
    )
    parser.add_argument("--rounds", type=int, default=1, help="repeat (a); medians")
    parser.add_argument(
        "--quick", action="store_true", help="300 runs; 250 and 1,000 runs waiting 5 s"
    )
    parser.add_argument("--keep", type=Path, help="copy the process logs here")
    args = parser.parse_args()
    if args.quick:
        args.runs, args.waiting, args.waiting_s = 300, [250, 1000], 5.0
        args.budget, args.embedded_budget = min(args.budget, 60.0), min(args.embedded_budget, 30.0)
    args.only = [x.strip() for x in args.only.split(",")]
    return args


def main() -> int:
    args = parse_args()
    started = time.monotonic()
    load_before = os.getloadavg()
    source = dhub_source()
    changes = ", ".join(source["src_changes"])
    print(
        f"{args.runs} runs of {args.nodes} code nodes sleeping {args.wait_ms:g} ms; workers "
        f"--concurrency {args.concurrency}; sandbox {args.sandbox}; {os.cpu_count()} cores; "
        f"load average {load_before[0]:.2f}; dhub at {source['commit']} (src {source['src_tree']})"
        f"{' with changes in ' + changes if changes else ''}",
        flush=True,
    )
    throughputs: list[Batch] = []
    waits: list[Batch] = []
    with tempfile.TemporaryDirectory(prefix="dhub-scale-") as tmp:
        work = Path(tmp)
        try:
            for rnd in range(1, args.rounds + 1):
                print(f"(a) throughput, stock dhub, round {rnd}", flush=True)
                throughputs += throughput(args, work, 0, rnd)
                if args.pool_idle and {"1p", "2p"} & set(args.only):
                    print(
                        f"(a') throughput, warm pool of {args.pool_idle}, round {rnd}", flush=True
                    )
                    throughputs += throughput(args, work, args.pool_idle, rnd)
            for kind in args.waiting_kinds:
                if args.waiting:
                    print(f"(b) runs waiting {args.waiting_s:g} s ({kind}), one worker", flush=True)
                    waits += waiting(args, work, kind)
        finally:
            if args.keep:
                args.keep.mkdir(parents=True, exist_ok=True)
                for log in work.rglob("*.log"):
                    shutil.copy(log, args.keep / f"{log.parent.name}-{log.name}")

    print()
    typical = medians(throughputs)
    print(table(typical, waits, args.rounds))
    ratios: dict[str, dict[int, float]] = {}
    for idle in sorted({b.pool_idle for b in throughputs}):
        what = f"pool_{idle}" if idle else "stock"
        ratios[what] = ratios_of(typical, idle)
        for n, ratio in ratios[what].items():
            goal = GOALS.get(n)
            verdict = "" if goal is None else (
                f": {'meets' if ratio >= goal else 'misses'} the {goal}x goal")  # fmt: skip
            print(f"{n} workers / 1 worker ({what}): {ratio:.2f}x{verdict}")
    for b in waits:
        print(
            f"{b.runs} waiting: {b.runs_per_s:.1f} runs/s of an ideal {b.ideal_runs_per_s:.0f} "
            f"({b.runs_per_s / b.ideal_runs_per_s:.0%}), latency p50 {b.latency_p50_s:.2f} s; "
            f"peak {b.peak_running} running, {b.peak_interpreters} interpreters, worker RSS "
            f"{b.peak_rss_mb.get('worker1', 0):.0f} MB, interpreters' RSS "
            f"{b.peak_rss_mb.get('worker1 sandbox', 0):.0f} MB"
        )

    now = dhub_source()
    if (now["src_tree"], now["src_changes"]) != (source["src_tree"], source["src_changes"]):
        print(f"WARNING: dhub's source changed during the run (was {source}, now {now}): "
              "the scenarios did not all measure the same code")  # fmt: skip
    RESULTS.mkdir(exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    out = RESULTS / f"scale-{stamp}.json"
    report = {
        "when": stamp,
        "machine": {
            "cpus": os.cpu_count(),
            "cpu_model": cpu_model(),
            "platform": platform.platform(),
            "loadavg_start": load_before,
            "postgres": postgres_settings(),
        },
        "versions": versions(),
        "dhub_source": {"at_start": source, "at_end": now},
        "config": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "worker_cpu_applied": bool(args.worker_cpu) and cluster_mod.QUOTA_PROBLEM is None,
        "worker_cpu_problem": cluster_mod.QUOTA_PROBLEM,
        "throughput": [asdict(b) for b in throughputs],
        "throughput_medians": [b.scenario for b in typical],
        "ratios_over_1_worker": ratios,
        "waiting": [asdict(b) for b in waits],
        "total_s": time.monotonic() - started,
    }
    out.write_text(json.dumps(report, indent=2))
    print(f"results: {out.relative_to(ROOT)} (total {time.monotonic() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
