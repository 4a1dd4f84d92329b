"""The data directory and its files are private to the server's user: the directory 0700, the
SQLite database (with its -wal and -shm files), admin.token and secret.key 0600, whether the
server created them or found them with looser modes (it tightens them on start;
docs/deploy.md)."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from dhub.api.app import create_app
from dhub.settings import Settings

PRIVATE_FILES = ("dhub.db", "dhub.db-wal", "dhub.db-shm", "admin.token", "secret.key")


@pytest.fixture(autouse=True)
def _usual_umask() -> Iterator[None]:
    """What most machines have: new files 0644 and directories 0755 unless asked otherwise."""
    previous = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(previous)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def start(data: Path) -> TestClient:
    """A server on ``data`` with no DHUB_ADMIN_TOKEN, so it writes admin.token there."""
    return TestClient(create_app(Settings(data_dir=data, database_url=f"sqlite:///{data}/dhub.db")))


def modes(data: Path) -> dict[str, int]:
    return {name: mode(data / name) for name in PRIVATE_FILES} | {".": mode(data)}


EXPECTED = {name: 0o600 for name in PRIVATE_FILES} | {".": 0o700}


def test_a_new_data_directory_is_private(tmp_path: Path) -> None:
    data = tmp_path / "new" / "data"
    with start(data) as client:
        client.get("/healthz")  # the database is open: its -wal and -shm files exist
        assert modes(data) == EXPECTED


def test_looser_modes_are_tightened_on_start(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with start(data) as client:
        client.get("/healthz")
        for name in PRIVATE_FILES:  # as an older version, or a careless copy, left them
            os.chmod(data / name, 0o644)
        os.chmod(data, 0o775)
        (data / "tool.sh").write_text("echo hi\n")
        os.chmod(data / "tool.sh", 0o755)
    os.chmod(data / "dhub.db", 0o666)
    with start(data) as client:
        assert client.get("/healthz").status_code == 200
        assert modes(data) == EXPECTED
        # What the server did not write is left alone (inside a directory only its owner
        # can enter): a data directory pointed at the wrong folder loses no executable bit.
        assert mode(data / "tool.sh") == 0o755


def test_a_database_outside_the_data_directory_is_private_too(tmp_path: Path) -> None:
    elsewhere = tmp_path / "db" / "main.db"
    settings = Settings(data_dir=tmp_path / "data", database_url=f"sqlite:///{elsewhere}")
    with TestClient(create_app(settings)) as client:
        client.get("/healthz")
        for name in ("main.db", "main.db-wal", "main.db-shm"):
            assert mode(elsewhere.parent / name) == 0o600, name
        assert mode(elsewhere.parent) == 0o700
