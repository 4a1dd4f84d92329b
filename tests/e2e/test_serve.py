"""`dhub serve` as a real process on a fresh data directory, as `make run` starts it."""

from __future__ import annotations

import os
import socket
import stat
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[2]
DHUB = Path(sys.executable).parent / "dhub"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class Server:
    def __init__(self, data_dir: Path, extra_args: Sequence[str] = (), **extra_env: str) -> None:
        self.data_dir = data_dir
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {k: v for k, v in os.environ.items() if not k.startswith("DHUB_")} | extra_env
        self.log = data_dir.parent / f"serve-{self.port}.log"
        with self.log.open("w") as out:
            self.proc = subprocess.Popen(
                [DHUB, "serve", "--port", str(self.port), "--data-dir", str(data_dir),
                 "--examples", str(ROOT / "examples"), *extra_args],
                stdout=out, stderr=subprocess.STDOUT, env=env, cwd=data_dir.parent,
            )  # fmt: skip
        self._wait()

    def _wait(self) -> None:
        # Generous: under pytest-xdist on 2 cores, start-up (migrations, the sandbox check,
        # the examples) shares the machine with the other worker's servers and sandboxes.
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"dhub serve exited:\n{self.log.read_text()}")
            try:
                if httpx.get(f"{self.url}/healthz", timeout=1).status_code == 200:
                    return
            except httpx.TransportError:
                time.sleep(0.1)
        self.proc.kill()
        self.proc.wait()
        raise AssertionError(f"dhub serve did not start:\n{self.log.read_text()}")

    def stop(self) -> str:
        self.proc.terminate()
        self.proc.wait(timeout=15)
        return self.log.read_text()


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


def test_fresh_start_creates_admin_token_and_loads_examples(data_dir: Path) -> None:
    server = Server(data_dir)
    try:
        token_file = data_dir / "admin.token"
        token = token_file.read_text().strip()
        assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
        headers = {"Authorization": f"Bearer {token}"}
        names = {
            a["name"]
            for a in httpx.get(f"{server.url}/api/v1/agents", headers=headers).json()["data"]
        }
        assert {"ticket-triage", "batch-scores"} <= names
        assert any(
            a["mode"] == "react"
            for a in httpx.get(f"{server.url}/api/v1/agents", headers=headers).json()["data"]
        )
        assert httpx.get(f"{server.url}/api/v1/agents").status_code == 401
    finally:
        first_log = server.stop()
    assert first_log.count(token) == 1  # printed once

    again = Server(data_dir)  # a restart neither prints a token nor reloads the examples
    try:
        listed = httpx.get(f"{again.url}/api/v1/agents", headers=headers).json()["data"]
        assert len(listed) == len(names)
    finally:
        second_log = again.stop()
    assert token not in second_log
    assert (data_dir / "dhub.db").exists()


def test_admin_token_from_the_environment(data_dir: Path) -> None:
    server = Server(data_dir, DHUB_ADMIN_TOKEN="dhub_e2e_given")
    try:
        headers = {"Authorization": "Bearer dhub_e2e_given"}
        listed = httpx.get(f"{server.url}/api/v1/agents", headers=headers)
        assert listed.status_code == 200
        assert len(listed.json()["data"]) >= 3  # a fresh directory still gets the examples
    finally:
        log = server.stop()
    assert not (data_dir / "admin.token").exists()
    assert "dhub_e2e_given" not in log
