"""Prometheus metrics (docs/observability.md, "Metrics"): what the runtime counts as it
works, and the exposition that ``GET /metrics`` serves.

Counters and histograms are recorded by thin hooks where the work happens (a run's steps in
runtime/run_writer.py, model calls in runtime/model.py, sandbox calls in sandbox/pool.py,
requests in ``HttpMetrics``). Nothing is recorded while ``DHUB_METRICS`` is off: each hook
returns at its first line (``configure``), so an installation that does not scrape pays
nothing. Gauges of the database's state (runs waiting, the queue's depth and lag) are read
at scrape time instead, by the process that serves the scrape: every process sees the same
database, and a gauge kept in memory by each would be wrong as soon as a run parks or moves
to another worker.

Several processes on one host (uvicorn workers, ``dhub worker`` s) share their counts through
prometheus-client's multiprocess mode: with ``PROMETHEUS_MULTIPROC_DIR`` set (before the
process starts: prometheus-client reads it at import) each process writes its values to files
there, and the exposition sums them.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterator, Mapping
from typing import Any

from prometheus_client import (
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    generate_latest,
    multiprocess,
)
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

log = logging.getLogger(__name__)

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
_shared = os.environ.get(MULTIPROC_ENV)
if _shared and not os.path.isdir(_shared):  # prometheus-client would fail on a file name
    raise RuntimeError(
        f"{MULTIPROC_ENV}={_shared!r} is not a directory: create it (empty) before starting "
        "dhub's processes, or unset it (docs/observability.md, 'Several processes')."
    )

# No ``*_created`` series beside each counter and histogram: Prometheus does not use them, and
# they would double what every scrape carries.
disable_created_metrics()  # type: ignore[no-untyped-call]

# Seconds. A run spans from milliseconds (a workflow of expressions) to days (waiting for a
# person); a step is the engine's own work and its write; a model call, a sandbox call and a
# request sit in between.
_RUN_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600, 14400, 86400)
_STEP_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5)
_CALL_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)

RUNS_STARTED = Counter(
    "dhub_runs_started", "Runs that took their first step, by agent id.", ["agent"]
)
RUNS_FINISHED = Counter(
    "dhub_runs_finished",
    "Runs that ended, by agent id and status (succeeded, failed, cancelled).",
    ["agent", "status"],
)
RUN_SECONDS = Histogram(
    "dhub_run_duration_seconds",
    "Time from a run's creation to its end (queueing and waiting for people included).",
    ["agent"],
    buckets=_RUN_BUCKETS,
)
STEP_SECONDS = Histogram(
    "dhub_run_step_duration_seconds",
    "Time to save one step of a run (its write, through the group commit).",
    buckets=_STEP_BUCKETS,
)
MODEL_CALLS = Counter(
    "dhub_model_calls", "Model calls answered, by provider and model.", ["provider", "model"]
)
MODEL_TOKENS = Counter(
    "dhub_model_tokens",
    "Tokens of answered model calls, by provider, model and kind (input, output; reasoning "
    "and cached are parts of output and input).",
    ["provider", "model", "kind"],
)
MODEL_COST = Counter(
    "dhub_model_cost_usd",
    "What answered model calls cost, in US dollars, by provider and model (calls of models "
    "without a known price add nothing: see the runs' cost_note).",
    ["provider", "model"],
)
MODEL_ERRORS = Counter(
    "dhub_model_errors",
    "Model calls that failed, by provider, model and error kind.",
    ["provider", "model", "kind"],
)
MODEL_SECONDS = Histogram(
    "dhub_model_call_duration_seconds",
    "Time of a model call (answered or failed), streaming included.",
    ["provider", "model"],
    buckets=_CALL_BUCKETS,
)
RUNS_ACTIVE = Gauge(
    "dhub_runs_active",
    "Runs executing in this process now (admitted: at most DHUB_MAX_ACTIVE_RUNS).",
    multiprocess_mode="livesum",
)
RUNS_QUEUED = Gauge(
    "dhub_runs_admission_queued",
    "Runs of this process waiting their turn to execute (admission).",
    multiprocess_mode="livesum",
)
SANDBOX_IDLE = Gauge(
    "dhub_sandbox_pool_idle_workers",
    "Warm sandbox interpreters waiting for a call.",
    multiprocess_mode="livesum",
)
SANDBOX_BUSY = Gauge(
    "dhub_sandbox_pool_busy_workers",
    "Sandbox interpreters running a call.",
    multiprocess_mode="livesum",
)
SANDBOX_COLD = Counter(
    "dhub_sandbox_cold_starts",
    "Sandbox calls that found no warm interpreter and waited for one to start.",
)
SANDBOX_SECONDS = Histogram(
    "dhub_sandbox_call_duration_seconds",
    "Time of a sandbox call in its interpreter, by outcome (ok, or the failure's kind).",
    ["outcome"],
    buckets=_CALL_BUCKETS,
)
HTTP_REQUESTS = Counter(
    "dhub_http_requests",
    "HTTP requests answered, by method, route template and status.",
    ["method", "route", "status"],
)
HTTP_SECONDS = Histogram(
    "dhub_http_request_duration_seconds",
    "Time from a request's arrival to the end of its response, by method and route template.",
    ["method", "route"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
)

_on = False


def configure(mode: str) -> None:
    """Record from now on unless ``mode`` is ``off`` (the process's setting; the last
    configured wins: one server or worker per process)."""
    global _on
    _on = mode != "off"


def recording() -> bool:
    return _on


# -- hooks ------------------------------------------------------------------------------------


def step_saved(
    agent: str, seconds: float, *, first: bool, ended: str | None, created_at: int | None
) -> None:
    """A run's step was saved: its first (``first``), its last (``ended``: the status)."""
    if not _on:
        return
    STEP_SECONDS.observe(seconds)
    if first:
        RUNS_STARTED.labels(agent).inc()
    if ended is not None:
        run_finished(agent, ended, created_at)


def run_finished(agent: str, status: str, created_at: int | None) -> None:
    """``created_at``: the run's, in ms since the epoch."""
    if not _on:
        return
    RUNS_FINISHED.labels(agent, status).inc()
    if created_at is not None:
        RUN_SECONDS.labels(agent).observe(max(0.0, time.time() - created_at / 1000))


def model_answered(provider: str, model: str, usage: Mapping[str, Any], seconds: float) -> None:
    """``usage``: the call's as the engine keeps it (providers/types.py ``Usage.as_json``)."""
    if not _on:
        return
    MODEL_CALLS.labels(provider, model).inc()
    MODEL_SECONDS.labels(provider, model).observe(seconds)
    for kind in ("input", "output", "reasoning", "cached"):
        count = usage.get(f"{kind}_tokens") or 0
        if count:
            MODEL_TOKENS.labels(provider, model, kind).inc(count)


def runs_admission(active: int, queued: int) -> None:
    if _on:
        RUNS_ACTIVE.set(active)
        RUNS_QUEUED.set(queued)


def model_cost(provider: str, model: str, cost_usd: float) -> None:
    if _on and cost_usd > 0:
        MODEL_COST.labels(provider, model).inc(cost_usd)


def model_failed(provider: str, model: str, kind: str, seconds: float) -> None:
    if not _on:
        return
    MODEL_ERRORS.labels(provider, model, kind).inc()
    MODEL_SECONDS.labels(provider, model).observe(seconds)


# (method, route, status) -> its counter and histogram children: ``labels()`` validates and
# locks at each call, a measurable share of a fast request (bench/metrics.py). Bounded: the
# routes are templates and the methods a fixed set (api/metrics.py).
_http: dict[tuple[str, str, str], tuple[Any, Any]] = {}


def http_request(method: str, route: str, status: str, seconds: float) -> None:
    children = _http.get((method, route, status))
    if children is None:
        children = (HTTP_REQUESTS.labels(method, route, status), HTTP_SECONDS.labels(method, route))
        _http[(method, route, status)] = children
    children[0].inc()
    children[1].observe(seconds)


def sandbox_cold_start() -> None:
    if _on:
        SANDBOX_COLD.inc()


def sandbox_called(outcome: str, seconds: float) -> None:
    if _on:
        SANDBOX_SECONDS.labels(outcome).observe(seconds)


def sandbox_idle(change: int) -> None:
    """Idle workers came (+) or went (-). Counted whatever the setting, so the gauge stays
    true when a process's setting changes (tests start several servers)."""
    SANDBOX_IDLE.inc(change)


def sandbox_busy(change: int) -> None:
    SANDBOX_BUSY.inc(change)


# -- exposition -------------------------------------------------------------------------------


class Snapshot(Collector):
    """Gauges read from the database for one scrape: ``runs`` by unfinished status, and in
    distributed mode the queue's jobs by queue and state and its lag."""

    def __init__(
        self,
        runs: Mapping[str, int],
        jobs: Mapping[tuple[str, str], int] | None = None,
        lag: Mapping[str, float] | None = None,
    ) -> None:
        self.runs, self.jobs, self.lag = runs, jobs, lag

    def collect(self) -> Iterator[Metric]:
        runs = GaugeMetricFamily(
            "dhub_runs_unfinished",
            "Runs not ended, by status (queued, running, waiting: for people or a timer).",
            labels=["status"],
        )
        for status in ("queued", "running", "waiting"):
            runs.add_metric([status], self.runs.get(status, 0))
        yield runs
        if self.jobs is None or self.lag is None:
            return
        jobs = GaugeMetricFamily(
            "dhub_queue_jobs",
            "Run jobs of distributed mode, by queue and state (due: waiting for a worker; "
            "scheduled: a parked run's timer, not due yet; doing: taken by a worker).",
            labels=["queue", "state"],
        )
        for (queue, state), count in sorted(self.jobs.items()):
            jobs.add_metric([queue, state], count)
        yield jobs
        lag = GaugeMetricFamily(
            "dhub_queue_lag_seconds",
            "How long the oldest due job of each queue has waited for a worker (0: none).",
            labels=["queue"],
        )
        for queue, seconds in sorted(self.lag.items()):
            lag.add_metric([queue], seconds)
        yield lag


def exposition(snapshot: Snapshot | None) -> bytes:
    """The Prometheus text of this process (or, in multiprocess mode, of every process
    writing to ``PROMETHEUS_MULTIPROC_DIR``), then the snapshot's gauges."""
    if os.environ.get(MULTIPROC_ENV):
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
        text = generate_latest(registry)
    else:
        text = generate_latest(REGISTRY)
    if snapshot is not None:
        extra = CollectorRegistry(auto_describe=False)
        extra.register(snapshot)
        text += generate_latest(extra)
    return text


def process_ended(pid: int | None = None) -> None:
    """In multiprocess mode, drop the live gauges of a process that ended (a gunicorn-style
    supervisor calls this for its children; ``dhub worker`` for itself as it stops)."""
    if os.environ.get(MULTIPROC_ENV):
        multiprocess.mark_process_dead(pid or os.getpid())  # type: ignore[no-untyped-call]
