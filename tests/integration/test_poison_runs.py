"""Runs that cannot go on (issue 23): a run whose executions keep failing before they save a
step (its graph does not load, its step cannot be written, its process dies each time) fails
after ``max_attempts`` of them in a row, with an error saying why and how often, instead of
being taken up again at every recovery; a run that saves a step between interruptions is
never failed for them. On SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence

import pytest

from dhub.engine.compile import CompiledGraph, compile_document
from dhub.engine.state import CallFunction, Done
from dhub.runtime.durable import GraphLoader, Handoff, RunExecutor
from dhub.runtime.ports import Answer, NoModel, RealClock, SandboxFunctions
from dhub.sandbox.runner import SandboxRunner
from dhub.store import agents
from dhub.store import runs as store
from dhub.store.db import Conn, Database
from dhub.store.step_batch import StepWrite
from tests.conftest import sandbox_settings
from tests.integration.test_durable_runs import URGENT, graphs, new_run, until
from tests.integration.test_runs_store import agent_row

pytestmark = pytest.mark.asyncio


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


class OneByOne:
    """The sandbox's function port, letting one call through per ``allow()``."""

    def __init__(self, inner: SandboxFunctions) -> None:
        self.inner = inner
        self.called: list[str] = []  # node ids, in call order (a call made again counts again)
        self._permits = asyncio.Semaphore(0)

    def allow(self) -> None:
        self._permits.release()

    async def call(self, request: CallFunction) -> Done:
        self.called.append(request.node_id)
        await self._permits.acquire()
        return await self.inner.call(request)

    async def calling(self, node_id: str, times: int = 1) -> None:
        for _ in range(800):
            if self.called.count(node_id) >= times:
                return
            await asyncio.sleep(0.01)
        raise AssertionError(f"{node_id} was never called: {self.called}")


@pytest.fixture
async def functions() -> AsyncIterator[OneByOne]:
    port = SandboxFunctions(SandboxRunner(sandbox_settings()))
    yield OneByOne(port)
    await port.close()


class GraphGone(Exception):
    """What a graph loader raises for an agent version whose document no longer compiles."""


async def no_graph(agent_id: str, version: int, user_id: str) -> CompiledGraph:
    raise GraphGone(f"{agent_id} v{version} no longer compiles: unknown node type 'llm2'")


def executor(
    db: Database,
    functions: OneByOne,
    owner: str,
    loader: GraphLoader = graphs,
    max_attempts: int = 5,
) -> RunExecutor:
    return RunExecutor(
        db, loader, lambda _: functions, NoModel(), RealClock(), owner, timer_poll=3600,
        max_attempts=max_attempts,
    )  # fmt: skip


async def test_a_run_whose_graph_never_loads_fails_after_its_attempts(
    db: Database, functions: OneByOne
) -> None:
    run = await new_run(db, URGENT)
    runs = RunExecutor(
        db, no_graph, lambda _: functions, NoModel(), RealClock(), "worker.1", max_attempts=3,
        timer_poll=3600,
    )  # fmt: skip
    for attempt in range(1, 4):  # each recovery takes it up again, and fails to load it
        assert await runs.recover() == [run.id], attempt
        with pytest.raises(GraphGone):
            await runs.wait(run.id)
        stuck = await until(db, run.id, "queued")  # it never got to its first step
        assert stuck.lease_owner is None  # let go at once: not held until its lease lapses
    assert await runs.recover() == [run.id]  # the fourth: at the bound, it is failed instead
    await runs.wait(run.id)
    failed = await until(db, run.id, "failed")
    assert failed.error is not None and failed.error["kind"] == "unrecoverable"
    assert failed.error["message"] == (
        "the run could not be resumed: GraphGone: agent.a v1 no longer compiles: unknown node "
        "type 'llm2' (3 attempts)"
    )
    assert failed.finished_at is not None and failed.lease_owner is None
    async with db.read(snapshot=True) as conn:
        events = await store.events_after(conn, run.id, 0, 100)
        saved = await store.load_state(conn, run.id)
    assert events[-1].type == "run.failed" and events[-1].data["error"] == failed.error
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert saved["status"] == "failed" and saved["error"] == failed.error
    assert await runs.recover() == []  # never taken up again
    await runs.close()


async def test_a_resumed_run_whose_graph_stopped_loading_fails_with_its_tasks_closed(
    db: Database, functions: OneByOne
) -> None:
    """A run parked on a person's task, whose agent version then stopped compiling: each
    answer's wake fails to load it, then it fails, its task closed (no longer anyone's)."""
    first = executor(db, functions, "worker.1")
    run = await new_run(db, URGENT)
    functions.allow()
    first.start(run, {"run_id": run.id})
    await until(db, run.id, "waiting")
    await first.close()
    async with db.read() as conn:
        [task] = await store.open_tasks(conn, ["user.u"])
    broken = executor(db, functions, "worker.2", loader=no_graph, max_attempts=2)
    assert await broken.answer(run.id, task.command_id, Answer({"escalate": True}, "user.u"))
    with pytest.raises(GraphGone):  # the answer's wake: attempt 1
        await broken.wait(run.id)
    await broken.mail(run.id)  # as the inbox sweep would: attempt 2
    with pytest.raises(GraphGone):
        await broken.wait(run.id)
    await broken.mail(run.id)  # the third wake: failed instead
    await broken.wait(run.id)
    failed = await until(db, run.id, "failed")
    assert failed.error is not None and "(2 attempts)" in failed.error["message"]
    async with db.read() as conn:
        assert await store.open_tasks(conn, ["user.u"]) == []
        assert await store.pending_commands(conn, run.id) == []
    await broken.close()


CHAIN = {
    "name": "chain", "description": "", "mode": "workflow", "input_mode": "event",
    "nodes": [
        {"id": "start", "type": "start", "config": {}},
        *({"id": f"n{i}", "type": "code", "config": {
            "language": "python", "source": f"def main() -> dict:\n    return {{'x{i}': {i}}}\n",
            "input_mappings": {}, "outputs": {f"x{i}": {"type": "number"}}, "timeout": 10,
            "dependencies": []}} for i in range(1, 7)),
        {"id": "end", "type": "end", "config": {"outputs": [
            {"name": "last", "type": "number", "value": "{{ x6 }}"}]}},
    ],
    "edges": [
        {"source": "start", "target": "n1"},
        *({"source": f"n{i}", "target": f"n{i + 1}"} for i in range(1, 6)),
        {"source": "n6", "target": "end"},
    ],
}  # fmt: skip


async def chain(agent_id: str, version: int, user_id: str) -> CompiledGraph:
    return compile_document(CHAIN)


async def test_a_run_interrupted_more_often_than_its_attempts_but_stepping_is_never_failed(
    db: Database, functions: OneByOne
) -> None:
    """Each execution saves a step, then its worker stops: five interruptions with a bound of
    two, and the run finishes (each saved step starts its count again)."""
    run = await new_run(db, {})
    for i in range(1, 6):  # executions 1..5 each finish node n<i>, then stop during n<i+1>
        runs = executor(db, functions, f"worker.{i}", loader=chain, max_attempts=2)
        assert await runs.recover() == [run.id]
        await functions.calling(f"n{i}")
        functions.allow()
        await functions.calling(f"n{i + 1}")  # n<i>'s step is saved before n<i+1> is called
        await runs.close()
        assert (await until(db, run.id, "running")).lease_owner is None
    last = executor(db, functions, "worker.6", loader=chain, max_attempts=2)
    assert await last.recover() == [run.id]
    functions.allow()
    result = await last.wait(run.id)
    assert result is not None and result.status == "succeeded", result
    assert functions.called == ["n1", "n2", "n2", "n3", "n3", "n4", "n4", "n5", "n5", "n6", "n6"]
    await last.close()


async def test_a_run_whose_worker_stops_before_each_step_fails_after_its_attempts(
    db: Database, functions: OneByOne
) -> None:
    """The same interruptions with no step saved between them (the process dies in the same
    call each time): the run fails at the bound, saying its executions never saved a step."""
    run = await new_run(db, {})
    for i in range(1, 4):  # the first execution saves the run's first step; then none does
        runs = executor(db, functions, f"worker.{i}", loader=chain, max_attempts=2)
        assert await runs.recover() == [run.id]
        await functions.calling("n1", times=i)
        await runs.close()
    runs = executor(db, functions, "worker.4", loader=chain, max_attempts=2)
    assert await runs.recover() == [run.id]
    await runs.wait(run.id)
    failed = await until(db, run.id, "failed")
    assert failed.error == {
        "kind": "unrecoverable",
        "message": "the run could not be resumed: its executions stopped before saving a step "
        "(2 attempts)",
        "attempts": 2,
    }
    await runs.close()


async def test_a_run_whose_step_cannot_be_written_fails_after_its_attempts(
    db: Database, functions: OneByOne
) -> None:
    """Distributed mode's shape: each job executes the run here; the write of its second step
    fails every time (the commit's after-write hook refuses it, as a database refuses a value),
    so each job redoes the call and fails; the job after the bound fails the run."""
    run = await new_run(db, {})

    async def after_write(conn: Conn, writes: Sequence[StepWrite]) -> None:
        if any(w.rows.run_id == run.id and w.rows.step >= 2 and not w.ended for w in writes):
            raise ValueError("value too long for type character varying(64)")

    async def requeue(run_ids: list[str]) -> None:
        return None

    runs = RunExecutor(
        db, chain, lambda _: functions, NoModel(), RealClock(), "worker.1", timer_poll=3600,
        handoff=Handoff(after_write, requeue), max_attempts=2,
    )  # fmt: skip
    for _ in range(10):
        functions.allow()
    for job in range(1, 4):  # the first saves step 1 (n1 opened), then n1's step fails
        await runs.run_here(run.id)
        assert functions.called == ["n1"] * job
        stuck = await until(db, run.id, "running")
        assert stuck.step_count == 2 and stuck.lease_owner is None
    await runs.run_here(run.id)  # the third job in a row without a step: failed instead
    failed = await until(db, run.id, "failed")
    assert failed.error is not None and failed.error["message"] == (
        "the run could not be resumed: ValueError: value too long for type character "
        "varying(64) (2 attempts)"
    )
    assert functions.called == ["n1"] * 3
    await runs.close()
