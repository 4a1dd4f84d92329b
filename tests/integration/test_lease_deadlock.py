"""Lease renewal and the group commit of steps lock runs' rows in the same order (issue 23):
on PostgreSQL, many runs stepping while their leases are renewed over and over never deadlock,
and every run finishes."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

import pytest

from dhub.domain.ids import now_ms
from dhub.engine.compile import CompiledGraph, compile_document
from dhub.runtime.durable import RunExecutor
from dhub.runtime.ports import NoModel, RealClock
from dhub.store import agents
from dhub.store import runs as store
from dhub.store.db import Database
from tests.integration.test_durable_runs import new_run
from tests.integration.test_runs_store import agent_row

pytestmark = [pytest.mark.asyncio, pytest.mark.postgres]

STEPS = 12
CHAIN = {
    "name": "chain", "description": "", "mode": "workflow", "input_mode": "event",
    "nodes": [
        {"id": "start", "type": "start", "config": {}},
        *({"id": f"t{i}", "type": "template",
           "config": {"template": f"step {i}", "output": f"v{i}"}} for i in range(STEPS)),
        {"id": "end", "type": "end", "config": {"outputs": [
            {"name": "last", "type": "string", "value": f"{{{{ v{STEPS - 1} }}}}"}]}},
    ],
    "edges": [
        {"source": "start", "target": "t0"},
        *({"source": f"t{i}", "target": f"t{i + 1}"} for i in range(STEPS - 1)),
        {"source": f"t{STEPS - 1}", "target": "end"},
    ],
}  # fmt: skip


async def chain(agent_id: str, version: int, user_id: str) -> CompiledGraph:
    return compile_document(CHAIN)


@pytest.fixture
async def db(database_url: str) -> AsyncIterator[Database]:
    database = Database(database_url)
    await database.migrate()
    async with database.write() as conn:
        await agents.insert_agent(conn, agent_row("agent.a"))
    try:
        yield database
    finally:
        await database.dispose()


@pytest.mark.parametrize(
    "database_url", [pytest.param("postgres", marks=pytest.mark.postgres)], indirect=True
)
async def test_runs_stepping_while_their_leases_are_renewed_never_deadlock(
    db: Database, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="dhub")
    owner = "worker.1"
    runs = RunExecutor(
        db, chain, lambda _: None, NoModel(), RealClock(), owner,  # type: ignore[arg-type,return-value]
        lease_seconds=0.6, timer_poll=3600,
    )  # fmt: skip
    problems: list[BaseException] = []
    renewed = 0
    stop = asyncio.Event()

    async def renew() -> None:  # beside the executor's own renewals: as often as it can
        nonlocal renewed
        while not stop.is_set():
            try:
                async with db.write() as conn:
                    await store.renew_all(conn, owner, now_ms(), 30)
                renewed += 1
            except Exception as exc:
                problems.append(exc)
            await asyncio.sleep(0)

    renewers = [asyncio.ensure_future(renew()) for _ in range(3)]
    try:
        for _ in range(4):  # rounds of runs stepping at once, for a few seconds in all
            made = [await new_run(db, {}) for _ in range(60)]
            for run in made:
                runs.start(run, {"run_id": run.id})
            results = await asyncio.gather(*(runs.wait(run.id) for run in made))
            assert [r.status if r else None for r in results] == ["succeeded"] * len(made)
    finally:
        stop.set()
        await asyncio.gather(*renewers)
        await runs.close()
    assert problems == [] and renewed > 0
    deadlocks = [r for r in caplog.records if "deadlock" in r.getMessage().lower()]
    assert deadlocks == []
