"""dhub as an operator starts it, for the benchmarks (bench/scale.py): an API process and
its workers as real processes on a fresh PostgreSQL schema of their own (``dhub_bench_<random>``
in the ``test`` database, dropped at the end), with a random ``DHUB_ADMIN_TOKEN`` and a
temporary ``DHUB_DATA_DIR``; each worker optionally under a CPU quota (cpu_quota.py).
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg

from cpu_quota import CpuQuota, QuotaUnavailable
from proc_stats import Proc, drop_cgroup, own_cgroup

VENV_BIN = Path(sys.executable).parent
PG_ADMIN = os.environ.get("DHUB_BENCH_PG", "postgresql://postgres@127.0.0.1:5432/test")
QUOTA_PROBLEM: str | None = None  # why --worker-cpu could not be applied, once known


def schema_url(schema: str) -> str:
    sep = "&" if "?" in PG_ADMIN else "?"
    return f"{PG_ADMIN}{sep}options=-csearch_path%3D{schema}"


@contextlib.contextmanager
def fresh_schema() -> Iterator[str]:
    schema = f"dhub_bench_{secrets.token_hex(5)}"
    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    try:
        yield schema
    finally:
        with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def postgres_settings() -> dict[str, str]:
    with psycopg.connect(PG_ADMIN) as conn:
        names = ("server_version", "max_connections", "shared_buffers", "synchronous_commit")
        return {n: str(conn.execute(f"SHOW {n}").fetchone()[0]) for n in names}  # type: ignore[index]


def pg_commits(db: Any) -> int:
    """Transactions the database committed so far (0 for SQLite: it does not count them)."""
    if isinstance(db, SqliteReader):
        return 0
    row = db.execute(
        "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()"
    ).fetchone()
    return int(row[0]) if row else 0


class SqliteReader:
    """dhub's SQLite database read-only, with psycopg's ``%(name)s`` / ``%s`` placeholders,
    so the bench reads either database with the same statements."""

    def __init__(self, path: Path) -> None:
        self.conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, isolation_level=None)

    def execute(self, sql: str, params: Any = ()) -> sqlite3.Cursor:
        return self.conn.execute(re.sub(r"%\((\w+)\)s", r":\1", sql).replace("%s", "?"), params)

    def __enter__(self) -> SqliteReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.conn.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def stop(popen: subprocess.Popen[bytes]) -> None:
    if popen.poll() is None:
        popen.send_signal(signal.SIGINT)  # graceful, for uvicorn and for dhub worker
        try:
            popen.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(popen.pid, signal.SIGKILL)
            popen.wait(timeout=10)


class Cluster:
    """An API process and its workers on a fresh schema; everything stopped on exit."""

    def __init__(
        self,
        work: Path,
        name: str,
        workers: int,
        concurrency: int,
        sandbox: str,
        pool_idle: int = 0,
        extra_env: dict[str, str] | None = None,
        worker_cpu: float = 0.0,
        sqlite: bool = False,
    ) -> None:
        self.work, self.name, self.workers = work, name, workers
        # Each process that executes runs (a worker, or the embedded server) in a CPU cgroup
        # of this fraction of a CPU (cpu_quota.py); 0: none
        self.worker_cpu = worker_cpu
        self.sqlite = sqlite and not workers  # dhub's embedded default: SQLite in its data dir
        self.extra_env = extra_env or {}
        self.watch: dict[str, int] = {}  # other processes whose CPU counts (the model server)
        self.concurrency, self.sandbox, self.pool_idle = concurrency, sandbox, pool_idle
        self.token = "dhub_bench_" + secrets.token_urlsafe(24)
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.procs: list[Proc] = []
        self.schema = ""
        self.stack = contextlib.ExitStack()

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("DHUB_")}
        env.update(
            DHUB_DATA_DIR=str(self.data_dir),
            DHUB_ADMIN_TOKEN=self.token,
            DHUB_SANDBOX=self.sandbox,
        )
        if not self.sqlite:
            env["DHUB_DATABASE_URL"] = schema_url(self.schema)
        if self.pool_idle:  # idle interpreters kept per function (dhub's default: 2), in all
            env["DHUB_SANDBOX_WARM_PER_FUNCTION"] = str(self.pool_idle)
            env["DHUB_SANDBOX_WARM_TOTAL"] = str(64 * self.pool_idle)
        env.update(self.extra_env)
        if self.workers:
            env["DHUB_EXECUTION"] = "distributed"
        return env

    @property
    def data_dir(self) -> Path:
        return self.work / self.name / "data"

    def database(self) -> Any:
        """A connection to what dhub stores its runs in: PostgreSQL (autocommit), or its
        SQLite file read-only, taking psycopg's placeholders."""
        if self.sqlite:
            return SqliteReader(self.data_dir / "dhub.db")
        return psycopg.connect(schema_url(self.schema), autocommit=True)

    def __enter__(self) -> Cluster:
        self.stack.__enter__()
        try:
            if not self.sqlite:
                self.schema = self.stack.enter_context(fresh_schema())
            (self.work / self.name).mkdir(parents=True)
            dhub = [str(VENV_BIN / "dhub")]
            argv = [*dhub, "serve", "--host", "127.0.0.1", "--port", str(self.port)]
            if self.workers:
                argv.append("--no-worker")
            api = self.start("api" if self.workers else "embedded", argv)
            self.wait_ready(api)
            worker = [*dhub, "worker", "--concurrency", str(self.concurrency)]
            for i in range(self.workers):  # after the API, which migrated the schema
                self.start(f"worker{i + 1}", worker)
            if self.workers:
                self.wait_workers()
        except BaseException:
            self.stack.close()
            raise
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stack.__exit__(*exc)

    def start(self, role: str, argv: list[str]) -> Proc:
        log = self.work / self.name / f"{role}.log"
        out = self.stack.enter_context(log.open("wb"))
        popen = subprocess.Popen(
            argv, env=self.env(), stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
        group = own_cgroup(popen.pid, f"{self.name}-{role}")
        if group is not None:
            self.stack.callback(drop_cgroup, group)  # after the process stopped (LIFO)
        if self.worker_cpu and role != "api":  # a worker, or the embedded server
            self._quota(popen.pid, role)
        self.stack.callback(stop, popen)
        proc = Proc(role, popen, log, group)
        self.procs.append(proc)
        return proc

    def _quota(self, pid: int, role: str) -> None:
        """Hold the worker to ``worker_cpu`` of a CPU; where quotas cannot be set, say why
        (once) and let it run unconstrained."""
        global QUOTA_PROBLEM
        if QUOTA_PROBLEM is not None:
            return
        try:
            quota = self.stack.enter_context(CpuQuota(self.worker_cpu, f"{self.name}-{role}"))
            quota.add(pid)
        except (QuotaUnavailable, OSError) as exc:
            QUOTA_PROBLEM = str(exc)
            print(f"  --worker-cpu: {exc}; the workers run unconstrained", flush=True)

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    def wait_ready(self, api: Proc, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and api.popen.poll() is None:
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(f"{self.base}/healthz", timeout=2.0).status_code < 500:
                    return
            time.sleep(0.1)
        raise SystemExit(f"the API did not start; its log:\n{api.log.read_text()[-3000:]}")

    def wait_workers(self, timeout: float = 60.0) -> None:
        """Until every worker process has beaten its heart (GET /api/v1/workers)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            got = httpx.get(f"{self.base}/api/v1/workers", headers=self.headers(), timeout=5)
            if got.status_code == 200 and len(got.json()["data"]) >= self.workers:
                return
            for p in self.procs:
                if p.popen.poll() is not None:
                    raise SystemExit(f"{p.role} exited; its log:\n{p.log.read_text()[-3000:]}")
            time.sleep(0.2)
        raise SystemExit("the workers did not register")

    def problems(self) -> list[str]:
        """Log lines that say something went wrong (warnings, errors, tracebacks)."""
        words = ("ERROR", "CRITICAL", "Traceback", "WARNING", "Exception")
        return [
            f"{p.role}: {line}"
            for p in self.procs
            for line in p.log.read_text(errors="replace").splitlines()
            if any(w in line for w in words)
        ]
