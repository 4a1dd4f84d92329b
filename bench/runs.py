"""Durable runs: what saving every step costs, how runs share the machine, what a waiting run
holds in memory. Peers in the same run: LangGraph with its SqliteSaver and PostgresSaver.

(a) per-step cost: a chain of N steps (code nodes whose function answers at once, so what is
    measured is the engine plus the checkpoint), dhub's RunExecutor on SQLite and PostgreSQL
    against a LangGraph chain of N nodes with a saver (one checkpoint per node);
(b) concurrency: R runs at once of a 10-step chain whose function waits 10 ms (ideal wall time:
    0.1 s), on SQLite and PostgreSQL;
(c) memory: traced Python memory per run waiting for a person (1,000 runs).

The function port is an honest fake (an asyncio sleep) so the sandbox's cost (bench/sandbox.py)
is not counted twice. Needs the bench group (make bench) and PostgreSQL at 127.0.0.1:5432.

    .venv/bin/python bench/runs.py
"""

from __future__ import annotations

import asyncio
import gc
import itertools
import json
import operator
import sqlite3
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Annotated, Any, TypedDict

import psycopg

from dhub.domain.ids import new_id, now_ms
from dhub.engine.compile import CompiledGraph, compile_document
from dhub.engine.state import CallFunction, Done
from dhub.runtime.durable import RunExecutor
from dhub.runtime.ports import NoModel, RealClock
from dhub.runtime.run_writer import start_state
from dhub.store import agents
from dhub.store import runs as store
from dhub.store.db import Database

RESULTS = Path(__file__).parent / "results"
PG_ADMIN = "postgresql://postgres@127.0.0.1:5432/test"
PG_BENCH = "postgresql://postgres@127.0.0.1:5432/dhub_bench"
SHAPES = ("chain", "fan", "loop")


class Wait:
    """The function port: answers after ``seconds`` (0: at once)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    async def call(self, request: CallFunction) -> Done:
        if self.seconds:
            await asyncio.sleep(self.seconds)
        return Done(request.command_id, True, {"v": 1})


def chain(steps: int, ask: bool = False) -> dict[str, Any]:
    nodes: list[dict[str, Any]] = [{"id": "start", "type": "start", "config": {}}]
    source = "def main():\n    return {'v': 1}\n"
    for i in range(steps):
        config = {"source": source, "outputs": {"v": "number"}}
        nodes.append({"id": f"n{i}", "type": "code", "config": config})
    if ask:
        nodes.append({"id": "ask", "type": "human_input", "config": {
            "prompt": "ok?", "input_fields": [{"name": "ok", "type": "boolean"}]}})  # fmt: skip
    nodes.append({"id": "end", "type": "end", "config": {}})
    ids = [n["id"] for n in nodes]
    edges = [{"source": a, "target": b} for a, b in itertools.pairwise(ids)]
    return {"name": "bench", "description": "", "mode": "workflow", "input_mode": "event",
            "nodes": nodes, "edges": edges}  # fmt: skip


async def database(url: str) -> Database:
    db = Database(url)
    await db.migrate()
    async with db.write() as conn:
        row = {
            "id": "agent.bench", "name": "bench", "folder_key": "", "description": "",
            "mode": "workflow", "input_mode": "event", "version": 1, "document": "{}",
            "is_builtin": False, "created_by": "user.admin", "created_at": 1, "updated_at": 1,
        }  # fmt: skip
        await agents.insert_agent(conn, row)
    return db


async def start_run(db: Database, runs: RunExecutor) -> str:
    """Create a run and start it, as the run service does (created holding the lease)."""
    at = now_ms()
    record = store.RunRecord(
        id=new_id("run"), agent_id="agent.bench", agent_version=1, user_id="user.admin",
        status="queued", waiting=None, inputs={}, outputs=None, error=None, usage={},
        conversation_id=None, idempotency_key=None, step_count=1, event_count=0,
        created_at=at, started_at=None, finished_at=None, updated_at=at,
        lease_owner=runs.owner, lease_expires_at=runs.lease_until(at),
    )  # fmt: skip
    async with db.write() as conn:
        await store.insert_run(conn, record, start_state({"run_id": record.id}))
    runs.start(record, {"run_id": record.id})
    return record.id


async def start_runs(
    db: Database, runs: RunExecutor, count: int, concurrently: bool = False
) -> list[str]:
    """``count`` runs started one after the other, or all at once (as many clients would)."""
    if concurrently:
        return list(await asyncio.gather(*(start_run(db, runs) for _ in range(count))))
    return [await start_run(db, runs) for _ in range(count)]


def executor(db: Database, graph: CompiledGraph, seconds: float) -> RunExecutor:
    async def graphs(agent_id: str, version: int, user_id: str) -> CompiledGraph:
        return graph

    port = Wait(seconds)
    return RunExecutor(db, graphs, lambda _: port, NoModel(), RealClock(), "bench", 60)


def _code(node_id: str) -> dict[str, Any]:
    config = {"source": "def main():\n    return {'v': 1}\n", "outputs": {"v": "number"}}
    return {"id": node_id, "type": "code", "config": config}


def shape(kind: str, n: int) -> dict[str, Any]:
    """The engine benchmark's shapes with code nodes (each call's result is a saved step):
    a chain of n, n branches from the start joined at the end, a loop of n iterations."""
    if kind == "chain":
        return chain(n)
    doc = chain(0)
    if kind == "fan":
        ids = [f"b{i}" for i in range(n)]
        doc["nodes"][1:1] = [_code(i) for i in ids]
        doc["edges"] = [{"source": "start", "target": i} for i in ids] + [
            {"source": i, "target": "end"} for i in ids
        ]
        return doc
    loop = {"id": "loop", "type": "loop", "config": {
        "mode": "count", "count": n, "max_iterations": n, "body_node_ids": ["body"]}}  # fmt: skip
    doc["nodes"][1:1] = [loop, _code("body")]
    doc["edges"] = [{"source": "start", "target": "loop"}, {"source": "loop", "target": "end"}]
    return doc


async def dhub_per_node(url: str, kind: str, n: int, runs_count: int) -> float:
    """Seconds per node of runs of ``shape(kind, n)``, one after the other, every step saved."""
    db = await database(url)
    runs = executor(db, compile_document(shape(kind, n)), 0)
    started = time.perf_counter()
    for _ in range(runs_count):
        result = await runs.wait(await start_run(db, runs))
        assert result is not None and result.status == "succeeded", result
    elapsed = time.perf_counter() - started
    await runs.close()
    await db.dispose()
    return elapsed / (runs_count * n)


class _State(TypedDict):
    v: Annotated[int, operator.add]


def _lg_app(kind: str, n: int, saver: Any) -> Any:
    from langgraph.graph import END, START, StateGraph

    graph = StateGraph(_State)
    if kind == "chain":
        names = [f"n{i}" for i in range(n)]
        for name in names:
            graph.add_node(name, lambda s: {"v": 1})
        for a, b in itertools.pairwise([START, *names, END]):
            graph.add_edge(a, b)
    elif kind == "fan":
        graph.add_node("join", lambda s: {"v": 0})
        for i in range(n):
            graph.add_node(f"b{i}", lambda s: {"v": 1})
            graph.add_edge(START, f"b{i}")
        graph.add_edge([f"b{i}" for i in range(n)], "join")
        graph.add_edge("join", END)
    else:
        graph.add_node("body", lambda s: {"v": 1})
        graph.add_edge(START, "body")
        graph.add_conditional_edges("body", lambda s: "body" if s["v"] < n else END)
    return graph.compile(checkpointer=saver)


def langgraph_per_node(saver: Any, kind: str, n: int, runs_count: int) -> float:
    """The peer: the same shape in LangGraph with ``saver`` (a checkpoint per superstep)."""
    app = _lg_app(kind, n, saver)
    started = time.perf_counter()
    for i in range(runs_count):
        config = {"configurable": {"thread_id": f"{kind}{i}"}, "recursion_limit": n + 10}
        assert app.invoke({"v": 0}, config)["v"] == n
    return (time.perf_counter() - started) / (runs_count * n)


async def concurrent(url: str, count: int) -> float:
    db = await database(url)
    runs = executor(db, compile_document(chain(10)), 0.01)
    gc.freeze()  # as the server does once started (api/app.py)
    started = time.perf_counter()
    ids = await start_runs(db, runs, count, concurrently=True)
    await asyncio.gather(*(runs.wait(run_id) for run_id in ids))
    elapsed = time.perf_counter() - started
    await runs.close()
    await db.dispose()
    return elapsed


async def in_memory_concurrent(count: int) -> float:
    """The floor under ``concurrent``: the same runs through the executor with nothing saved
    (what the engine, the executor and asyncio cost by themselves)."""
    from dhub.runtime.executor import run_workflow
    from dhub.runtime.run_writer import ServerPeople

    graph, port = compile_document(chain(10)), Wait(0.01)
    gc.freeze()
    started = time.perf_counter()
    await asyncio.gather(*(
        run_workflow(graph, {}, functions=port, model=NoModel(), clock=RealClock(),
                     human=ServerPeople())
        for _ in range(count)
    ))  # fmt: skip
    return time.perf_counter() - started


async def langgraph_concurrent(saver: Any, count: int) -> float:
    """The peer of ``concurrent``: R LangGraph runs at once of a 10-node chain whose nodes
    wait 10 ms (async nodes, ``ainvoke``), checkpointed by ``saver``."""
    from langgraph.graph import END, START, StateGraph

    async def wait(state: _State) -> dict[str, int]:
        await asyncio.sleep(0.01)
        return {"v": state["v"] + 1}

    graph = StateGraph(_State)
    names = [f"n{i}" for i in range(10)]
    for name in names:
        graph.add_node(name, wait)
    for a, b in zip([START, *names], [*names, END], strict=False):
        graph.add_edge(a, b)
    app = graph.compile(checkpointer=saver)
    gc.freeze()  # the same treatment as dhub's server
    started = time.perf_counter()
    await asyncio.gather(
        *(app.ainvoke({"v": 0}, {"configurable": {"thread_id": f"c{i}"}}) for i in range(count))
    )
    return time.perf_counter() - started


async def langgraph_sqlite_concurrent(path: str, count: int) -> float:
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    async with AsyncSqliteSaver.from_conn_string(path) as saver:
        return await langgraph_concurrent(saver, count)


async def until_waiting(db: Database, count: int) -> None:
    for _ in range(1200):
        async with db.read() as conn:
            found = len(await store.list_runs(conn, store.RunFilter(status="waiting"), None,
                                              None, count))  # fmt: skip
        if found >= count:
            await asyncio.sleep(0.1)  # their tasks end just after their last step is saved
            return
        await asyncio.sleep(0.05)
    raise RuntimeError("the runs never all waited")


async def langgraph_postgres_concurrent(count: int) -> float:
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

    async with AsyncPostgresSaver.from_conn_string(PG_BENCH) as saver:
        await saver.setup()
        return await langgraph_concurrent(saver, count)


async def waiting_memory(url: str, count: int) -> tuple[float, int]:
    """Traced Python memory held per run waiting for a person, and how many are in memory.
    A first batch of ``count`` runs warms up what grows with peak concurrency and does not
    shrink (the dict of live runs, asyncio's task set); the second batch is measured."""
    db = await database(url)
    runs = executor(db, compile_document(chain(1, ask=True)), 0)
    await start_runs(db, runs, count)
    await until_waiting(db, count)
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    await start_runs(db, runs, count)
    await until_waiting(db, 2 * count)
    gc.collect()
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    held = sum(s.size_diff for s in after.compare_to(before, "filename"))
    in_memory = runs.live_count
    await runs.close()
    await db.dispose()
    return held / count, in_memory


async def langgraph_waiting_memory(count: int) -> float:
    """The peer: LangGraph runs paused by ``interrupt`` with the in-memory saver."""
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.graph import END, START, StateGraph
    from langgraph.types import interrupt

    def ask(state: _State) -> dict[str, int]:
        return {"v": int(interrupt("ok?"))}

    graph = StateGraph(_State)
    graph.add_node("n0", lambda s: {"v": 1})
    graph.add_node("ask", ask)
    graph.add_edge(START, "n0")
    graph.add_edge("n0", "ask")
    graph.add_edge("ask", END)
    app = graph.compile(checkpointer=InMemorySaver())
    for i in range(10):
        await app.ainvoke({"v": 0}, {"configurable": {"thread_id": f"warm{i}"}})
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    for i in range(count):
        await app.ainvoke({"v": 0}, {"configurable": {"thread_id": f"w{i}"}})
    gc.collect()
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    return sum(s.size_diff for s in after.compare_to(before, "filename")) / count


def fresh_pg() -> None:
    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute("DROP DATABASE IF EXISTS dhub_bench")
        conn.execute("CREATE DATABASE dhub_bench")


def main() -> None:
    rows: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for kind in SHAPES:
            ms = asyncio.run(dhub_per_node(f"sqlite:///{tmp}/{kind}.db", kind, 20, 20)) * 1e3
            rows[f"dhub_sqlite_{kind}_ms_per_node"] = ms
        from langgraph.checkpoint.sqlite import SqliteSaver

        saver = SqliteSaver(sqlite3.connect(f"{tmp}/lg.db", check_same_thread=False))
        for kind in SHAPES:
            ms = langgraph_per_node(saver, kind, 20, 20) * 1e3
            rows[f"langgraph_sqlite_{kind}_ms_per_node"] = ms
        from langgraph.checkpoint.memory import InMemorySaver

        for count in (200, 1000):
            url = f"sqlite:///{tmp}/c{count}.db"
            rows[f"dhub_sqlite_{count}_concurrent_s"] = asyncio.run(concurrent(url, count))
            rows[f"dhub_unsaved_{count}_concurrent_s"] = asyncio.run(in_memory_concurrent(count))
            rows[f"langgraph_sqlite_{count}_concurrent_s"] = asyncio.run(
                langgraph_sqlite_concurrent(f"{tmp}/lgc{count}.db", count)
            )
            rows[f"langgraph_memory_{count}_concurrent_s"] = asyncio.run(
                langgraph_concurrent(InMemorySaver(), count)
            )
        memory, in_memory = asyncio.run(waiting_memory(f"sqlite:///{tmp}/m.db", 1000))
        rows["dhub_sqlite_bytes_per_waiting_run"] = memory
        rows["dhub_waiting_runs_in_memory"] = in_memory
        rows["langgraph_memory_bytes_per_paused_run"] = asyncio.run(langgraph_waiting_memory(1000))
    fresh_pg()
    for kind in SHAPES:
        fresh_pg()
        ms = asyncio.run(dhub_per_node(PG_BENCH, kind, 20, 20)) * 1e3
        rows[f"dhub_postgres_{kind}_ms_per_node"] = ms
    from langgraph.checkpoint.postgres import PostgresSaver

    with PostgresSaver.from_conn_string(PG_BENCH) as pg_saver:
        pg_saver.setup()
        for kind in SHAPES:
            ms = langgraph_per_node(pg_saver, kind, 20, 20) * 1e3
            rows[f"langgraph_postgres_{kind}_ms_per_node"] = ms
    for count in (200, 1000):
        fresh_pg()
        rows[f"dhub_postgres_{count}_concurrent_s"] = asyncio.run(concurrent(PG_BENCH, count))
    fresh_pg()
    rows["langgraph_postgres_200_concurrent_s"] = asyncio.run(langgraph_postgres_concurrent(200))
    for key, value in rows.items():
        print(f"{key:40} {value:12.3f}")
    print("ideal wall time of a 10-step chain of 10 ms steps: 0.100 s")
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"runs-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}.json"
    out.write_text(json.dumps(rows, indent=2))
    print(f"results: {out}")


if __name__ == "__main__":
    main()
