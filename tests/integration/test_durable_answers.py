"""An acknowledged answer is never lost nor applied twice (SQLite and PostgreSQL): answers and
decisions are saved in the run's inbox before the 202, one per task; the run consumes each
once, and the step that does deletes it in the same transaction. (tests/e2e/
test_durable_answers.py kills a real server right after the 202.)"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from fastapi.testclient import TestClient

from dhub.domain.ids import now_ms
from dhub.engine.compile import CompiledGraph, compile_document
from dhub.runtime.durable import RunExecutor
from dhub.runtime.ports import Answer, NoModel, RealClock
from dhub.settings import Settings
from dhub.store import inbox
from dhub.store import runs as store
from dhub.store.db import Database
from tests.integration.test_durable_runs import db as db
from tests.integration.test_durable_runs import new_run, until
from tests.integration.test_react_runs_api import DONE, LOOKUP, SUPPORT, approve, log, say
from tests.integration.test_react_runs_api import REFUND as REFUND_CALL
from tests.integration.test_react_runs_api import server as react_server
from tests.integration.test_runs_api import API, REFUND, create, ok
from tests.integration.test_runs_api import until as run_until

ASK = {
    "name": "pick", "description": "", "mode": "workflow", "input_mode": "event",
    "nodes": [
        {"id": "start", "type": "start", "config": {}},
        {"id": "ask", "type": "human_input", "config": {
            "prompt": "Which one?", "input_fields": [
                {"name": "choice", "type": "string", "required": True}]}},
        {"id": "end", "type": "end", "config": {"outputs": [
            {"name": "choice", "type": "string", "value": "{{ choice }}"}]}},
    ],
    "edges": [{"source": "start", "target": "ask"}, {"source": "ask", "target": "end"}],
}  # fmt: skip
# The same, with a timeout far away: a run waiting on it stays in a server's memory when the
# server keeps runs with timers closer than ``park_after`` (the tests give a long one).
ASK_LIVE = {**ASK, "nodes": [
    ASK["nodes"][0],
    {**ASK["nodes"][1], "config": {**ASK["nodes"][1]["config"], "timeout": 600}},
    ASK["nodes"][2],
]}  # fmt: skip


def ask(client: TestClient) -> tuple[str, str]:
    """A run of ASK, waiting for its answer: (run id, answer path)."""
    agent = create(client, ASK)
    run = ok(client.post(f"{API}/agents/{agent}/runs", json={"inputs": {}}), 202)["id"]
    assert run_until(client, run, "waiting", "failed")["status"] == "waiting"
    return run, f"{API}/runs/{run}/inputs/ask"


def received(client: TestClient, run_id: str, kind: str = "input.received") -> int:
    events = ok(client.get(f"{API}/runs/{run_id}/events", params={"limit": 1000}))["data"]
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    return sum(e["type"] == kind for e in events)


def letters_of(url: str, run_id: str) -> list[inbox.Letter]:
    async def read() -> list[inbox.Letter]:
        db = Database(url)
        try:
            async with db.read() as conn:
                return await inbox.letters(conn, run_id)
        finally:
            await db.dispose()

    return asyncio.run(read())


# -- through the API ------------------------------------------------------------------------


def test_racing_answers_to_one_task_one_is_applied(client: TestClient, settings: Settings) -> None:
    """Six people answer the same form at once: one answer is saved (202) and applied, the
    others are refused; the run records one answer, the one that got the 202."""
    run, path = ask(client)
    start = threading.Barrier(6)
    results: dict[str, int] = {}

    def answer(choice: str) -> None:
        start.wait()
        results[choice] = client.post(path, json={"values": {"choice": choice}}).status_code

    threads = [threading.Thread(target=answer, args=(f"c{i}",)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    [winner] = [choice for choice, status in results.items() if status == 202]
    # The others: 409 (an answer is saved already), or 404 if checked once it was applied
    # (the run no longer waits for that), depending on how late each came.
    assert set(results.values()) - {202} <= {404, 409} and len(results) == 6, results
    done = run_until(client, run, "succeeded", "failed")
    assert done["outputs"] == {"choice": winner}
    assert received(client, run) == 1
    assert letters_of(settings.database_url, run) == []  # consumed: gone with its step
    again = client.post(path, json={"values": {"choice": "late"}})
    assert again.status_code == 404  # the task is closed


def test_an_answer_wakes_a_parked_run(client: TestClient) -> None:
    run, path = ask(client)
    executor = client.app.state.services.runs.executor  # type: ignore[attr-defined]
    parked = ok(client.get(f"{API}/runs/{run}"))
    assert executor.live_count == 0  # no process holds it: it waits in the database
    assert parked["status"] == "waiting"
    ok(client.post(path, json={"values": {"choice": "blue"}}), 202)
    done = run_until(client, run, "succeeded", "failed")
    assert done["outputs"] == {"choice": "blue"} and received(client, run) == 1


def test_an_answer_for_a_run_a_dead_server_holds_is_kept_until_the_run_is_taken_over(
    client: TestClient, settings: Settings
) -> None:
    """The run is held by a server that died (its lease has not lapsed yet): the answer is
    saved all the same (202), the form no longer shows, a second answer is 409, and once the
    lease lapses this server takes the run over and applies the saved answer."""
    run, path = ask(client)

    async def hold() -> None:  # claimed by a worker that is gone, for 1.5 s more
        db = Database(settings.database_url)
        try:
            async with db.write() as conn:
                assert await store.claim(conn, run, "server.dead", now_ms(), 1.5)
        finally:
            await db.dispose()

    asyncio.run(hold())
    ok(client.post(path, json={"values": {"choice": "kept"}}), 202)
    assert ok(client.get(f"{API}/tasks"))["data"] == []  # answered: not asked again
    second = client.post(path, json={"values": {"choice": "other"}})
    assert second.status_code == 409 and "answer saved already" in second.json()["detail"]
    assert [x.command_id for x in letters_of(settings.database_url, run)] != []
    done = run_until(client, run, "succeeded", "failed")  # the sweep, once the lease lapsed
    assert done["outputs"] == {"choice": "kept"} and received(client, run) == 1
    assert letters_of(settings.database_url, run) == []


def test_an_approval_with_edited_arguments_is_applied_once(
    client: TestClient, settings: Settings
) -> None:
    refunds = create(client, REFUND)
    run = ok(client.post(f"{API}/agents/{refunds}/runs", json={"inputs": {"amount": 30}}), 202)
    run_until(client, run["id"], "waiting")
    [task] = ok(client.get(f"{API}/tasks"))["data"]
    confirm = f"{API}/runs/{run['id']}/confirmations/{task['command_id']}"
    ok(client.post(confirm, json={"approve": True, "arguments": {"amount": 7}}), 202)
    again = client.post(confirm, json={"approve": False, "reason": "changed my mind"})
    assert again.status_code in (404, 409)  # saved already, or applied already
    done = run_until(client, run["id"], "succeeded", "failed")
    assert done["outputs"] == {"paid": 7}
    assert received(client, run["id"], "confirmation.received") == 1
    assert letters_of(settings.database_url, run["id"]) == []


def test_a_react_agents_approval_is_applied_once(settings: Settings) -> None:
    """The support agent's refund, approved with an edited amount: the decision is saved,
    consumed by the step that runs the call, and gone from the inbox with it."""
    with react_server(settings, [LOOKUP, REFUND_CALL, DONE]) as client:
        agent = ok(client.post(f"{API}/agents", json=SUPPORT), 201)["id"]
        _, run = say(client, agent, "Please refund order A-1001")
        assert run_until(client, run, "waiting", "failed")["waiting"]["for"] == "confirmation"
        task = approve(client, run, arguments={"order_id": "A-1001", "amount": 12.5})
        path = f"{API}/runs/{run}/confirmations/{task['command_id']}"
        assert client.post(path, json={"approve": True}).status_code in (404, 409)
        done = run_until(client, run, "succeeded", "failed")
        assert received(client, run, "confirmation.received") == 1
        refunds = [e for e in log(client, run) if e["type"] == "tool.succeeded"][1:]
    assert done["outputs"] == {"answer": DONE}
    assert [e["data"]["result"] for e in refunds] == [{"order_id": "A-1001", "refunded": 12.5}]
    assert letters_of(settings.database_url, run) == []


# -- through the executor -------------------------------------------------------------------


class NoFunctions:
    async def call(self, request: Any) -> Any:
        raise AssertionError("these workflows call no function")


def executor(db: Database, document: dict[str, Any], owner: str, **options: Any) -> RunExecutor:
    async def graphs(agent_id: str, version: int, user_id: str) -> CompiledGraph:
        return compile_document(document)

    functions: Any = NoFunctions()
    return RunExecutor(
        db, graphs, lambda _: functions, NoModel(), RealClock(), owner, **options
    )  # fmt: skip


async def task_of(db: Database, run_id: str) -> str:
    async with db.read() as conn:
        [task] = [
            c for c in await store.pending_commands(conn, run_id) if c.kind in store.TASK_KINDS
        ]
    return task.command_id


async def wait_live(runs: RunExecutor, run_id: str) -> None:
    for _ in range(400):
        if run_id in runs.live_ids():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"{run_id} never went live")


@pytest.mark.asyncio
async def test_racing_answers_in_concurrent_transactions_one_is_saved(db: Database) -> None:
    """Eight answers to one task, each in its own transaction at once (really concurrent on
    PostgreSQL): exactly one is saved, and that is the one the run applies."""
    runs = executor(db, ASK, "server.1")
    run = await new_run(db, {})
    runs.start(run, {"run_id": run.id})
    await until(db, run.id, "waiting")
    command = await task_of(db, run.id)
    outcomes = await asyncio.gather(
        *(runs.hand(run.id, command, Answer({"choice": f"c{i}"}, "user.u")) for i in range(8))
    )
    assert outcomes.count("saved") == 1, outcomes
    assert set(outcomes) <= {"saved", "answered", "closed"}
    done = await until(db, run.id, "succeeded")
    assert done.outputs == {"choice": f"c{outcomes.index('saved')}"}
    await runs.close()


@pytest.mark.asyncio
async def test_a_letter_leaves_the_inbox_in_the_step_that_consumes_it(db: Database) -> None:
    """Read again and again while the answer is applied, the database never shows the
    answer both saved and applied (it would be applied twice after a crash), nor neither
    (it would be lost)."""
    runs = executor(db, ASK, "server.1")
    run = await new_run(db, {})
    runs.start(run, {"run_id": run.id})
    await until(db, run.id, "waiting")
    command = await task_of(db, run.id)
    seen: list[tuple[bool, bool, int]] = []  # (letter saved, task open, answers applied)
    answered = asyncio.Event()

    async def watch() -> None:  # from the moment the answer is acknowledged
        await answered.wait()
        while not seen or seen[-1][2] == 0:
            async with db.read(snapshot=True) as conn:
                saved = bool(await inbox.letters(conn, run.id))
                open_ = any(c.command_id == command for c in await store.pending_commands(
                    conn, run.id))  # fmt: skip
                events = await store.events_after(conn, run.id, 0, 1000)
            seen.append((saved, open_, sum(e.type == "input.received" for e in events)))
            await asyncio.sleep(0)

    watching = asyncio.ensure_future(watch())
    assert await runs.answer(run.id, command, Answer({"choice": "once"}, "user.u"))
    answered.set()
    await asyncio.wait_for(watching, 10)
    # Saved and not applied yet, then applied and gone: never lost, never both.
    assert set(seen) <= {(True, True, 0), (False, False, 1)}, seen
    assert seen[-1] == (False, False, 1)
    assert (await until(db, run.id, "succeeded")).outputs == {"choice": "once"}
    await runs.close()


@pytest.mark.asyncio
async def test_a_refused_answer_is_consumed_and_the_task_stays_open(db: Database) -> None:
    """An answer the run refuses (not what the form asks: the API checks it first, the run
    checks again) leaves the inbox with the step that refused it; the task stays open, and
    the next answer is saved and applied."""
    runs = executor(db, ASK, "server.1")
    run = await new_run(db, {})
    runs.start(run, {"run_id": run.id})
    await until(db, run.id, "waiting")
    command = await task_of(db, run.id)
    assert await runs.answer(run.id, command, Answer({"choice": 3}, "user.u"))
    for _ in range(400):
        async with db.read(snapshot=True) as conn:
            events = await store.events_after(conn, run.id, 0, 1000)
            letters = await inbox.letters(conn, run.id)
        if any(e.type == "input.rejected" for e in events):
            break
        await asyncio.sleep(0.01)
    assert letters == [] and await task_of(db, run.id) == command
    assert await runs.answer(run.id, command, Answer({"choice": "three"}, "user.u"))
    assert (await until(db, run.id, "succeeded")).outputs == {"choice": "three"}
    await runs.close()


@pytest.mark.asyncio
async def test_an_answer_reaches_a_run_another_server_holds(db: Database) -> None:
    """Server 1 holds the run in memory (its timeout is near enough to keep it there); the
    answer comes to server 2, which saves it and cannot hand it over: server 1 finds it in
    its inbox sweep and applies it."""
    first = executor(db, ASK_LIVE, "server.1", park_after=3600, timer_poll=0.05)
    second = executor(db, ASK_LIVE, "server.2")
    run = await new_run(db, {})
    first.start(run, {"run_id": run.id})
    await until(db, run.id, "waiting")
    await wait_live(first, run.id)
    command = await task_of(db, run.id)
    assert await second.answer(run.id, command, Answer({"choice": "far"}, "user.u"))
    assert not await second.answer(run.id, command, Answer({"choice": "near"}, "user.u"))
    done = await until(db, run.id, "succeeded")
    assert done.outputs == {"choice": "far"} and done.lease_owner is None
    async with db.read() as conn:
        assert await inbox.letters(conn, run.id) == []
    await first.close()
    await second.close()


@pytest.mark.asyncio
async def test_an_answer_saved_for_a_run_cancelled_before_it_applied_goes_with_it(
    db: Database,
) -> None:
    """The answer is saved (server 2), then the run is cancelled where it executes (server 1,
    which has not read its inbox yet): the run ends cancelled, the answer goes with it, and
    an answer after that is refused."""
    first = executor(db, ASK_LIVE, "server.1", park_after=3600, timer_poll=3600)
    # Neither sweeps its inbox during the test: on a loaded machine a sweep between the
    # answer and the cancel delivered the answer first (the run then succeeded).
    second = executor(db, ASK_LIVE, "server.2", timer_poll=3600)
    run = await new_run(db, {})
    first.start(run, {"run_id": run.id})
    await until(db, run.id, "waiting")
    await wait_live(first, run.id)
    command = await task_of(db, run.id)
    assert await second.answer(run.id, command, Answer({"choice": "late"}, "user.u"))
    assert await first.cancel(run.id)
    await until(db, run.id, "cancelled")
    async with db.read() as conn:
        assert await inbox.letters(conn, run.id) == []
    assert await second.hand(run.id, command, Answer({"choice": "later"}, "u")) == "closed"
    await first.close()
    await second.close()
