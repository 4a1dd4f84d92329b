"""What a long react loop stores, on SQLite and PostgreSQL (issue 23): its model calls' rows
do not each hold the whole transcript (that grew with the square of the turns), and a run
whose model call was in flight when its worker went away is resumed by another worker with
that call's messages exactly as they were."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from sqlalchemy import Text, func, select

from dhub.engine.compile import CompiledGraph, compile_spec
from dhub.engine.react_build import react_config
from dhub.engine.state import CallChat, CallFunction, CallModel, Done
from dhub.engine.validate import validate_agent_document
from dhub.runtime.durable import RunExecutor
from dhub.runtime.ports import Live, ModelAnswer, RealClock
from dhub.store.db import Database
from dhub.store.tables import run_commands, run_events, run_steps
from tests.integration.test_durable_runs import db as db  # the fixture: agent.a stored
from tests.integration.test_durable_runs import new_run, until

pytestmark = pytest.mark.asyncio

SPEC = validate_agent_document({
    "name": "looper", "description": "", "mode": "react", "input_mode": "chat",
    "agent": {"instructions": "Look every order up.", "model_provider": "openai",
              "model": "gpt-4o-mini", "max_iterations": 80,
              "tools": [{"name": "lookup", "function": {
                  "source": "def lookup(order_id: str) -> dict:\n    return {}\n"}}]},
})  # fmt: skip


class Looking:
    """The model: ``turns`` lookups, one per call, then an answer. ``gate`` holds call
    ``held`` (counted from 1) until it is opened."""

    def __init__(self, turns: int, held: int | None = None) -> None:
        self.turns, self.held = turns, held
        self.seen: list[list[dict[str, Any]]] = []  # each call's messages
        self.gate = asyncio.Event()
        self.gate.set()
        self.asked = asyncio.Event()  # set when the held call is made

    async def complete(self, request: CallModel, live: Live | None = None) -> ModelAnswer:
        raise AssertionError("a react loop makes chat calls")

    async def chat(self, request: CallChat, live: Live | None = None) -> ModelAnswer:
        self.seen.append(request.messages)
        if len(self.seen) == self.held:
            self.asked.set()
            await self.gate.wait()
        asked = sum(1 for m in request.messages if m.get("tool_calls"))
        if asked < self.turns:
            call = {"id": f"c{asked}", "name": "lookup", "arguments": {"order_id": f"A-{asked}"}}
            return ModelAnswer({"content": "", "tool_calls": [call]})
        return ModelAnswer({"content": f"Looked {asked} orders up.", "tool_calls": []})


class Instant:
    async def call(self, request: CallFunction) -> Done:
        return Done(request.command_id, True, {"order_id": request.inputs["order_id"]})


async def graphs(agent_id: str, version: int, user_id: str) -> CompiledGraph:
    return compile_spec(SPEC, react_config(SPEC, budget=10_000_000))


def executor(db: Database, model: Looking, owner: str, lease: float = 30) -> RunExecutor:
    return RunExecutor(db, graphs, lambda _: Instant(), model, RealClock(), owner, lease)


async def stored_bytes(db: Database, run_id: str) -> dict[str, int]:
    """The size of what the run stored: its commands, step patches and events (JSON)."""
    sizes = {}
    for table, column in ((run_commands, "payload"), (run_steps, "patch"), (run_events, "data")):
        size = func.sum(func.length(table.c[column].cast(Text)))
        async with db.read() as conn:
            found = await conn.execute(select(size).where(table.c.run_id == run_id))
        [(total,)] = list(found)
        sizes[table.name] = int(total)
    return sizes


async def test_a_loop_stores_its_model_calls_in_linear_space(db: Database) -> None:
    sizes = {}
    for turns in (10, 50):
        runs = executor(db, Looking(turns), f"worker.{turns}")
        run = await new_run(db, {"message": "Look them all up."})
        runs.start(run, {"run_id": run.id})
        result = await runs.wait(run.id)
        await runs.close()
        assert result is not None and result.status == "succeeded", result
        assert f"Looked {turns} orders up." in str(result.outputs)
        sizes[turns] = await stored_bytes(db, run.id)
    # 5 times the turns: about 5 times the bytes (the square would be about 25 times).
    for table in ("run_commands", "run_steps", "run_events"):
        assert sizes[50][table] / sizes[10][table] < 6, (table, sizes)


async def test_a_model_call_in_flight_is_made_again_with_the_same_messages(db: Database) -> None:
    model = Looking(6, held=4)
    model.gate.clear()
    first = executor(db, model, "worker.1", lease=0.5)
    run = await new_run(db, {"message": "Look them all up."})
    first.start(run, {"run_id": run.id})
    await model.asked.wait()
    await first.close()  # the worker goes away while the fourth call is in flight
    await until(db, run.id, "running")
    model.gate.set()
    second = executor(db, model, "worker.2")
    assert await second.recover() == [run.id]
    result = await second.wait(run.id)
    await second.close()
    assert result is not None and result.status == "succeeded", result
    assert model.seen[4] == model.seen[3] and len(model.seen[3]) == 7  # rebuilt from the state
