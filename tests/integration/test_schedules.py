"""Schedule triggers (issue 21), on SQLite and PostgreSQL, with a fake clock: ticks start runs
at their instants in the schedule's time zone (daylight saving time included), a server down
across ticks applies the missed-tick policy, two servers on one PostgreSQL database never both
start a tick, and revoking the user's access stops the schedule.

The servers here start with DHUB_SCHEDULE_POLL_SECONDS=0 (no loop of their own) and the test
runs each pass of a ``Scheduler`` on the server's services; one test runs the server's loop."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from fastapi.testclient import TestClient

from dhub.api.app import create_app
from dhub.services.runtime import WorkerOptions, open_runtime
from dhub.services.schedules import Scheduler, scheduler_for
from dhub.settings import Settings
from tests.conftest import ADMIN_TOKEN, _truncate, pg_url
from tests.integration.test_runs_api import TRIAGE, create, ok, until, user

API = "/api/v1"
SEOUL = "Asia/Seoul"


class FakeClock:
    """Now, as the servers' triggers and schedulers read it: set by the test."""

    def __init__(self, text: str, zone: str = "UTC") -> None:
        self.now = 0.0
        self.set(text, zone)

    def __call__(self) -> float:
        return self.now

    def set(self, text: str, zone: str = "UTC") -> None:
        self.now = datetime.fromisoformat(text).replace(tzinfo=ZoneInfo(zone)).timestamp()

    def advance(self, seconds: float) -> None:
        self.now += seconds


def serve(settings: Settings, clock: FakeClock, poll: float = 0) -> TestClient:
    app = create_app(dataclasses.replace(settings, schedule_poll_seconds=poll), clock=clock)
    client = TestClient(app)
    client.headers["Authorization"] = f"Bearer {ADMIN_TOKEN}"
    return client


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock("2027-01-08 12:00", SEOUL)  # a Friday


@pytest.fixture
def server(settings: Settings, clock: FakeClock) -> Iterator[TestClient]:
    with serve(settings, clock) as client:
        yield client


def tick(client: TestClient) -> int:
    """One pass of a scheduler on the server's services, in its event loop."""
    scheduler = Scheduler(client.app.state.services.triggers)  # type: ignore[attr-defined]
    assert client.portal is not None
    return int(client.portal.call(scheduler.pass_once))


def schedule(client: TestClient, agent_id: str, **config: Any) -> dict[str, Any]:
    doc = {"name": "daily", "config": {"type": "schedule", "inputs": {"ticket": "tick"}, **config}}
    return dict(ok(client.post(f"{API}/agents/{agent_id}/triggers", json=doc), 201))


def history(client: TestClient, agent_id: str, trigger_id: str) -> list[dict[str, Any]]:
    path = f"{API}/agents/{agent_id}/triggers/{trigger_id}/history"
    return list(reversed(ok(client.get(path, params={"limit": 200}))["data"]))  # oldest first


def runs_of(client: TestClient, agent_id: str) -> list[dict[str, Any]]:
    return list(ok(client.get(f"{API}/runs", params={"agent_id": agent_id, "limit": 200}))["data"])


def test_ticks_start_runs_at_their_instants_in_seoul(server: TestClient, clock: FakeClock) -> None:
    agent = create(server, TRIAGE)
    made = schedule(server, agent, cron="0 9 * * 1-5", timezone=SEOUL)
    assert made["next_fires"] == [
        "2027-01-11T09:00:00+09:00", "2027-01-12T09:00:00+09:00", "2027-01-13T09:00:00+09:00",
        "2027-01-14T09:00:00+09:00", "2027-01-15T09:00:00+09:00",
    ]  # fmt: skip
    assert made["last_fire"] is None and "url" not in made and "secret" not in made
    assert tick(server) == 0
    clock.set("2027-01-11 08:59:59", SEOUL)
    assert tick(server) == 0 and runs_of(server, agent) == []
    clock.set("2027-01-11 09:00:02", SEOUL)
    assert tick(server) == 1
    assert tick(server) == 0  # moved on: the same tick never again
    [run] = runs_of(server, agent)
    done = until(server, run["id"], "succeeded", "failed")
    assert (done["inputs"]["ticket"], done["user_id"]) == ("tick", "user.admin")
    events = history(server, agent, made["id"])
    assert [(e["kind"], e["key"], e["status"], e["run_id"]) for e in events] == [
        ("tick", "2027-01-11T09:00:00+09:00", "started", run["id"])
    ]
    shown = ok(server.get(f"{API}/agents/{agent}/triggers/{made['id']}"))
    assert shown["last_fire"] == "2027-01-11T09:00:00+09:00"
    assert shown["next_fires"][0] == "2027-01-12T09:00:00+09:00"


def test_daylight_saving_time_fires_each_wall_clock_time_once(
    server: TestClient, clock: FakeClock
) -> None:
    """New York: 14 March 2027 skips 02:00-03:00, 7 November 2027 shows 01:00-02:00 twice."""
    zone = "America/New_York"
    agent = create(server, TRIAGE)
    clock.set("2027-03-13 00:00", zone)
    spring = schedule(server, agent, cron="30 2 * * *", timezone=zone)
    walk(server, clock, "2027-03-13 00:00", "2027-03-16 00:00", zone)
    assert [e["key"] for e in history(server, agent, spring["id"])] == [
        "2027-03-13T02:30:00-05:00", "2027-03-14T03:00:00-04:00", "2027-03-15T02:30:00-04:00",
    ]  # fmt: skip
    ok(server.patch(f"{API}/agents/{agent}/triggers/{spring['id']}", json={"enabled": False}))
    clock.set("2027-11-06 00:00", zone)
    autumn = schedule(server, agent, cron="30 1 * * *", timezone=zone)
    walk(server, clock, "2027-11-06 00:00", "2027-11-08 12:00", zone)
    assert [e["key"] for e in history(server, agent, autumn["id"])] == [
        "2027-11-06T01:30:00-04:00", "2027-11-07T01:30:00-04:00", "2027-11-08T01:30:00-05:00",
    ]  # fmt: skip
    every = [e for t in (spring, autumn) for e in history(server, agent, t["id"])]
    assert all(e["status"] == "started" and e["reason"] is None for e in every)
    assert len(runs_of(server, agent)) == 6


def walk(server: TestClient, clock: FakeClock, start: str, end: str, zone: str) -> None:
    """Passes every quarter of an hour (real time) from ``start`` to ``end``, local times."""
    clock.set(start, zone)
    stop = datetime.fromisoformat(end).replace(tzinfo=ZoneInfo(zone)).timestamp()
    while clock.now <= stop:
        tick(server)
        clock.advance(900)


def test_a_server_down_across_ticks_skips_them_or_runs_once(
    settings: Settings, clock: FakeClock
) -> None:
    with serve(settings, clock) as first:
        agent = create(first, TRIAGE)
        skip = schedule(first, agent, cron="0 9 * * *", timezone=SEOUL, missed="skip")
        once = schedule(first, agent, cron="0 9 * * *", timezone=SEOUL, missed="run_once")
    clock.set("2027-01-10 15:00", SEOUL)  # down across 9 and 10 January, 09:00
    with serve(settings, clock) as second:
        assert tick(second) == 2
        [run] = runs_of(second, agent)
        skipped = history(second, agent, skip["id"])
        assert [(e["status"], e["key"], e["run_id"]) for e in skipped] == [
            ("skipped", "2027-01-10T09:00:00+09:00", None)
        ]
        assert "from 2027-01-09T09:00:00+09:00 to 2027-01-10T09:00:00" in skipped[0]["reason"]
        ran = history(second, agent, once["id"])
        assert [(e["status"], e["key"], e["run_id"]) for e in ran] == [
            ("started", "2027-01-10T09:00:00+09:00", run["id"])
        ]
        assert "one run for the latest" in ran[0]["reason"]
        for trigger in (skip, once):
            shown = ok(second.get(f"{API}/agents/{agent}/triggers/{trigger['id']}"))
            assert shown["next_fires"][0] == "2027-01-11T09:00:00+09:00"
        clock.set("2027-01-11 09:00:01", SEOUL)  # up: the next tick is on time for both
        assert tick(second) == 2 and len(runs_of(second, agent)) == 3
        assert history(second, agent, skip["id"])[-1]["status"] == "started"


def test_revoking_the_users_access_stops_the_schedule(server: TestClient, clock: FakeClock) -> None:
    agent = create(server, TRIAGE)
    bob = user(server, "bob")
    grant = {"principal_id": bob["id"], "scope": "editor"}
    ok(server.post(f"{API}/agents/{agent}/grants", json=grant), 201)
    doc = {"config": {"type": "schedule", "every": 3600, "inputs": {"ticket": "hourly"}}}
    made = ok(server.post(f"{API}/agents/{agent}/triggers", json=doc, headers=bob), 201)
    clock.advance(3600)
    tick(server)
    [run] = runs_of(server, agent)
    assert run["user_id"] == bob["id"]
    assert server.delete(f"{API}/agents/{agent}/grants/{bob['id']}").status_code == 204
    clock.advance(3600)
    tick(server)
    assert len(runs_of(server, agent)) == 1
    shown = ok(server.get(f"{API}/agents/{agent}/triggers/{made['id']}"))
    assert shown["status"] == "stopped" and bob["id"] in shown["stopped_reason"]
    assert shown["next_fires"] == []
    last = history(server, agent, made["id"])[-1]
    assert last["status"] == "refused" and "can no longer run" in last["reason"]
    clock.advance(3600)
    assert tick(server) == 0  # stopped: nothing is due


def test_schedules_are_checked_and_patched(server: TestClient, clock: FakeClock) -> None:
    agent = create(server, TRIAGE)
    url = f"{API}/agents/{agent}/triggers"
    bad = {
        "/config/cron": {"cron": "61 * * * *"},
        "/config/every": {"every": 30},
        "/config/timezone": {"cron": "0 9 * * *", "timezone": "Mars/Olympus_Mons"},
    }
    for loc, config in bad.items():
        refused = server.post(url, json={"config": {"type": "schedule", **config}})
        assert refused.status_code == 422, refused.text
        assert refused.json()["errors"][0]["loc"] == loc
    seconds = server.post(url, json={"config": {"type": "schedule", "cron": "0 0 9 * * *"}})
    assert "five fields" in seconds.text
    both = server.post(url, json={"config": {"type": "schedule", "cron": "* * * * *",
                                             "every": 60}})  # fmt: skip
    assert both.status_code == 422
    made = schedule(server, agent, cron="0 9 * * *", timezone=SEOUL)
    path = f"{url}/{made['id']}"
    moved = ok(server.patch(path, json={"config": {"cron": "30 18 * * *"}}))
    assert moved["next_fires"][0] == "2027-01-08T18:30:00+09:00"
    zoned = ok(server.patch(path, json={"config": {"timezone": "UTC"}}))
    assert zoned["next_fires"][0] == "2027-01-08T18:30:00+00:00"
    off = ok(server.patch(path, json={"enabled": False}))
    assert (off["status"], off["next_fires"]) == ("stopped", [])
    clock.set("2027-02-01 00:00")
    assert tick(server) == 0
    on = ok(server.patch(path, json={"enabled": True}))  # from now: nothing missed
    assert on["next_fires"][0] == "2027-02-01T18:30:00+00:00"
    every = schedule(server, agent, every=90)
    start = datetime.fromisoformat(every["next_fires"][0]).timestamp()
    assert start == int(clock.now) + 90
    assert len(every["next_fires"]) == 5


def test_the_servers_loop_starts_the_ticks(settings: Settings, clock: FakeClock) -> None:
    with serve(settings, clock, poll=0.05) as client:
        agent = create(client, TRIAGE)
        schedule(client, agent, every=60)
        clock.advance(61)
        for _ in range(200):
            if runs_of(client, agent):
                break
            time.sleep(0.02)
        [run] = runs_of(client, agent)
        until(client, run["id"], "succeeded", "failed")


@pytest.mark.postgres
def test_two_servers_never_both_start_a_tick(tmp_path: Path, pg_schema: str) -> None:
    """Two servers on one PostgreSQL database pass over the same due ticks at the same
    moments, many times: each tick starts one run and is recorded once."""
    _truncate(pg_schema)
    settings = Settings(data_dir=tmp_path / "data", database_url=pg_url(pg_schema),
                        admin_token=ADMIN_TOKEN)  # fmt: skip
    clocks = [FakeClock("2027-01-08 12:00"), FakeClock("2027-01-08 12:00")]
    steps, schedules = 15, 3
    with serve(settings, clocks[0]) as one, serve(settings, clocks[1]) as two:
        agents = [create(one, {**TRIAGE, "name": f"triage-{n}"}) for n in range(schedules)]
        made = [schedule(one, a, every=60) for a in agents]
        for _ in range(steps):
            for c in clocks:
                c.advance(60)
            together(lambda: tick(one), lambda: tick(two))
        for agent, trigger in zip(agents, made, strict=True):
            events = history(one, agent, trigger["id"])
            runs = runs_of(one, agent)
            assert len(runs) == steps, [e["key"] for e in events]
            assert len({e["key"] for e in events}) == len(events) == steps
            assert {e["run_id"] for e in events} == {r["id"] for r in runs}
            assert all(e["status"] in ("started", "repeated") for e in events)


def together(*calls: Any) -> None:
    """Each call in a thread of its own, released at the same moment."""
    barrier = threading.Barrier(len(calls))
    failures: list[BaseException] = []

    def run(call: Any) -> None:
        barrier.wait()
        try:
            call()
        except BaseException as exc:  # pragma: no cover - reported below
            failures.append(exc)

    threads = [threading.Thread(target=run, args=(c,)) for c in calls]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures, failures


@pytest.mark.postgres
def test_distributed_workers_start_the_ticks(tmp_path: Path, pg_schema: str) -> None:
    """Distributed mode: an API process with no worker starts no ticks; a worker does."""
    _truncate(pg_schema)
    settings = Settings(data_dir=tmp_path / "data", database_url=pg_url(pg_schema),
                        admin_token=ADMIN_TOKEN, execution="distributed",
                        schedule_poll_seconds=0.05)  # fmt: skip
    clock = FakeClock("2027-01-08 12:00")
    with TestClient(create_app(settings, None, clock)) as api:
        api.headers["Authorization"] = f"Bearer {ADMIN_TOKEN}"
        assert api.app.state.runtime.scheduler is None  # type: ignore[attr-defined]
        agent = create(api, TRIAGE)
        schedule(api, agent, every=60)
        clock.advance(61)
        time.sleep(0.3)
        assert runs_of(api, agent) == []

        stop = threading.Event()

        async def work() -> None:  # a worker process, in a thread of its own
            runtime = await open_runtime(settings, WorkerOptions(4))
            runtime.scheduler = scheduler_for(runtime, clock=clock)
            try:
                await runtime.begin()
                await asyncio.to_thread(stop.wait)
            finally:
                await runtime.close()

        worker = threading.Thread(target=asyncio.run, args=(work(),))
        worker.start()
        try:
            for _ in range(300):
                if runs_of(api, agent):
                    break
                time.sleep(0.05)
            [run] = runs_of(api, agent)
            assert until(api, run["id"], "succeeded", "failed")["status"] == "succeeded"
        finally:
            stop.set()
            worker.join(60)
