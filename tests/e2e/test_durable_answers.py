"""An acknowledged answer is never lost, for real: `dhub serve` (embedded, on SQLite and on
PostgreSQL) is killed with SIGKILL right after it answered 202 to a form's answer and an actor
call's approval (at once, or a few random milliseconds later), then started again. Each time,
each run goes on with exactly its answer: the task is never listed again, the outputs hold
the answered value, and the event log records the answer once.

The iterations share one server process each: the restarted server is the next one's (a
start costs seconds, so one kill serves both kinds of answer)."""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import ADMIN_TOKEN, _truncate, pg_url
from tests.e2e.test_serve import Server
from tests.integration.test_durable_answers import ASK
from tests.integration.test_runs_api import REFUND

# Each iteration is a SIGKILL and a restart (seconds); the kill's moment is random in each.
ITERATIONS = 6
LEASE = "1"  # seconds: how soon a run the killed server held is taken over
FINISHED = ("succeeded", "failed", "cancelled")


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database(request: pytest.FixtureRequest) -> dict[str, str]:
    """The server's database settings: its data directory's SQLite file, or a PostgreSQL
    schema of its own."""
    if request.param == "sqlite":
        return {}
    schema = request.getfixturevalue("pg_schema")
    _truncate(schema)
    return {"DHUB_DATABASE_URL": pg_url(schema)}


class Served:
    """One `dhub serve` at a time on a data directory: killed and started again."""

    def __init__(self, data_dir: Path, database: dict[str, str]) -> None:
        self.data_dir = data_dir
        self.env = {"DHUB_ADMIN_TOKEN": ADMIN_TOKEN, "DHUB_RUN_LEASE_SECONDS": LEASE, **database}
        self.server, self.http = self._start()

    def _start(self) -> tuple[Server, httpx.Client]:
        server = Server(self.data_dir, **self.env)
        http = httpx.Client(base_url=f"{server.url}/api/v1", timeout=30)
        http.headers["Authorization"] = f"Bearer {ADMIN_TOKEN}"
        return server, http

    def crash_and_restart(self) -> None:
        self.server.proc.kill()  # SIGKILL: no shutdown of any kind
        self.server.proc.wait()
        self.http.close()
        self.server, self.http = self._start()

    def close(self) -> None:
        self.server.stop()
        self.http.close()

    def log(self) -> str:
        return self.server.log.read_text()


def wait_for(check: Callable[[], Any], seconds: float = 30) -> Any:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.02)
    raise AssertionError("timed out")


def waiting(http: httpx.Client, run_id: str) -> dict[str, Any]:
    def check() -> dict[str, Any] | None:
        run: dict[str, Any] = http.get(f"/runs/{run_id}").json()
        assert run["status"] not in FINISHED, run
        return run if run["status"] == "waiting" else None

    found: dict[str, Any] = wait_for(check)
    return found


def finished_without_asking_again(http: httpx.Client, run_id: str) -> dict[str, Any]:
    """Poll the run until it ends; all the while, no task of it is listed."""

    def check() -> dict[str, Any] | None:
        tasks = http.get("/tasks").json()["data"]
        assert [t for t in tasks if t["run_id"] == run_id] == [], "the task reopened"
        run: dict[str, Any] = http.get(f"/runs/{run_id}").json()
        return run if run["status"] in FINISHED else None

    found: dict[str, Any] = wait_for(check)
    return found


def events(http: httpx.Client, run_id: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = http.get(f"/runs/{run_id}/events", params={"limit": 1000}).json()[
        "data"
    ]
    assert [e["seq"] for e in found] == list(range(1, len(found) + 1))
    return found


@pytest.fixture
def served(tmp_path: Path, database: dict[str, str]) -> Any:
    server = Served(tmp_path / "data", database)
    try:
        yield server
    finally:
        server.close()


def answer_form(http: httpx.Client, run_id: str, i: int) -> tuple[httpx.Response, Any]:
    choice = f"choice-{i}-{uuid.uuid4().hex[:8]}"
    return http.post(f"/runs/{run_id}/inputs/ask", json={"values": {"choice": choice}}), choice


def approve_call(http: httpx.Client, run_id: str, i: int) -> tuple[httpx.Response, Any]:
    [task] = [t for t in http.get("/tasks").json()["data"] if t["run_id"] == run_id]
    amount = 100 * (i + 1) + random.randrange(100)
    body = {"approve": True, "arguments": {"amount": amount}}
    return http.post(f"/runs/{run_id}/confirmations/{task['command_id']}", json=body), amount


def check_form(done: dict[str, Any], log: list[dict[str, Any]], choice: Any) -> None:
    assert (done["status"], done["outputs"]) == ("succeeded", {"choice": choice}), done
    assert [e["type"] for e in log].count("input.received") == 1
    assert [e["node_id"] for e in log if e["type"] == "node.succeeded"].count("ask") == 1


def check_call(done: dict[str, Any], log: list[dict[str, Any]], amount: Any) -> None:
    """The call ran with the edited arguments (maybe twice, if the kill caught it in flight:
    calls are performed at least once); the approval is recorded once."""
    assert (done["status"], done["outputs"]) == ("succeeded", {"paid": amount}), done
    assert [e["type"] for e in log].count("confirmation.received") == 1
    assert [e["node_id"] for e in log if e["type"] == "node.succeeded"].count("pay") == 1


def test_answers_acknowledged_before_a_sigkill_are_never_lost(served: Served) -> None:
    """ITERATIONS times: a form and an actor call wait for a person; both are answered (the
    call approved with edited arguments), in turn first; the server is killed right after
    the second 202, or a few random milliseconds later, and started again. Both runs go on
    with exactly their answers, and neither task is listed again."""
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    form = served.http.post("/agents", json=ASK).json()["id"]
    refund = served.http.post("/agents", json=REFUND).json()["id"]
    for i in range(ITERATIONS):
        runs = [
            (start(served.http, form, {}), answer_form, check_form),
            (start(served.http, refund, {"amount": 1}), approve_call, check_call),
        ]
        if i % 2:
            runs.reverse()
        expected = []
        for run_id, answer, _ in runs:
            waiting(served.http, run_id)
            response, value = answer(served.http, run_id, i)
            assert response.status_code == 202, response.text
            expected.append(value)
        delay = 0.0 if i % 3 == 0 else rng.uniform(0, 0.05)
        if delay:
            time.sleep(delay)
        served.crash_and_restart()
        for (run_id, _, check), value in zip(runs, expected, strict=True):
            try:
                check(finished_without_asking_again(served.http, run_id),
                      events(served.http, run_id), value)  # fmt: skip
            except AssertionError as exc:
                raise AssertionError(
                    f"iteration {i} (seed {seed}, killed {delay * 1000:.1f} ms after the "
                    f"last 202), run {run_id}: {exc}\n{served.log()}"
                ) from exc


def start(http: httpx.Client, agent_id: str, inputs: dict[str, Any]) -> str:
    run = http.post(f"/agents/{agent_id}/runs", json={"inputs": inputs})
    assert run.status_code == 202, run.text
    return str(run.json()["id"])
