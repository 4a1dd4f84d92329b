"""Crash recovery for real: `dhub serve` killed with SIGKILL mid-run, started again, and the
run finishes with no saved step executed twice and no event lost or repeated.

The functions count their side effects in files of the host, so these tests run user code with
DHUB_SANDBOX=unsafe (the sandbox would rightly hide the host's files); everything else is the
product as `make run` starts it.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.test_serve import Server

LEASE = "1"  # seconds: how soon a run of the killed server is taken over


def workflow(counts: Path) -> dict[str, Any]:
    def effect(name: str, body: str = "") -> str:
        return (
            "import time\n\ndef main():\n"
            f"    open({str(counts / name)!r} + '.start', 'a').write('x\\n')\n{body}"
            f"    open({str(counts / name)!r} + '.end', 'a').write('x\\n')\n"
            "    return {'" + name + "': True}\n"
        )

    return {
        "name": "crashy", "description": "", "mode": "workflow", "input_mode": "event",
        "nodes": [
            {"id": "start", "type": "start", "config": {}},
            {"id": "first", "type": "code", "config": {"source": effect("first")}},
            {"id": "slow", "type": "code", "config": {
                "source": effect("slow", "    time.sleep(4)\n"), "timeout": 30}},
            {"id": "end", "type": "end", "config": {"outputs": [
                {"name": "done", "type": "boolean", "value": "{{ slow }}"}]}},
        ],
        "edges": [{"source": "start", "target": "first"}, {"source": "first", "target": "slow"},
                  {"source": "slow", "target": "end"}],
    }  # fmt: skip


def lines(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def wait_for(check: Any, seconds: float = 30) -> Any:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError("timed out")


def start(data_dir: Path) -> tuple[Server, httpx.Client]:
    server = Server(data_dir, DHUB_SANDBOX="unsafe", DHUB_RUN_LEASE_SECONDS=LEASE)
    token = (data_dir / "admin.token").read_text().strip()
    http = httpx.Client(base_url=f"{server.url}/api/v1", timeout=10)
    http.headers["Authorization"] = f"Bearer {token}"
    return server, http


def kill(server: Server, http: httpx.Client) -> None:
    server.proc.kill()  # SIGKILL: no shutdown of any kind
    server.proc.wait()
    http.close()


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


def test_a_run_killed_mid_step_finishes_after_restart(data_dir: Path, tmp_path: Path) -> None:
    counts = tmp_path / "counts"
    counts.mkdir()
    server, http = start(data_dir)
    try:
        agent = http.post("/agents", json=workflow(counts)).json()["id"]
        run = http.post(f"/agents/{agent}/runs", json={"inputs": {}}).json()["id"]
        wait_for(lambda: lines(counts / "slow.start") == 1)  # the slow step is in flight
    finally:
        kill(server, http)
    server, http = start(data_dir)
    try:
        done = wait_for(
            lambda: (
                (r := http.get(f"/runs/{run}").json())["status"] in ("succeeded", "failed") and r
            )
        )
        assert done["status"] == "succeeded", done
        assert done["outputs"] == {"done": True}
        events = http.get(f"/runs/{run}/events").json()["data"]
    finally:
        server.stop()
        http.close()
    assert lines(counts / "first.start") == lines(counts / "first.end") == 1  # saved: once
    assert lines(counts / "slow.start") == 2  # in flight at the kill: run again
    assert lines(counts / "slow.end") == 1  # and finished once
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    succeeded = [e["node_id"] for e in events if e["type"] == "node.succeeded"]
    assert succeeded == ["start", "first", "slow", "end"]  # none twice, none lost


def test_an_input_timeout_that_expired_while_down_applies_after_restart(
    data_dir: Path,
) -> None:
    doc = {
        "name": "ask", "description": "", "mode": "workflow", "input_mode": "event",
        "nodes": [
            {"id": "start", "type": "start", "config": {}},
            {"id": "ask", "type": "human_input", "config": {
                "prompt": "Ship it?", "timeout": 2, "on_timeout": "default",
                "input_fields": [{"name": "ship", "type": "boolean", "required": True,
                                  "default": False}]}},
            {"id": "end", "type": "end", "config": {"outputs": [
                {"name": "ship", "type": "boolean", "value": "{{ ship }}"}]}},
        ],
        "edges": [{"source": "start", "target": "ask"}, {"source": "ask", "target": "end"}],
    }  # fmt: skip
    server, http = start(data_dir)
    try:
        agent = http.post("/agents", json=doc).json()["id"]
        run = http.post(f"/agents/{agent}/runs", json={"inputs": {}}).json()["id"]
        wait_for(lambda: http.get(f"/runs/{run}").json()["status"] == "waiting")
    finally:
        kill(server, http)
    time.sleep(3)  # the input's timeout passes while no server runs
    server, http = start(data_dir)
    try:
        done = wait_for(
            lambda: (
                (r := http.get(f"/runs/{run}").json())["status"] in ("succeeded", "failed") and r
            )
        )
    finally:
        server.stop()
        http.close()
    assert (done["status"], done["outputs"]) == ("succeeded", {"ship": False})
