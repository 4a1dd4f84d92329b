"""What executes runs in a process, put together once: the database, the sandbox, the model
providers, compiled graphs, the durable executor and how runs reach it (DESIGN.md 7).

- Embedded (the default): the server's executor runs everything, and resumes what a stopped
  server left (``recover``).
- Distributed (``DHUB_EXECUTION=distributed``, PostgreSQL): runs are queued; a process with a
  worker (``dhub worker``, or ``dhub serve`` without ``--no-worker``) takes jobs; an API
  process listens for saved steps, so its event streams follow runs executing elsewhere.
"""

from __future__ import annotations

import asyncio
import io
import logging
import os
import socket
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Protocol

from dhub.domain.ids import new_id
from dhub.observability import traces
from dhub.providers.registry import Providers
from dhub.runtime.admission import Admission, default_limit
from dhub.runtime.dispatch import STEPS_CHANNEL, Dispatch, InProcess, Queued, announce_steps
from dhub.runtime.durable import RunExecutor
from dhub.runtime.model import ProviderModel
from dhub.runtime.notify import Handler, Listener
from dhub.runtime.ports import RealClock, SandboxFunctions
from dhub.runtime.queue import QUEUE, RunQueue
from dhub.runtime.worker import QueueWorker, handoff
from dhub.sandbox.runner import SandboxRunner, SandboxSettings
from dhub.services import secrets
from dhub.services.builtins import install_builtins
from dhub.services.graphs import Graphs
from dhub.services.knowledge import KnowledgeCalls
from dhub.services.mcp_client import McpClients
from dhub.services.secret_vault import SecretVault
from dhub.settings import Settings, secure_data_dir
from dhub.store import workers as worker_rows
from dhub.store.db import Database
from dhub.store.workers import WorkerRecord

log = logging.getLogger("dhub.sandbox")
stop_log = logging.getLogger("dhub.runtime")
demo_log = logging.getLogger("dhub.providers")


class _Hub(Protocol):
    def notify(self, run_id: str) -> None: ...


class _Chore(Protocol):
    """A loop of the process that lives as long as its runtime (the scheduler)."""

    def start(self) -> None: ...

    async def stop(self) -> None: ...


@dataclass
class WorkerOptions:
    concurrency: int = 100  # runs executing at once (I/O-bound: hundreds are fine)
    queues: tuple[str, ...] = (QUEUE,)
    grace: float = 30.0  # seconds a stopping worker lets calls under way finish


@dataclass
class Runtime:
    settings: Settings
    db: Database
    sandbox: SandboxRunner
    providers: Providers
    graphs: Graphs
    executor: RunExecutor
    dispatch: Dispatch
    vault: SecretVault  # secrets' values (services/secrets.py)
    queue: RunQueue | None = None
    worker: QueueWorker | None = None
    listener: Listener | None = None
    mcp: McpClients | None = None  # connections to MCP servers (services/mcp_client.py)
    scheduler: _Chore | None = None  # schedules' ticks (services/schedules.py), when set

    @property
    def executes_runs(self) -> bool:
        """Embedded, or a worker of distributed mode (not an API-only process)."""
        return self.queue is None or self.worker is not None

    async def begin(self, hub: _Hub | None = None) -> list[str]:
        """Start executing: resume (embedded) or take jobs (a distributed worker); with
        ``hub``, an API process's streams hear of steps saved by other processes. The runs
        resumed (embedded). Then the scheduler, if set, starts its loop."""
        resumed: list[str] = []
        if hub is not None and not self.db.is_sqlite:
            # Workers, or other embedded servers on this database, may execute the runs this
            # process's streams follow: their step commits NOTIFY (``announce_steps``).
            self.listener = Listener(self.db.url, {STEPS_CHANNEL: _steps(hub)})
            self.listener.start()
        if self.queue is None:
            resumed = await self.executor.recover()
        else:
            await self.queue.open()
            if self.worker is not None:
                await self.worker.start()
        if self.scheduler is not None:
            self.scheduler.start()
        return resumed

    async def close(self) -> None:
        """Stop everything, each part within ``STOP_SECONDS``: a part that does not stop in
        time is left behind, said in the log with what it was waiting on, so a stuck call
        never keeps the process from ending. The scheduler first: it starts runs."""
        if self.scheduler is not None:
            await _bounded("the scheduler", self.scheduler.stop())
        if self.worker is not None:
            await _bounded("the worker", self.worker.stop())  # it closes executor and queue
        else:
            await _bounded("the executor", self.executor.close())
        if self.listener is not None:
            await _bounded("the listener", self.listener.close())
        if self.queue is not None:
            await _bounded("the queue", self.queue.close())
        await _bounded("the model providers", self.providers.aclose())
        if self.mcp is not None:
            await _bounded("the MCP connections", self.mcp.close())
        await _bounded("the sandbox", self.sandbox.close())
        await _bounded("the database", self.db.dispose())


STOP_SECONDS = 30.0


async def _bounded(what: str, stopping: Awaitable[None]) -> None:
    task = asyncio.ensure_future(stopping)
    done, _ = await asyncio.wait([task], timeout=STOP_SECONDS)
    if done:
        task.result()
        return
    stop_log.error(
        "stopping %s took over %g s; left behind. Tasks still pending:\n%s",
        what, STOP_SECONDS, pending_tasks(),
    )  # fmt: skip


def pending_tasks() -> str:
    """Where every other task of the loop is waiting: what a stop that hangs waits on."""
    stacks = []
    for other in asyncio.all_tasks():
        if other is not asyncio.current_task():
            out = io.StringIO()
            other.print_stack(limit=12, file=out)
            stacks.append(out.getvalue())
    return "\n".join(stacks)


def stop_watch(seconds: float = STOP_SECONDS) -> asyncio.Task[None]:
    """Started as a whole stop begins, cancelled when it ends: when it takes over
    ``seconds``, says in the log what is pending (a part the stop waits on that never ends
    is otherwise silent)."""

    async def report() -> None:
        await asyncio.sleep(seconds)
        stop_log.error("stopping takes over %g s. Tasks pending:\n%s", seconds, pending_tasks())

    return asyncio.ensure_future(report())


def _steps(hub: _Hub) -> Handler:
    def steps(run_id: str | None) -> None:
        if run_id is not None:
            hub.notify(run_id)  # a dropped LISTEN is covered by the streams' own polling

    return steps


def _demo(providers: Providers, settings: Settings) -> None:
    """The demo model on (DHUB_DEMO_MODEL, or examples loaded), said in the log; off, the
    "not configured" error says how to turn it on."""
    if not settings.demo_model:
        providers.hint = (
            "To try agents without a provider, start the server with DHUB_DEMO_MODEL=on: "
            "a labelled demo model answers instead."
        )
        return
    providers.enable_demo()
    demo_log.warning(
        "the demo model answers for every model provider not configured (configured: %s); "
        "set DHUB_OPENAI_API_KEY (or see docs/providers.md) for real answers, "
        "DHUB_DEMO_MODEL=off to turn the demo model off",
        ", ".join(providers.names) or "none",
    )


async def open_runtime(settings: Settings, worker: WorkerOptions | None = None) -> Runtime:
    """The runtime of one process, its database migrated. ``worker``: this process takes
    jobs (distributed mode; ignored when embedded, where the server executes everything)."""
    secure_data_dir(settings.data_dir)
    vault = SecretVault.open(settings.data_dir, settings.secret_key)
    secrets.install(vault)  # for what reveals values without a vault at hand (MCP servers)
    db = Database(settings.database_url)
    traces.instrument_engines(db.engines)  # when tracing is on (docs/observability.md)
    await db.migrate()
    await install_builtins(db)  # the built-in agents of this dhub, installed or upgraded
    sandbox = SandboxRunner(SandboxSettings.from_env(settings.data_dir))
    if sandbox.settings.isolation == "unsafe":
        log.warning(
            "DHUB_SANDBOX=unsafe: user code (tools, actors, code nodes) runs WITHOUT isolation, "
            "with this server's access to the machine and its files. Only for a machine of "
            "your own; install bubblewrap (make install does) and unset DHUB_SANDBOX."
        )
    providers = Providers.from_config(settings.providers)
    _demo(providers, settings)
    mcp = McpClients(sandbox, allowed_hosts=settings.mcp_allowed_hosts)
    graphs = Graphs(db, providers.budget(settings.default_max_input_tokens), mcp)
    queue = RunQueue(settings.database_url) if settings.distributed else None
    role = "worker" if worker is not None and queue is not None else "server"
    executor = RunExecutor(
        db,
        graphs,
        lambda owner: SandboxFunctions(sandbox, owner),
        ProviderModel(providers),
        RealClock(),
        owner=f"{role}.{socket.gethostname()}.{os.getpid()}.{new_id('w')[-6:]}",
        lease_seconds=settings.run_lease_seconds,
        max_attempts=settings.run_max_attempts,
        handoff=handoff(db, queue) if queue is not None else None,
        knowledge=lambda user_id, run_id: KnowledgeCalls(db, user_id, run_id, mcp),
        after_write=None if db.is_sqlite else announce_steps,
        admission=Admission(settings.max_active_runs or default_limit()),
    )
    if queue is None:
        return Runtime(
            settings, db, sandbox, providers, graphs, executor, InProcess(executor), vault, mcp=mcp
        )
    runtime = Runtime(
        settings, db, sandbox, providers, graphs, executor, Queued(db, queue), vault, queue, mcp=mcp
    )
    if worker is not None:
        runtime.worker = QueueWorker(
            db, executor, queue, worker.concurrency, worker.queues, worker.grace
        )
    return runtime


async def worker_listing(db: Database) -> list[WorkerRecord]:
    """The workers that took jobs lately, oldest first (GET /api/v1/workers)."""
    async with db.read() as conn:
        return await worker_rows.listing(conn)
