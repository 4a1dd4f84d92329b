"""Workers' sweeps in distributed mode (issue 23): however many workers sweep for unclaimed
runs while others take their jobs, a run gets no job beyond the one it was created with. On
PostgreSQL: every job procrastinate's table receives is logged by a trigger of this test."""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from dhub.services.runtime import Runtime, WorkerOptions, open_runtime
from dhub.settings import Settings
from dhub.store.db import Database
from tests.conftest import PG_URL
from tests.integration.test_distributed import distributed, serve
from tests.integration.test_runs_api import create, ok

API = "/api/v1"
pytestmark = pytest.mark.postgres
__all__ = ["distributed"]  # the fixture

QUICK = {
    "name": "quick", "description": "", "mode": "workflow", "input_mode": "event",
    "nodes": [
        {"id": "start", "type": "start", "config": {}},
        {"id": "end", "type": "end", "config": {"outputs": [
            {"name": "x", "type": "string", "value": "done"}]}},
    ],
    "edges": [{"source": "start", "target": "end"}],
}  # fmt: skip


@pytest.fixture
def job_log(distributed: Settings, pg_schema: str) -> Iterator[str]:
    """A table that every job inserted into the queue leaves its run id in."""

    async def migrate() -> None:  # the queue's tables exist
        db = Database(distributed.database_url)
        await db.migrate()
        await db.dispose()

    asyncio.run(migrate())
    schema = f'"{pg_schema}"'
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f"CREATE TABLE {schema}.test_job_log (run_id text)")
        conn.execute(
            f"CREATE FUNCTION {schema}.test_log_job() RETURNS trigger LANGUAGE plpgsql AS $$ "
            f"BEGIN INSERT INTO {schema}.test_job_log VALUES (NEW.args->>'run_id'); "
            "RETURN NEW; END $$"
        )
        conn.execute(
            f"CREATE TRIGGER test_log_job AFTER INSERT ON {schema}.procrastinate_jobs "
            f"FOR EACH ROW EXECUTE FUNCTION {schema}.test_log_job()"
        )
    try:
        yield f"{schema}.test_job_log"
    finally:
        with psycopg.connect(PG_URL, autocommit=True) as conn:
            conn.execute(f"DROP TRIGGER test_log_job ON {schema}.procrastinate_jobs")
            conn.execute(f"DROP FUNCTION {schema}.test_log_job()")
            conn.execute(f"DROP TABLE {schema}.test_job_log")


def logged_jobs(table: str) -> collections.Counter[str]:
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        rows = conn.execute(f"SELECT run_id FROM {table}").fetchall()
    return collections.Counter(str(r[0]) for r in rows)


def statuses(schema: str) -> collections.Counter[str]:
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        rows = conn.execute(f'SELECT status FROM "{schema}".runs').fetchall()
    return collections.Counter(str(r[0]) for r in rows)


def test_two_workers_sweeping_while_taking_jobs_queue_no_run_twice(
    distributed: Settings, pg_schema: str, job_log: str
) -> None:
    """Runs wait in the queue; a first worker starts and takes jobs while a second starts
    and sweeps (its start-up sweep finds every run not yet claimed), then both sweep again
    every lease length while the runs finish: each run had one job, its creation's."""
    count = 150
    with serve(distributed, worker=False) as api:
        agent = create(api, QUICK)
        runs = [ok(api.post(f"{API}/agents/{agent}/runs", json={"inputs": {}}), 202)["id"]
                for _ in range(count)]  # fmt: skip
    assert logged_jobs(job_log) == dict.fromkeys(runs, 1)

    async def two_workers() -> None:
        started: list[Runtime] = []
        try:
            for _ in range(2):
                runtime = await open_runtime(distributed, WorkerOptions(concurrency=20))
                started.append(runtime)
                await runtime.begin()
                await asyncio.sleep(0.3)  # the first is taking jobs as the second sweeps
            for _ in range(400):
                if statuses(pg_schema).get("succeeded") == count:
                    break
                await asyncio.sleep(0.05)
            await asyncio.sleep(2 * distributed.run_lease_seconds)  # their periodic sweeps
        finally:
            for runtime in reversed(started):
                await runtime.close()

    asyncio.run(two_workers())
    assert statuses(pg_schema) == {"succeeded": count}
    jobs: dict[str, Any] = logged_jobs(job_log)
    extra = {run: n for run, n in jobs.items() if n > 1}
    assert extra == {}, f"{len(extra)} of {count} runs got more than one job"
