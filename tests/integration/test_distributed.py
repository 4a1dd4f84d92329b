"""Distributed mode in one process, against the real PostgreSQL: runs go through the
procrastinate queue to a worker (the API process's own, or none), answers and cancellations
through the runs' inbox, timers as scheduled jobs; the run and its job commit together.
(tests/e2e/test_distributed.py runs API and workers as separate processes.)"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from fastapi.testclient import TestClient

from dhub.api.app import create_app
from dhub.domain.ids import new_id, now_ms
from dhub.services.runtime import Runtime, WorkerOptions, open_runtime
from dhub.settings import Settings
from dhub.store import runs as store
from tests.conftest import ADMIN_TOKEN, PG_URL, pg_url
from tests.integration.test_runs_api import BATCH, TRIAGE, create, ok, until

API = "/api/v1"
pytestmark = pytest.mark.postgres


@pytest.fixture
def distributed(tmp_path: Any, pg_schema: str) -> Settings:
    from tests.conftest import _truncate

    _truncate(pg_schema)
    return Settings(
        data_dir=tmp_path / "data", database_url=pg_url(pg_schema), admin_token=ADMIN_TOKEN,
        execution="distributed", run_lease_seconds=2,
    )  # fmt: skip


def serve(settings: Settings, worker: bool = True) -> TestClient:
    client = TestClient(create_app(settings, WorkerOptions(20) if worker else None))
    client.headers["Authorization"] = f"Bearer {ADMIN_TOKEN}"
    return client


@pytest.fixture
def client(distributed: Settings) -> Iterator[TestClient]:
    with serve(distributed) as c:
        yield c


def jobs(schema: str) -> list[tuple[str, str]]:
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        rows = conn.execute(
            f"SELECT args->>'run_id', status::text FROM \"{schema}\".procrastinate_jobs ORDER BY id"
        ).fetchall()
    return [(str(r[0]), str(r[1])) for r in rows]


def test_runs_go_through_the_queue_to_a_worker(client: TestClient) -> None:
    triage, batch = create(client, TRIAGE), create(client, BATCH)
    run = ok(client.post(f"{API}/agents/{batch}/runs", json={"inputs": {"numbers": [1, 2, 3]}}),
             202)  # fmt: skip
    assert run["status"] == "queued"
    done = until(client, run["id"], "succeeded", "failed")
    assert done["outputs"] == {"total": 14, "report": "#0: 1\n#1: 4\n#2: 9\n", "checked": False}
    # Human input: the answer goes through the inbox to the parked run.
    urgent = {"inputs": {"ticket": "Total outage since 9am", "customer": "acme"}}
    run = ok(client.post(f"{API}/agents/{triage}/runs", json=urgent), 202)
    assert until(client, run["id"], "waiting", "failed")["waiting"]["for"] == "input"
    answer = {"values": {"escalate": True}}
    ok(client.post(f"{API}/runs/{run['id']}/inputs/approve", json=answer), 202)
    done = until(client, run["id"], "succeeded", "failed")
    assert done["outputs"] == {"category": "bug", "summary": "URGENT bug from acme; escalate=True"}
    events = ok(client.get(f"{API}/runs/{run['id']}/events"))["data"]
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))


def test_a_waiting_run_is_cancelled_through_the_api(client: TestClient) -> None:
    triage = create(client, TRIAGE)
    urgent = {"inputs": {"ticket": "Total outage since 9am", "customer": "acme"}}
    run = ok(client.post(f"{API}/agents/{triage}/runs", json=urgent), 202)
    until(client, run["id"], "waiting", "failed")
    cancelled = ok(client.post(f"{API}/runs/{run['id']}/cancel"))
    assert cancelled["status"] == "cancelled"


def test_the_run_and_its_job_commit_together(distributed: Settings, pg_schema: str) -> None:
    """A failure after the run row and its job are written, before the commit: neither is
    left; with the commit, both are there."""

    with serve(distributed, worker=False) as api:
        agent = create(api, BATCH)

    async def scenario() -> tuple[int, int, list[tuple[str, str]]]:
        runtime = await open_runtime(distributed)
        assert runtime.queue is not None
        await runtime.queue.open()
        try:
            run = record(agent)
            with pytest.raises(RuntimeError, match="fails before the commit"):
                await create_then_fail(runtime, run)
            async with runtime.db.read() as conn:
                gone = 0 if await store.get_run(conn, run.id) is None else 1
            left = len(jobs(pg_schema))
            async with runtime.db.write() as conn:
                await store.insert_run(conn, run, {})
                await runtime.dispatch.created(conn, run)
            return gone, left, jobs(pg_schema)
        finally:
            await runtime.close()

    gone, left, after = asyncio.run(scenario())
    assert (gone, left) == (0, 0)
    assert [run_id for run_id, _ in after] != [] and after[0][1] == "todo"


async def create_then_fail(runtime: Runtime, run: store.RunRecord) -> None:
    async with runtime.db.write() as conn:
        await store.insert_run(conn, run, {})
        await runtime.dispatch.created(conn, run)
        raise RuntimeError("the API process fails before the commit")


def record(agent_id: str) -> store.RunRecord:
    at = now_ms()
    return store.RunRecord(
        id=new_id("run"), agent_id=agent_id, agent_version=1, user_id="user.u",
        status="queued", waiting=None, inputs={}, outputs=None, error=None, usage={},
        conversation_id=None, idempotency_key=None, step_count=0, event_count=0,
        created_at=at, started_at=None, finished_at=None, updated_at=at, lease_owner=None,
        lease_expires_at=None,
    )  # fmt: skip


def scheduled(schema: str) -> list[tuple[str, str, float]]:
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        rows = conn.execute(
            f"SELECT args->>'run_id', status::text, extract(epoch FROM scheduled_at) FROM "
            f'"{schema}".procrastinate_jobs WHERE scheduled_at IS NOT NULL ORDER BY id'
        ).fetchall()
    return [(str(r[0]), str(r[1]), float(r[2])) for r in rows]


def wait_for(check: Any, seconds: float = 10) -> Any:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if found := check():
            return found
        time.sleep(0.05)
    raise AssertionError("timed out")


def test_a_timer_due_while_no_worker_ran_fires_when_one_starts(
    distributed: Settings, pg_schema: str
) -> None:
    """A run parks on an input timeout (further away than a worker keeps a run in memory):
    its timer is a job scheduled at that time. It falls due while only the API runs; a worker
    started afterwards takes it, and the run goes on."""
    doc = {
        "name": "ask", "description": "", "mode": "workflow", "input_mode": "event",
        "nodes": [
            {"id": "start", "type": "start", "config": {}},
            {"id": "ask", "type": "human_input", "config": {
                "prompt": "Ship it?", "timeout": 6, "on_timeout": "default",
                "input_fields": [{"name": "ship", "type": "boolean", "required": True,
                                  "default": False}]}},
            {"id": "end", "type": "end", "config": {"outputs": [
                {"name": "ship", "type": "boolean", "value": "{{ ship }}"}]}},
        ],
        "edges": [{"source": "start", "target": "ask"}, {"source": "ask", "target": "end"}],
    }  # fmt: skip
    with serve(distributed) as client:  # a worker starts the run, which parks on the timer
        agent = create(client, doc)
        run = ok(client.post(f"{API}/agents/{agent}/runs", json={"inputs": {}}), 202)["id"]
        assert until(client, run, "waiting", "failed")["status"] == "waiting"
        wait_for(lambda: scheduled(pg_schema))  # parked: its timer is a job now
    [(job_run, status, due)] = scheduled(pg_schema)  # the worker stopped: nothing else queued
    assert (job_run, status) == (run, "todo") and due > time.time() + 3
    with serve(distributed, worker=False) as api:
        wait_for(lambda: time.time() > due + 0.5, 10)  # due now, and no worker is running
        assert ok(api.get(f"{API}/runs/{run}"))["status"] == "waiting"
    with serve(distributed) as client:  # a worker starts: the scheduled job is there
        done = until(client, run, "succeeded", "failed")
    assert done["outputs"] == {"ship": False}


def test_settings_refuse_distributed_mode_on_sqlite(tmp_path: Any) -> None:
    with pytest.raises(ValueError, match="DHUB_EXECUTION=distributed needs PostgreSQL"):
        Settings(data_dir=tmp_path, database_url="sqlite:///x.db", execution="distributed")
    with pytest.raises(ValueError, match="DHUB_EXECUTION must be one of"):
        dataclasses.replace(
            Settings(data_dir=tmp_path, database_url="sqlite:///x.db"), execution="cluster"
        )


def test_workers_and_readiness(client: TestClient) -> None:
    listed = ok(client.get(f"{API}/workers"))
    assert listed["execution"] == "distributed"
    [worker] = listed["data"]
    assert worker["alive"] and not worker["stopping"] and worker["concurrency"] == 20
    assert worker["id"].startswith("worker.") and worker["queues"] == ["runs"]
    assert ok(client.get("/readyz")) == {"status": "ready", "execution": "distributed"}
    stranger = ok(client.post(f"{API}/users", json={"name": "sam", "display_name": "Sam"}), 201)
    token = ok(client.post(f"{API}/users/{stranger['id']}/tokens", json={"name": "t"}), 201)
    refused = client.get(f"{API}/workers", headers={"Authorization": f"Bearer {token['token']}"})
    assert refused.status_code == 403


def test_embedded_mode_has_no_workers(settings: Settings) -> None:
    with TestClient(create_app(settings)) as embedded:
        embedded.headers["Authorization"] = f"Bearer {ADMIN_TOKEN}"
        assert ok(embedded.get(f"{API}/workers")) == {"data": [], "execution": "embedded"}
        assert ok(embedded.get("/readyz")) == {"status": "ready", "execution": "embedded"}


QUICK_ASK = {
    "name": "quick-ask", "description": "", "mode": "workflow", "input_mode": "event",
    "nodes": [
        {"id": "start", "type": "start", "config": {}},
        {"id": "ask", "type": "human_input", "config": {
            "prompt": "Ship it?", "timeout": 3, "on_timeout": "default",
            "input_fields": [{"name": "ship", "type": "boolean", "required": True,
                              "default": False}]}},
        {"id": "end", "type": "end", "config": {"outputs": [
            {"name": "ship", "type": "boolean", "value": "{{ ship }}"}]}},
    ],
    "edges": [{"source": "start", "target": "ask"}, {"source": "ask", "target": "end"}],
}  # fmt: skip


def test_an_answer_reaches_a_run_a_worker_holds_live(client: TestClient) -> None:
    """Its timeout is near, so the worker keeps the run in memory: the answer goes through
    the inbox and a NOTIFY to that worker, well before the timeout."""
    agent = create(client, QUICK_ASK)
    run = ok(client.post(f"{API}/agents/{agent}/runs", json={"inputs": {}}), 202)["id"]
    until(client, run, "waiting", "failed")
    answered = time.monotonic()
    ok(client.post(f"{API}/runs/{run}/inputs/ask", json={"values": {"ship": True}}), 202)
    done = until(client, run, "succeeded", "failed")
    assert done["outputs"] == {"ship": True}  # not the timeout's default
    assert time.monotonic() - answered < 2.5


def test_a_run_executing_in_a_worker_is_cancelled_promptly(client: TestClient) -> None:
    doc = {
        "name": "slow", "description": "", "mode": "workflow", "input_mode": "event",
        "nodes": [
            {"id": "start", "type": "start", "config": {}},
            {"id": "nap", "type": "code", "config": {
                "source": "import time\n\ndef main():\n    time.sleep(20)\n    return {}\n",
                "timeout": 60}},
            {"id": "end", "type": "end", "config": {}},
        ],
        "edges": [{"source": "start", "target": "nap"}, {"source": "nap", "target": "end"}],
    }  # fmt: skip
    agent = create(client, doc)
    run = ok(client.post(f"{API}/agents/{agent}/runs", json={"inputs": {}}), 202)["id"]
    until(client, run, "running", "failed")
    asked = time.monotonic()
    cancelled = ok(client.post(f"{API}/runs/{run}/cancel"))
    assert cancelled["status"] == "cancelled" and time.monotonic() - asked < 5


def test_jobs_of_dead_workers_are_forgotten(distributed: Settings, pg_schema: str) -> None:
    """A worker killed mid-job leaves its job 'doing' for ever in procrastinate's table (the
    lease sweep requeued the run): the workers delete such jobs; a live worker's stay."""
    table = f'"{pg_schema}".procrastinate_jobs'

    def two_doing_jobs() -> int:
        with psycopg.connect(PG_URL, autocommit=True) as conn:
            live = conn.execute(
                f'INSERT INTO "{pg_schema}".procrastinate_workers DEFAULT VALUES RETURNING id'
            ).fetchone()
            assert live is not None
            for worker_id in (None, live[0]):
                conn.execute(
                    f"INSERT INTO {table} (queue_name, task_name, args, status, worker_id) "
                    "VALUES ('runs', 'dhub.run', '{}', 'doing', %s)",
                    (worker_id,),
                )
        return int(live[0])

    async def forget() -> int:
        runtime = await open_runtime(distributed)  # migrates: the queue's tables exist
        assert runtime.queue is not None
        await runtime.queue.open()
        try:
            live = two_doing_jobs()
            await runtime.queue.forget_stalled()
            return live
        finally:
            await runtime.close()

    live = asyncio.run(forget())
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        left = conn.execute(f"SELECT worker_id FROM {table}").fetchall()
    assert left == [(live,)]


def test_a_queued_run_gets_one_job_whatever_the_sweeps(
    distributed: Settings, pg_schema: str
) -> None:
    """Runs wait in the queue unclaimed (no worker yet): a worker's start-up sweep sees them
    as nobody's, and must not queue them again."""
    with serve(distributed, worker=False) as api:
        batch = create(api, BATCH)
        runs = [ok(api.post(f"{API}/agents/{batch}/runs", json={"inputs": {"numbers": [1]}}),
                   202)["id"] for _ in range(3)]  # fmt: skip

    async def sweep() -> None:
        runtime = await open_runtime(distributed)
        assert runtime.queue is not None
        await runtime.queue.open()
        try:
            assert runtime.executor.handoff is not None
            await runtime.executor.handoff.requeue(runs)  # what the sweep does with them
        finally:
            await runtime.close()

    asyncio.run(sweep())
    assert sorted(run for run, _ in jobs(pg_schema)) == sorted(runs)


def test_an_answer_is_saved_before_the_202_while_no_worker_runs(distributed: Settings) -> None:
    """The run parks; with no worker running, its answer is saved (202), a second answer to
    the task is 409 and the form is no longer listed; the first worker to start applies the
    saved answer, once."""
    with serve(distributed) as client:
        agent = create(client, TRIAGE)
        urgent = {"inputs": {"ticket": "Total outage since 9am", "customer": "acme"}}
        run = ok(client.post(f"{API}/agents/{agent}/runs", json=urgent), 202)["id"]
        assert until(client, run, "waiting", "failed")["status"] == "waiting"
    answer = f"{API}/runs/{run}/inputs/approve"
    with serve(distributed, worker=False) as api:
        ok(api.post(answer, json={"values": {"escalate": False}}), 202)
        second = api.post(answer, json={"values": {"escalate": True}})
        assert second.status_code == 409, second.text
        assert ok(api.get(f"{API}/tasks"))["data"] == []
        assert ok(api.get(f"{API}/runs/{run}"))["status"] == "waiting"
    with serve(distributed) as client:
        done = until(client, run, "succeeded", "failed")
        events = ok(client.get(f"{API}/runs/{run}/events"))["data"]
        assert client.post(answer, json={"values": {"escalate": True}}).status_code == 404
    assert done["outputs"] == {"category": "bug", "summary": "URGENT bug from acme; escalate=False"}
    assert [e["type"] for e in events].count("input.received") == 1
