"""The ``dhub worker`` process: a distributed-mode runtime that only takes run jobs."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal

from dhub.observability import metrics, traces
from dhub.runtime.queue import QUEUE
from dhub.services.runtime import WorkerOptions, open_runtime
from dhub.services.schedules import scheduler_for
from dhub.settings import Settings

log = logging.getLogger("dhub.worker")


async def run_worker(
    settings: Settings, concurrency: int, queues: tuple[str, ...], grace: float = 30.0
) -> None:
    """Work until SIGTERM or SIGINT, then stop gracefully (runs handed back to the queue)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    metrics.configure(settings.metrics)  # shared with an API process: PROMETHEUS_MULTIPROC_DIR
    traces.start()  # OTEL_* variables (docs/observability.md)
    runtime = await open_runtime(settings, WorkerOptions(concurrency, queues or (QUEUE,), grace))
    runtime.scheduler = scheduler_for(runtime)  # schedules' ticks (docs/triggers.md)
    try:
        await runtime.begin()
        log.info(
            "worker %s taking jobs from %s (concurrency %d)",
            runtime.executor.owner, ", ".join(queues or (QUEUE,)), concurrency,
        )  # fmt: skip
        await stop.wait()
        log.info("stopping: the runs here go back to the queue")
    finally:
        await runtime.close()
        metrics.process_ended()
        traces.stop()
