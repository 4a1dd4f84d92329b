"""Durable runs on SQLite and PostgreSQL: each step saved before its commands run, a run that
waits for a person answered through the executor, and a run resumed by another executor after
the first one stopped (its lease lapsed), with nothing saved run twice."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator
from typing import Any

import pytest

from dhub.domain.ids import new_id, now_ms
from dhub.engine.compile import CompiledGraph, compile_document
from dhub.engine.state import CallFunction, Done
from dhub.runtime.durable import RunExecutor
from dhub.runtime.ports import Answer, NoModel, RealClock, SandboxFunctions
from dhub.sandbox.runner import SandboxRunner
from dhub.store import agents
from dhub.store import runs as store
from dhub.store.db import Database
from tests.conftest import FIXTURES, load_json, sandbox_settings
from tests.integration.test_runs_store import agent_row

pytestmark = pytest.mark.asyncio

TRIAGE = load_json(FIXTURES / "valid" / "workflow_triage.json")
URGENT = {"ticket": "Total outage since 9am", "customer": "acme"}


class Counting:
    """The sandbox's function port, counting calls per node across executors."""

    def __init__(self, inner: SandboxFunctions) -> None:
        self.inner = inner
        self.calls: dict[str, int] = {}

    async def call(self, request: CallFunction) -> Done:
        self.calls[request.node_id] = self.calls.get(request.node_id, 0) + 1
        return await self.inner.call(request)


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


@pytest.fixture
async def functions() -> AsyncIterator[Counting]:
    port = SandboxFunctions(SandboxRunner(sandbox_settings()))
    yield Counting(port)
    await port.close()


async def graphs(agent_id: str, version: int) -> CompiledGraph:
    return compile_document(TRIAGE)


def executor(db: Database, functions: Counting, owner: str, lease: float = 30) -> RunExecutor:
    return RunExecutor(db, graphs, lambda _: functions, NoModel(), RealClock(), owner, lease)


async def new_run(db: Database, inputs: dict[str, Any]) -> store.RunRecord:
    at = now_ms()
    record = store.RunRecord(
        id=new_id("run"), agent_id="agent.a", agent_version=1, user_id="user.u",
        status="queued", waiting=None, inputs=inputs, outputs=None, error=None, usage={},
        conversation_id=None, idempotency_key=None, step_count=0, event_count=0,
        created_at=at, started_at=None, finished_at=None, updated_at=at, lease_owner=None,
        lease_expires_at=None,
    )  # fmt: skip
    async with db.write() as conn:
        await store.insert_run(conn, record, {})
    return dataclasses.replace(record, step_count=1)


async def until(db: Database, run_id: str, status: str) -> store.RunRecord:
    for _ in range(400):
        async with db.read() as conn:
            run = await store.get_run(conn, run_id)
        if run is not None and run.status == status:
            return run
        await asyncio.sleep(0.025)
    raise AssertionError(f"run {run_id} never reached {status}: {run}")


async def test_a_routine_ticket_runs_to_the_end(db: Database, functions: Counting) -> None:
    runs = executor(db, functions, "worker.1")
    run = await new_run(db, {"ticket": "Checkout page shows an error"})
    runs.start(run, {"run_id": run.id})
    result = await runs.wait(run.id)
    assert result is not None and result.outputs == {
        "category": "bug",
        "summary": "bug from anonymous",
    }
    done = await until(db, run.id, "succeeded")
    assert done.outputs == result.outputs and done.finished_at is not None
    assert done.lease_owner is None  # released
    async with db.read(snapshot=True) as conn:
        events = await store.events_after(conn, run.id, 0, 1000)
        saved = await store.load_state(conn, run.id)
    types = [e.type for e in events]
    assert types[0] == "run.started" and types[-1] == "run.succeeded"
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert saved == result.state.to_dict()
    await runs.close()


async def test_a_waiting_run_is_answered_through_the_executor(
    db: Database, functions: Counting
) -> None:
    runs = executor(db, functions, "worker.1")
    run = await new_run(db, URGENT)
    runs.start(run, {"run_id": run.id})
    waiting = await until(db, run.id, "waiting")
    assert waiting.waiting is not None and waiting.waiting["for"] == "input"
    async with db.read() as conn:
        [task] = await store.open_tasks(conn, ["user.u"])
    assert task.node_id == "approve"
    assert runs.answer(run.id, task.command_id, Answer({"escalate": True}, "user.u"))
    result = await runs.wait(run.id)
    assert result is not None
    assert result.outputs == {"category": "bug", "summary": "URGENT bug from acme; escalate=True"}
    async with db.read() as conn:
        assert await store.open_tasks(conn, ["user.u"]) == []
    await runs.close()


async def test_another_executor_resumes_a_run_whose_worker_stopped(
    db: Database, functions: Counting
) -> None:
    first = executor(db, functions, "worker.1", lease=0.5)
    run = await new_run(db, URGENT)
    first.start(run, {"run_id": run.id})
    await until(db, run.id, "waiting")
    await first.close()  # the worker goes away without deciding anything about the run
    stopped = await until(db, run.id, "waiting")
    assert stopped.lease_owner is None
    second = executor(db, functions, "worker.2")
    assert await second.recover() == [run.id]
    await asyncio.sleep(0.2)  # let it re-open the task
    async with db.read() as conn:
        [task] = await store.open_tasks(conn, ["user.u"])
    assert second.answer(run.id, task.command_id, Answer({"escalate": False}, "user.u"))
    result = await second.wait(run.id)
    assert result is not None
    assert result.outputs == {"category": "bug", "summary": "URGENT bug from acme; escalate=False"}
    assert functions.calls == {"classify": 1}  # saved before the stop: never run again
    async with db.read(snapshot=True) as conn:
        events = await store.events_after(conn, run.id, 0, 1000)
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    started = [e.node_id for e in events if e.type == "node.started"]
    assert len(started) == len(set(started))  # no node started twice
    await second.close()


async def test_cancelling_a_live_run_saves_it_cancelled(db: Database, functions: Counting) -> None:
    runs = executor(db, functions, "worker.1")
    run = await new_run(db, URGENT)
    runs.start(run, {"run_id": run.id})
    await until(db, run.id, "waiting")
    assert await runs.cancel(run.id)
    cancelled = await until(db, run.id, "cancelled")
    assert cancelled.finished_at is not None
    async with db.read() as conn:
        assert await store.open_tasks(conn, ["user.u"]) == []
    await runs.close()
