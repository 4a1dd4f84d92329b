"""Admission in the embedded server (issue 23), on SQLite and PostgreSQL: with
``DHUB_MAX_ACTIVE_RUNS`` = 2, a burst of one user's runs executes two at a time, and a run
another user starts meanwhile goes before the rest of the burst; a run cancelled while it
waits its turn is cancelled at once."""

from __future__ import annotations

import itertools
from typing import Any

from fastapi.testclient import TestClient

from dhub.api.app import create_app
from dhub.settings import Settings
from tests.conftest import ADMIN_TOKEN
from tests.integration.test_runs_api import API, TRIAGE, create, ok, until, user

SLOW = {
    "name": "slow", "description": "Takes a moment.", "mode": "workflow", "input_mode": "event",
    "nodes": [
        {"id": "start", "type": "start", "config": {}},
        {"id": "wait", "type": "code", "config": {
            "language": "python", "timeout": 30, "dependencies": [], "input_mappings": {},
            "outputs": {"done": {"type": "boolean"}},
            "source": "import time\n\ndef main():\n    time.sleep(0.4)\n"
                      "    return {'done': True}\n",
        }},
        {"id": "end", "type": "end", "config": {}},
    ],
    "edges": [{"source": "start", "target": "wait"}, {"source": "wait", "target": "end"}],
}  # fmt: skip


def _start(client: TestClient, agent_id: str, **headers: str) -> str:
    return str(ok(client.post(f"{API}/agents/{agent_id}/runs", json={"inputs": {}},
                              headers=headers), 202)["id"])  # fmt: skip


def test_a_burst_runs_two_at_a_time_and_another_users_run_takes_its_turn(
    settings: Settings,
) -> None:
    limited = Settings(**{**vars(settings), "max_active_runs": 2})
    with TestClient(create_app(limited)) as client:
        client.headers["Authorization"] = f"Bearer {ADMIN_TOKEN}"
        agent_id = create(client, SLOW)
        bob = user(client, "bob")
        grant = {"principal_id": bob["id"], "scope": "runner"}
        ok(client.post(f"{API}/agents/{agent_id}/grants", json=grant), 201)
        burst = [_start(client, agent_id) for _ in range(5)]
        bobs = _start(client, agent_id, Authorization=bob["Authorization"])
        runs = [until(client, run_id, "succeeded", "failed") for run_id in [*burst, bobs]]
    assert {r["status"] for r in runs} == {"succeeded"}
    assert _most_at_once(runs) <= 2
    started = sorted(runs, key=lambda r: r["started_at"])
    order = [r["id"] for r in started]
    # Bob's run, started last, goes before the burst's last ones (one run per user per turn).
    assert order.index(bobs) < order.index(burst[4]) and order.index(bobs) < order.index(burst[3])
    assert [i for i in order if i != bobs] == burst  # the burst in the order it came


def test_a_run_cancelled_while_it_waits_its_turn_is_cancelled_at_once(settings: Settings) -> None:
    limited = Settings(**{**vars(settings), "max_active_runs": 1})
    with TestClient(create_app(limited)) as client:
        client.headers["Authorization"] = f"Bearer {ADMIN_TOKEN}"
        agent_id = create(client, SLOW)
        first, second = _start(client, agent_id), _start(client, agent_id)
        assert ok(client.get(f"{API}/runs/{second}"))["status"] == "queued"  # waiting its turn
        cancelled = ok(client.post(f"{API}/runs/{second}/cancel"))
        assert cancelled["status"] == "cancelled"
        assert ok(client.get(f"{API}/runs/{first}"))["status"] in ("queued", "running")
        assert until(client, first, "succeeded", "failed")["status"] == "succeeded"


def _most_at_once(runs: list[dict[str, Any]]) -> int:
    """The most runs executing at one moment, from their started and finished times."""
    edges = sorted([(r["started_at"], 1) for r in runs] + [(r["finished_at"], -1) for r in runs],
                   key=lambda e: (e[0], e[1]))  # fmt: skip
    most = now = 0
    for _, change in edges:
        now += change
        most = max(most, now)
    return most


def test_an_answer_for_a_run_waiting_its_turn_is_taken_at_once(settings: Settings) -> None:
    limited = Settings(**{**vars(settings), "max_active_runs": 1})
    slower = {**SLOW, "name": "slower"}
    slower["nodes"] = [*SLOW["nodes"][:1], *[{**SLOW["nodes"][1], "id": f"w{i}"}
                       for i in range(6)], SLOW["nodes"][-1]]  # fmt: skip
    ids = [n["id"] for n in slower["nodes"]]
    slower["edges"] = [{"source": a, "target": b} for a, b in itertools.pairwise(ids)]
    with TestClient(create_app(limited)) as client:
        client.headers["Authorization"] = f"Bearer {ADMIN_TOKEN}"
        triage, slow = create(client, TRIAGE), create(client, slower)
        body = {"inputs": {"ticket": "Total outage since 9am", "customer": "acme"}}
        asking = ok(client.post(f"{API}/agents/{triage}/runs", json=body), 202)["id"]
        until(client, asking, "waiting")
        busy = _start(client, slow)  # waits its turn until the asking run parks (5 s)
        until(client, busy, "running")
        answer = {"values": {"escalate": True}}
        # Woken by the answer, the asking run waits its turn behind the busy one; the answer
        # is taken (saved in its inbox) without waiting for that.
        ok(client.post(f"{API}/runs/{asking}/inputs/approve", json=answer), 202)
        assert ok(client.get(f"{API}/runs/{busy}"))["status"] == "running"
        assert until(client, asking, "succeeded", "failed")["status"] == "succeeded"
        assert until(client, busy, "succeeded", "failed")["status"] == "succeeded"
