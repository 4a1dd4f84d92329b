"""Distributed mode as an operator runs it, against the real PostgreSQL: one `dhub serve
--no-worker` and two `dhub worker` processes. Fifty runs of the offline fixtures (human input
answered through the API) all finish right; a worker killed with SIGKILL mid-run leaves its
runs to the other, with no step effect run twice and no event lost or repeated, in the log or
in an SSE stream that followed a run across the kill.

The functions count their side effects in files of the host, so user code runs with
DHUB_SANDBOX=unsafe (the sandbox would rightly hide the host's files).
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import ADMIN_TOKEN, FIXTURES, _truncate, load_json, pg_url
from tests.e2e.test_serve import DHUB, Server

pytestmark = pytest.mark.postgres

# Renamed: the examples the API process loads hold agents of the same names.
TRIAGE = {**load_json(FIXTURES / "valid" / "workflow_triage.json"), "name": "triage-e2e"}
BATCH = {**load_json(FIXTURES / "valid" / "workflow_batch.json"), "name": "batch-e2e"}
LEASE = "2"  # seconds: how soon the runs of a killed worker are taken over


class Cluster:
    """An API process and its workers, sharing a fresh PostgreSQL schema."""

    def __init__(self, tmp: Path, schema: str, **extra_env: str) -> None:
        _truncate(schema)
        self.tmp = tmp
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("DHUB_")} | {
            "DHUB_EXECUTION": "distributed", "DHUB_DATABASE_URL": pg_url(schema),
            "DHUB_ADMIN_TOKEN": ADMIN_TOKEN, "DHUB_SANDBOX": "unsafe",
            "DHUB_RUN_LEASE_SECONDS": LEASE, "DHUB_DATA_DIR": str(tmp / "data"), **extra_env,
        }  # fmt: skip
        self.api = Server(tmp / "data", extra_args=["--no-worker"], **self.env)
        self.workers: list[subprocess.Popen[bytes]] = []
        self.http = httpx.Client(base_url=f"{self.api.url}/api/v1", timeout=30)
        self.http.headers["Authorization"] = f"Bearer {ADMIN_TOKEN}"

    def add_worker(self) -> subprocess.Popen[bytes]:
        with (self.tmp / f"worker-{len(self.workers)}.log").open("w") as log:
            proc = subprocess.Popen(
                [DHUB, "worker", "--concurrency", "50"], stdout=log, stderr=subprocess.STDOUT,
                env=self.env, cwd=self.tmp,
            )  # fmt: skip
        self.workers.append(proc)
        count = len([w for w in self.workers if w.poll() is None])
        wait_for(lambda: len(self.http.get("/workers").json()["data"]) >= count, 30)
        return proc

    def close(self) -> None:
        for proc in self.workers:
            if proc.poll() is None:
                proc.terminate()
        for proc in self.workers:
            proc.wait(timeout=20)
        self.api.stop()
        self.http.close()

    def finished(self, run_id: str) -> dict[str, Any]:
        return dict(
            wait_for(
                lambda: (
                    (r := self.http.get(f"/runs/{run_id}").json())["status"]
                    in ("succeeded", "failed", "cancelled")
                    and r
                ),
                90,
            )
        )


def wait_for(check: Any, seconds: float = 60) -> Any:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if found := check():
            return found
        time.sleep(0.05)
    raise AssertionError("timed out")


@pytest.fixture
def cluster(tmp_path: Path, pg_schema: str) -> Iterator[Cluster]:
    cluster = Cluster(tmp_path, pg_schema)
    try:
        yield cluster
    finally:
        cluster.close()


def test_fifty_runs_with_human_input_finish_across_two_workers(cluster: Cluster) -> None:
    cluster.add_worker()
    cluster.add_worker()
    http = cluster.http
    triage = http.post("/agents", json=TRIAGE).json()["id"]
    batch = http.post("/agents", json=BATCH).json()["id"]
    expected: dict[str, dict[str, Any]] = {}
    for i in range(50):
        if i % 3 == 0:
            body = {"inputs": {"numbers": [1, 2, i]}}
            run = http.post(f"/agents/{batch}/runs", json=body).json()["id"]
            report = f"#0: 1\n#1: 4\n#2: {i * i}\n"
            expected[run] = {"total": 5 + i * i, "report": report, "checked": False}
        elif i % 3 == 1:
            body = {"inputs": {"ticket": f"Checkout error {i}", "customer": f"c{i}"}}
            run = http.post(f"/agents/{triage}/runs", json=body).json()["id"]
            expected[run] = {"category": "bug", "summary": f"bug from c{i}"}
        else:  # urgent: waits for a person, answered below
            body = {"inputs": {"ticket": f"Total outage {i}", "customer": f"c{i}"}}
            run = http.post(f"/agents/{triage}/runs", json=body).json()["id"]
            expected[run] = {"category": "bug", "summary": f"URGENT bug from c{i}; escalate=True"}
    urgent = {r for r, out in expected.items() if "URGENT" in str(out.get("summary"))}
    answered: set[str] = set()

    def answer_tasks() -> bool:
        for task in http.get("/tasks", params={"limit": 100}).json()["data"]:
            if task["run_id"] not in answered:
                path = f"/runs/{task['run_id']}/inputs/{task['node_id']}"
                assert http.post(path, json={"values": {"escalate": True}}).status_code == 202
                answered.add(task["run_id"])
        return answered == urgent

    wait_for(answer_tasks, 90)
    outputs = {run: cluster.finished(run)["outputs"] for run in expected}
    assert outputs == expected
    workers = http.get("/workers").json()["data"]
    assert len(workers) == 2 and all(w["alive"] for w in workers)


def counting(counts: Path) -> dict[str, Any]:
    """first (fast) then slow (3 s): each writes a line per start and per end, by tag."""

    def effect(name: str, body: str = "") -> str:
        path = repr(str(counts)) + f" + '/' + tag + '.{name}'"
        return (
            "import time\n\ndef main(tag):\n"
            f"    open({path} + '.start', 'a').write('x\\n')\n{body}"
            f"    open({path} + '.end', 'a').write('x\\n')\n"
            "    return {'" + name + "': True}\n"
        )

    return {
        "name": "counted", "description": "", "mode": "workflow", "input_mode": "event",
        "nodes": [
            {"id": "start", "type": "start", "config": {"variables": [
                {"name": "tag", "type": "string"}]}},
            {"id": "first", "type": "code", "config": {
                "source": effect("first"), "input_mappings": {"tag": "{{ tag }}"}}},
            {"id": "slow", "type": "code", "config": {
                "source": effect("slow", "    time.sleep(3)\n"), "timeout": 30,
                "input_mappings": {"tag": "{{ tag }}"}}},
            {"id": "end", "type": "end", "config": {"outputs": [
                {"name": "done", "type": "boolean", "value": "{{ slow }}"}]}},
        ],
        "edges": [{"source": "start", "target": "first"}, {"source": "first", "target": "slow"},
                  {"source": "slow", "target": "end"}],
    }  # fmt: skip


def lines(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def follow(url: str, run_id: str, into: list[dict[str, Any]]) -> None:
    """An SSE client reading a run's events until the stream ends (the run ended)."""
    headers = {"Authorization": f"Bearer {ADMIN_TOKEN}", "Accept": "text/event-stream"}
    with (
        httpx.Client(timeout=120) as http,
        http.stream("GET", f"{url}/api/v1/runs/{run_id}/events", headers=headers) as stream,
    ):
        for line in stream.iter_lines():
            if line.startswith("data: "):
                into.append(json.loads(line[6:]))


def test_a_killed_worker_leaves_its_runs_to_the_other(cluster: Cluster, tmp_path: Path) -> None:
    counts = tmp_path / "counts"
    counts.mkdir()
    doomed = cluster.add_worker()
    http = cluster.http
    agent = http.post("/agents", json=counting(counts)).json()["id"]
    tags = [f"t{i}" for i in range(10)]
    runs = {t: http.post(f"/agents/{agent}/runs", json={"inputs": {"tag": t}}).json()["id"]
            for t in tags}  # fmt: skip
    streamed: list[dict[str, Any]] = []
    watcher = threading.Thread(target=follow, args=(cluster.api.url, runs["t0"], streamed))
    watcher.start()
    # Every slow step is in flight on the one worker, which dies; another starts.
    wait_for(lambda: all(lines(counts / f"{t}.slow.start") == 1 for t in tags), 60)
    doomed.kill()  # SIGKILL: no goodbye, its leases lapse
    doomed.wait()
    assert not any(lines(counts / f"{t}.slow.end") for t in tags)  # killed mid-step
    cluster.add_worker()
    done = {t: cluster.finished(run) for t, run in runs.items()}
    watcher.join(60)
    assert {t: (d["status"], d["outputs"]) for t, d in done.items()} == {
        t: ("succeeded", {"done": True}) for t in tags
    }
    for t in tags:
        assert lines(counts / f"{t}.first.start") == lines(counts / f"{t}.first.end") == 1
        assert lines(counts / f"{t}.slow.start") == 2  # in flight at the kill: run again
        assert lines(counts / f"{t}.slow.end") == 1  # and finished once
        events = http.get(f"/runs/{runs[t]}/events", params={"limit": 1000}).json()["data"]
        assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
        succeeded = [e["node_id"] for e in events if e["type"] == "node.succeeded"]
        assert succeeded == ["start", "first", "slow", "end"]  # none twice, none lost
        if t == "t0":
            assert [e["seq"] for e in streamed] == [e["seq"] for e in events]


def test_a_stopped_worker_hands_its_runs_back(cluster: Cluster, tmp_path: Path) -> None:
    """SIGTERM: the worker stops taking jobs, lets the call under way finish and saves it,
    and hands its run back to the queue at once (no lease to wait out); the next worker
    finishes it, nothing done twice."""
    counts = tmp_path / "counts"
    counts.mkdir()
    leaving = cluster.add_worker()
    http = cluster.http
    agent = http.post("/agents", json=counting(counts)).json()["id"]
    run = http.post(f"/agents/{agent}/runs", json={"inputs": {"tag": "t"}}).json()["id"]
    wait_for(lambda: lines(counts / "t.slow.start") == 1, 60)
    leaving.terminate()
    assert leaving.wait(timeout=20) == 0
    cluster.add_worker()
    assert cluster.finished(run)["outputs"] == {"done": True}
    assert lines(counts / "t.slow.start") == lines(counts / "t.slow.end") == 1
