"""The run store (DESIGN.md 4) on every backend: steps, events, commands, tasks, timers, leases,
listing, and the migration that creates it."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator, Mapping
from typing import Any

import psycopg
import pytest
from alembic import command
from sqlalchemy import Text, cast, func, select, text
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from dhub.engine import checkpoints, journal
from dhub.engine.compile import compile_document
from dhub.engine.state import CallFunction, Cancel, InputGiven, Step
from dhub.engine.stepper import Stepper
from dhub.store import agents
from dhub.store import runs as store
from dhub.store.db import Database
from dhub.store.migrate import alembic_config
from dhub.store.tables import run_steps
from tests.conftest import FIXTURES, PG_URL, load_json, pg_url
from tests.support.driver import call_in_process

RUN_TABLES = ("runs", "run_steps", "run_events", "run_commands", "run_task_assignees")


@pytest.fixture
async def db(database_url: str) -> AsyncIterator[Database]:
    database = Database(database_url)
    await database.migrate()
    try:
        async with database.write() as conn:
            for agent_id in ("agent.a", "agent.b"):
                await agents.insert_agent(conn, agent_row(agent_id))
        yield database
    finally:
        await database.dispose()


def agent_row(agent_id: str) -> dict[str, object]:
    return {
        "id": agent_id, "name": agent_id, "folder_key": "", "description": "", "mode": "workflow",
        "input_mode": "event", "version": 1, "document": "{}", "is_builtin": False,
        "created_by": "user.admin", "created_at": 1, "updated_at": 1,
    }  # fmt: skip


def run_record(run_id: str, **extra: Any) -> store.RunRecord:
    record = store.RunRecord(
        id=run_id, agent_id="agent.a", agent_version=1, user_id="user.u", status="queued",
        waiting=None, inputs={"ticket": "x"}, outputs=None, error=None, usage={},
        conversation_id=None, idempotency_key=None, step_count=0, event_count=0, created_at=1,
        started_at=None, finished_at=None, updated_at=1, lease_owner=None, lease_expires_at=None,
    )  # fmt: skip
    return dataclasses.replace(record, **extra)


async def persist(db: Database, run_id: str, number: int, before: Any, step: Step) -> list[int]:
    """Store a stepper step the way the durable executor does, in one transaction."""
    after = step.state.to_dict()
    opened = [
        store.command_record(run_id, c, at=number) for c in step.commands if journal.kind_of(c)
    ]
    closed: dict[str, store.Closing] = {
        cid: "cancelled" for c in step.commands if isinstance(c, Cancel) for cid in c.command_ids
    }
    closed.update({cid: "done" for cid in before["pending"] if cid not in after["pending"]})
    status, waiting = journal.waiting(step.state, step.commands)
    async with db.write() as conn:
        return await store.record_step(
            conn,
            run_id,
            number,
            checkpoints.diff(before, after),
            events=step.events,
            opened=opened,
            closed=closed,
            changes={"status": status, "waiting": waiting},
            at=number,
        )


async def test_steps_replay_to_the_final_state_and_events_are_numbered(db: Database) -> None:
    stepper = Stepper(compile_document(load_json(FIXTURES / "valid" / "workflow_triage.json")))
    first = stepper.start({"ticket": "Total outage since 9am"}, now=50.0)
    [call] = first.commands
    assert isinstance(call, CallFunction)
    async with db.write() as conn:
        seqs = await store.insert_run(
            conn,
            run_record("run.1"),
            first.state.to_dict(),
            events=first.events,
            opened=[store.command_record("run.1", call, at=1)],
        )
    assert seqs == [1, 2, 3]
    second = stepper.step(first.state, call_in_process(call, now=60.0))
    assert await persist(db, "run.1", 1, first.state.to_dict(), second) == [4, 5, 6, 7, 8, 9]
    async with db.read() as conn:
        pending = await store.pending_commands(conn, "run.1")
        assert sorted(c.kind for c in pending) == ["await_input", "sleep_until"]
        task = next(c for c in pending if c.kind == "await_input")
        assert journal.command_from(task.kind, task.payload) in second.commands
        run = await store.get_run(conn, "run.1")
        assert run is not None and run.status == "waiting"
        assert run.waiting == {"for": "input", "node_id": "approve", "frame": "",
                               "command_id": task.command_id}  # fmt: skip
    answer = InputGiven(task.command_id, {"escalate": True, "note": "n"}, "user.b", now=70.0)
    third = stepper.step(second.state, answer)
    assert await persist(db, "run.1", 2, second.state.to_dict(), third) == list(range(10, 16))
    async with db.read(snapshot=True) as conn:
        assert await store.load_state(conn, "run.1") == third.state.to_dict()
        run = await store.get_run(conn, "run.1")
        assert run is not None
        assert (run.step_count, run.event_count, run.waiting) == (3, 15, None)
        assert await store.pending_commands(conn, "run.1") == []
        logged = await store.events_after(conn, "run.1", 0, 100)
        assert [e.seq for e in logged] == list(range(1, 16))
        assert [e.as_event() for e in logged] == first.events + second.events + third.events
        assert [e.seq for e in await store.events_after(conn, "run.1", 9, 3)] == [10, 11, 12]
        assert await store.events_after(conn, "run.1", 15, 10) == []


async def test_a_failed_step_leaves_nothing_behind(db: Database) -> None:
    state = {"variables": {"n": 0}, "pending": {}}
    async with db.write() as conn:
        await store.insert_run(conn, run_record("run.1"), state, events=[{"type": "run.queued"}])
    timer = store.CommandRecord(
        run_id="run.1", command_id="c1", kind="sleep_until", node_id="wait", frame="",
        payload={}, status="pending", due_at=5.0, assignees=["user.x"], created_at=2,
        closed_at=None,
    )  # fmt: skip

    async def crash_after_recording() -> None:
        async with db.write() as conn:
            await store.record_step(
                conn,
                "run.1",
                1,
                [["set", ["variables", "n"], 1]],
                events=[{"type": "node.started", "node_id": "x"}],
                opened=[timer],
                changes={"status": "running", "started_at": 2},
            )
            raise RuntimeError("crashed mid-step")

    with pytest.raises(RuntimeError, match="crashed"):
        await crash_after_recording()
    async with db.read(snapshot=True) as conn:
        run = await store.get_run(conn, "run.1")
        assert run is not None
        assert (run.status, run.started_at, run.step_count, run.event_count) == (
            "queued",
            None,
            1,
            1,
        )
        assert await store.load_state(conn, "run.1") == state
        assert [e.type for e in await store.events_after(conn, "run.1", 0, 10)] == ["run.queued"]
        assert await store.pending_commands(conn, "run.1") == []
        assert await store.due_timers(conn, 10.0) == []
    with pytest.raises(store.StepConflict):  # the step must be the run's next one
        async with db.write() as conn:
            await store.record_step(conn, "run.1", 2, [])
    with pytest.raises(ValueError, match="agent_id"):
        async with db.write() as conn:
            await store.record_step(conn, "run.1", 1, [], changes={"agent_id": "agent.b"})


async def test_leases(db: Database) -> None:
    async with db.write() as conn:
        for i in range(3):
            await store.insert_run(conn, run_record(f"run.{i}"), {})
        await store.insert_run(conn, run_record("run.done", status="succeeded"), {})

    async def claim(owner: str, run_id: str = "run.0", now: int = 1000) -> bool:
        async with db.write() as conn:
            return await store.claim(conn, run_id, owner, now, 10)

    results = await asyncio.gather(*(claim(f"worker.{i}") for i in range(4)))
    assert sorted(results) == [False, False, False, True]
    winner = f"worker.{results.index(True)}"
    loser = "worker.x"
    assert await claim(winner)  # the holder may claim again
    assert not await claim(loser, now=10_999)
    async with db.write() as conn:
        assert await store.renew_all(conn, winner, 10_000, 10) == 1  # run.0 held until 20_000
        assert await store.renew_all(conn, loser, 10_000, 10) == 0
        assert await store.lapsed_runs(conn, 10_000) == ["run.1", "run.2"]
        assert await store.lapsed_runs(conn, 20_000) == ["run.0", "run.1", "run.2"]
        assert await store.renew_all(conn, winner, 20_000, 10) == 0  # lapsed: lost
    assert await claim(loser, now=20_000)  # an expired lease can be taken over
    async with db.write() as conn:
        with pytest.raises(store.StepConflict):  # the old holder can no longer write steps
            await store.record_step(conn, "run.0", 1, [], owner=winner)
        await store.record_step(conn, "run.0", 1, [], owner=loser)
        await store.release(conn, "run.0", winner)  # not the holder: no effect
        assert await store.lapsed_runs(conn, 20_000) == ["run.1", "run.2"]
        await store.release(conn, "run.0", loser)
        assert await store.lapsed_runs(conn, 20_000) == ["run.0", "run.1", "run.2"]
        assert not await store.claim(conn, "run.done", loser, 0, 10)  # finished runs: never
        run = await store.get_run(conn, "run.0")
        assert run is not None and (run.lease_owner, run.lease_expires_at) == (None, None)


def task(run_id: str, command_id: str, kind: str, assignees: list[str], **extra: Any) -> Any:
    return store.CommandRecord(
        run_id=run_id, command_id=command_id, kind=kind, node_id="n", frame="",
        payload={"prompt": "?"}, status="pending", due_at=extra.get("due_at"),
        assignees=assignees, created_at=extra.get("at", 1), closed_at=None,
    )  # fmt: skip


async def open_commands(db: Database, run_id: str, *commands: Any) -> None:
    async with db.write() as conn:
        await store.insert_run(conn, run_record(run_id, user_id=f"user.{run_id}"), {})
        await store.record_step(conn, run_id, 1, [], opened=commands)


async def test_tasks_are_visible_to_assignees_and_the_run_user(db: Database) -> None:
    await open_commands(
        db,
        "r1",
        task("r1", "ask", "await_input", ["user.a", "group.ops", "user.a"], at=1),
        task("r1", "ok", "await_confirmation", [], at=2),
        task("r1", "tick", "sleep_until", [], due_at=5.0),
    )
    await open_commands(db, "r2", task("r2", "ask", "await_input", ["group.ops"], at=3))

    async def visible(*principals: str) -> list[tuple[str, str]]:
        async with db.read() as conn:
            return [(t.run_id, t.command_id) for t in await store.open_tasks(conn, principals)]

    assert await visible("user.a") == [("r1", "ask")]
    assert await visible("user.b", "group.ops") == [("r1", "ask"), ("r2", "ask")]
    assert await visible("user.r1") == [("r1", "ask"), ("r1", "ok")]  # the run's user: all
    assert await visible("user.r2") == [("r2", "ask")]  # assigned to others, and its user's
    assert await visible() == []
    async with db.read() as conn:  # seen through the run's agent: a hidden agent hides it
        assert await store.open_tasks(conn, ["user.r1"], None, ["agent.a"]) == []
        assert len(await store.open_tasks(conn, ["user.r1"], ["agent.a"])) == 2
        assert await store.open_tasks(conn, ["user.r1"], []) == []
    async with db.read() as conn:
        [found] = await store.open_tasks(conn, ["user.a"])
        assert found.assignees == ["user.a", "group.ops", "user.a"]  # JSON round-trips as given
    async with db.write() as conn:
        await store.record_step(conn, "r1", 2, [], closed={"ask": "done", "ok": "cancelled"})
    assert await visible("user.a", "user.r1") == []
    async with db.read() as conn:
        closed = {c.command_id for c in await store.pending_commands(conn, "r1")}
        assert closed == {"tick"}


async def test_due_timers(db: Database) -> None:
    await open_commands(
        db,
        "r1",
        task("r1", "late", "sleep_until", [], due_at=20.5),
        task("r1", "soon", "sleep_until", [], due_at=10.25),
        task("r1", "ask", "await_input", [], due_at=1.0),  # a deadline has its own timer
    )
    async with db.read() as conn:
        assert await store.due_timers(conn, 5.0) == []
        assert await store.due_timers(conn, 10.25) == [("r1", "soon", 10.25)]
        assert await store.due_timers(conn, 99.0) == [("r1", "soon", 10.25), ("r1", "late", 20.5)]
        assert await store.due_timers(conn, 99.0, limit=1) == [("r1", "soon", 10.25)]
    async with db.write() as conn:
        await store.record_step(conn, "r1", 2, [], closed={"soon": "done"})
        await store.record_step(conn, "r1", 3, [], closed={"soon": "cancelled"})  # no change
    async with db.read() as conn:
        assert await store.due_timers(conn, 99.0) == [("r1", "late", 20.5)]


async def test_listing_filters_and_pages_newest_first(db: Database) -> None:
    async with db.write() as conn:
        for i in range(6):
            record = run_record(
                f"run.{i}",
                agent_id="agent.a" if i < 4 else "agent.b",
                status="succeeded" if i % 2 else "queued",
                user_id="user.odd" if i % 2 else "user.even",
                outputs={"i": i} if i % 2 else None,
                idempotency_key=f"k{i}",
            )
            await store.insert_run(conn, record, {})

    async def ids(visible: list[str] | None = None, after: str | None = None, limit: int = 10,
                  **flt: Any) -> list[str]:  # fmt: skip
        async with db.read() as conn:
            page = await store.list_runs(conn, store.RunFilter(**flt), visible, after, limit)
            return [r.id for r in page]

    assert await ids() == [f"run.{i}" for i in reversed(range(6))]
    assert await ids(agent_id="agent.b") == ["run.5", "run.4"]
    assert await ids(status="succeeded", agent_id="agent.a") == ["run.3", "run.1"]
    assert await ids(user_id="user.even") == ["run.4", "run.2", "run.0"]
    assert await ids(visible=["agent.b"]) == ["run.5", "run.4"]
    assert await ids(visible=[]) == []
    assert await ids(limit=2) == ["run.5", "run.4"]
    assert await ids(after="run.4", limit=2) == ["run.3", "run.2"]
    assert await ids(after="run.1", limit=2) == ["run.0"]
    async with db.read() as conn:
        [odd] = await store.list_runs(conn, store.RunFilter(agent_id="agent.b"), None, "run.5", 1)
        assert (odd.id, odd.outputs, odd.waiting, odd.inputs) == (
            "run.4",
            None,
            None,
            {"ticket": "x"},
        )
        run = await store.get_run(conn, "run.5")
        assert run is not None and run.outputs == {"i": 5}
    with pytest.raises(IntegrityError):  # one run per idempotency key and agent
        async with db.write() as conn:
            await store.insert_run(conn, run_record("run.9", idempotency_key="k0"), {})
    async with db.write() as conn:  # runs go with their agent
        await agents.delete_agent(conn, "agent.a")
    assert await ids() == ["run.5", "run.4"]


async def test_checkpoints_store_changes_not_copies(db: Database) -> None:
    state: dict[str, Any] = {"variables": {"blob": "x" * 100_000, "counter": 0}}
    async with db.write() as conn:
        await store.insert_run(conn, run_record("run.big"), state)
    for batch in range(10):  # 1,000 steps, 100 per transaction to keep the test quick
        async with db.write() as conn:
            for i in range(1 + batch * 100, 1 + (batch + 1) * 100):
                before = checkpoints.snapshot(state)
                state["variables"]["counter"] = i
                await store.record_step(conn, "run.big", i, checkpoints.diff(before, state))
    async with db.read(snapshot=True) as conn:
        assert await store.load_state(conn, "run.big") == state
        size = select(func.sum(func.length(cast(run_steps.c.patch, Text))))
        stored = (await conn.execute(size.where(run_steps.c.run_id == "run.big"))).scalar()
    assert 100_000 < int(stored) < 250_000


def _tables(connection: Connection) -> set[str]:
    if connection.dialect.name == "sqlite":
        rows = connection.execute(text("SELECT name FROM sqlite_master WHERE type = 'table'"))
    else:
        rows = connection.execute(
            text("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")
        )
    return {r[0] for r in rows}


def _downgrade_then_upgrade(connection: Connection) -> Mapping[str, set[str]]:
    seen = {"head": _tables(connection)}
    command.downgrade(alembic_config(connection), "0003")
    seen["0003"] = _tables(connection)
    command.downgrade(alembic_config(connection), "base")
    seen["base"] = _tables(connection)
    command.upgrade(alembic_config(connection), "head")
    seen["again"] = _tables(connection)
    return seen


async def test_migrations_downgrade_and_upgrade_cleanly(db: Database) -> None:
    seen = await db.run_sync(_downgrade_then_upgrade)
    assert set(RUN_TABLES) <= seen["head"]
    assert not set(RUN_TABLES) & seen["0003"]
    assert "agents" in seen["0003"]
    assert seen["base"] <= {"alembic_version"}
    assert seen["again"] == seen["head"]


@pytest.mark.postgres
async def test_a_downgrade_leaves_other_schemas_alone(pg_schema: str) -> None:
    """Two dhubs in two schemas of one database: taking one down to base keeps the other's
    queue (procrastinate's routines included: its distributed mode goes on)."""
    other = f"{pg_schema}_neighbour"
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{other}"')
    mine, theirs = Database(pg_url(pg_schema)), Database(pg_url(other))
    try:
        await mine.migrate()
        await theirs.migrate()
        await mine.run_sync(lambda c: command.downgrade(alembic_config(c), "base"))
        routines = await theirs.run_sync(
            lambda c: c.execute(
                text(
                    "SELECT count(*) FROM pg_proc WHERE proname LIKE 'procrastinate%' "
                    "AND pronamespace = current_schema()::regnamespace"
                )
            ).scalar()
        )
        assert routines and routines > 5
        await mine.migrate()  # and back up, for the tests after this one
    finally:
        await mine.dispose()
        await theirs.dispose()
        with psycopg.connect(PG_URL, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{other}" CASCADE')
