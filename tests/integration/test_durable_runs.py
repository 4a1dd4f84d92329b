"""Durable runs on SQLite and PostgreSQL: each step saved before its commands run, a run that
waits for a person answered through the executor, and a run resumed by another executor after
the first one stopped (its lease lapsed), with nothing saved run twice."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator
from typing import Any

import pytest
from sqlalchemy import text

from dhub.domain.ids import new_id, now_ms
from dhub.engine.compile import CompiledGraph, compile_document
from dhub.engine.state import CallFunction, Done
from dhub.runtime.durable import RunExecutor
from dhub.runtime.ports import Answer, NoModel, RealClock, SandboxFunctions
from dhub.runtime.run_writer import start_state
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
        self.gate = asyncio.Event()  # calls wait until it is open
        self.gate.set()

    async def call(self, request: CallFunction) -> Done:
        self.calls[request.node_id] = self.calls.get(request.node_id, 0) + 1
        await self.gate.wait()
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


async def graphs(agent_id: str, version: int, user_id: str) -> CompiledGraph:
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
        await store.insert_run(conn, record, start_state({"run_id": record.id}))
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
    assert await runs.answer(run.id, task.command_id, Answer({"escalate": True}, "user.u"))
    result = await runs.wait(run.id)
    assert result is not None
    assert result.outputs == {"category": "bug", "summary": "URGENT bug from acme; escalate=True"}
    async with db.read() as conn:
        assert await store.open_tasks(conn, ["user.u"]) == []
    await runs.close()


async def test_a_parked_run_is_woken_by_an_answer_to_another_executor(
    db: Database, functions: Counting
) -> None:
    first = executor(db, functions, "worker.1", lease=0.5)
    run = await new_run(db, URGENT)
    first.start(run, {"run_id": run.id})
    parked = await until(db, run.id, "waiting")
    assert parked.lease_owner is None  # waiting for a person: no worker holds it
    assert await first.wait(run.id) is None  # and it left the first worker's memory
    await first.close()
    second = executor(db, functions, "worker.2")
    assert await second.recover() == []  # parked is not lapsed: nothing to resume
    async with db.read() as conn:
        [task] = await store.open_tasks(conn, ["user.u"])
    assert await second.answer(run.id, task.command_id, Answer({"escalate": False}, "user.u"))
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


async def calling(functions: Counting, node_id: str) -> None:
    for _ in range(400):
        if functions.calls.get(node_id):
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"{node_id} was never called")


async def test_cancelling_a_live_run_saves_it_cancelled(db: Database, functions: Counting) -> None:
    runs = executor(db, functions, "worker.1")
    run = await new_run(db, URGENT)
    functions.gate.clear()
    runs.start(run, {"run_id": run.id})
    await calling(functions, "classify")
    assert await runs.cancel(run.id)
    cancelled = await until(db, run.id, "cancelled")
    assert cancelled.finished_at is not None and cancelled.lease_owner is None
    async with db.read(snapshot=True) as conn:
        events = await store.events_after(conn, run.id, 0, 1000)
        assert await store.pending_commands(conn, run.id) == []
    assert events[-1].type == "run.cancelled"
    await runs.close()


async def test_a_run_whose_worker_stopped_mid_call_is_resumed_by_another(
    db: Database, functions: Counting
) -> None:
    first = executor(db, functions, "worker.1", lease=0.5)
    run = await new_run(db, URGENT)
    functions.gate.clear()
    first.start(run, {"run_id": run.id})
    await calling(functions, "classify")
    await first.close()  # the worker goes away while the call is in flight
    stopped = await until(db, run.id, "running")
    assert stopped.lease_owner is None
    second = executor(db, functions, "worker.2")
    functions.gate.set()
    assert await second.recover() == [run.id]
    await until(db, run.id, "waiting")  # the call ran again (its result was never saved)
    assert functions.calls == {"classify": 2}
    async with db.read() as conn:
        [task] = await store.open_tasks(conn, ["user.u"])
    assert await second.answer(run.id, task.command_id, Answer({"escalate": True}, "user.u"))
    result = await second.wait(run.id)
    assert result is not None and result.status == "succeeded"
    assert functions.calls == {"classify": 2}
    await second.close()


async def test_an_answer_for_nothing_leaves_a_parked_run_parked(
    db: Database, functions: Counting
) -> None:
    runs = executor(db, functions, "worker.1")
    run = await new_run(db, URGENT)
    runs.start(run, {"run_id": run.id})
    await until(db, run.id, "waiting")
    assert not await runs.answer(run.id, "no-such-task", Answer({"escalate": True}, "user.u"))
    assert await runs.wait(run.id) is None  # evicted again
    parked = await until(db, run.id, "waiting")
    assert parked.lease_owner is None
    await runs.close()


ASK = {
    "name": "ask", "description": "", "mode": "workflow", "input_mode": "event",
    "nodes": [
        {"id": "start", "type": "start", "config": {}},
        {"id": "ask", "type": "human_input", "config": {
            "prompt": "Ship it?", "timeout": 1, "on_timeout": "default",
            "input_fields": [{"name": "ship", "type": "boolean", "required": True,
                              "default": False}]}},
        {"id": "end", "type": "end", "config": {"outputs": [
            {"name": "ship", "type": "boolean", "value": "{{ ship }}"}]}},
    ],
    "edges": [{"source": "start", "target": "ask"}, {"source": "ask", "target": "end"}],
}  # fmt: skip


async def test_a_parked_run_is_woken_by_its_timer(db: Database, functions: Counting) -> None:
    async def ask_graph(agent_id: str, version: int, user_id: str) -> CompiledGraph:
        return compile_document(ASK)

    runs = RunExecutor(
        db, ask_graph, lambda _: functions, NoModel(), RealClock(), "worker.1",
        park_after=0.2, timer_poll=0.05,
    )  # fmt: skip
    run = await new_run(db, {})
    runs.start(run, {"run_id": run.id})
    parked = await until(db, run.id, "waiting")
    await asyncio.sleep(0.1)
    assert parked.lease_owner is None and runs.live_count == 0  # nothing held while it waits
    done = await until(db, run.id, "succeeded")  # the timeout, 1 s later, woke it
    assert done.outputs == {"ship": False}
    await runs.close()


async def test_a_run_whose_worker_died_is_taken_over_while_the_server_runs(
    db: Database, functions: Counting
) -> None:
    """Another server died holding a run: its lease lapses, and a running server takes the
    run over within a lease length (no restart needed)."""
    run = await new_run(db, URGENT)
    async with db.write() as conn:  # held by a worker that is gone, for 0.3 s more
        assert await store.claim(conn, run.id, "worker.dead", now_ms(), 0.3)
    runs = RunExecutor(
        db, graphs, lambda _: functions, NoModel(), RealClock(), "worker.2", lease_seconds=0.5,
        timer_poll=0.05,
    )  # fmt: skip
    assert await runs.recover() == []  # still held: not taken yet
    waiting = await until(db, run.id, "waiting")  # taken over once the lease lapsed
    assert waiting.waiting is not None and waiting.waiting["for"] == "input"
    assert functions.calls == {"classify": 1}
    await runs.close()


@pytest.mark.parametrize(
    "database_url", [pytest.param("postgres", marks=pytest.mark.postgres)], indirect=True
)
async def test_a_dropped_database_connection_loses_no_step(
    db: Database, functions: Counting
) -> None:
    """Steps are written without a ping first (PostgreSQL): a connection the database dropped
    fails that write, which is retried on a fresh one; the run finishes as if nothing
    happened. PostgreSQL only: SQLite has no connection to drop."""
    async with db.write(pinged=False) as conn:  # the connection the next step will use
        pid = (await conn.execute(text("SELECT pg_backend_pid()"))).scalar()
    async with db.write() as conn:
        await conn.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
    runs = executor(db, functions, "worker.1")
    run = await new_run(db, {"ticket": "Checkout page shows an error"})
    runs.start(run, {"run_id": run.id})
    result = await runs.wait(run.id)
    assert result is not None and result.status == "succeeded"
    async with db.read(snapshot=True) as conn:
        events = await store.events_after(conn, run.id, 0, 1000)
        saved = await store.load_state(conn, run.id)
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert saved == result.state.to_dict()
    await runs.close()
