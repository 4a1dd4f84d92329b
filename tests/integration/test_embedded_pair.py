"""Two embedded servers on one PostgreSQL database (issue 23): a run executes on the server
that started it, and an event stream opened on the other follows it as its steps are saved,
not at the stream's keep-alive (each step commit NOTIFYs; each server LISTENs)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from dhub.api.app import create_app
from dhub.settings import Settings
from tests.conftest import ADMIN_TOKEN, _truncate, pg_url
from tests.integration.test_runs_api import API, TRIAGE, create, ok, sse, until

pytestmark = pytest.mark.postgres


@pytest.fixture
def pg_settings(pg_schema: str, tmp_path: Path) -> Settings:
    _truncate(pg_schema)
    return Settings(data_dir=tmp_path / "a", database_url=pg_url(pg_schema),
                    admin_token=ADMIN_TOKEN)  # fmt: skip


def test_a_stream_on_one_server_follows_a_run_executing_on_the_other(
    pg_settings: Settings, tmp_path: Path
) -> None:
    other = Settings(**{**vars(pg_settings), "data_dir": tmp_path / "b"})
    with TestClient(create_app(pg_settings)) as a, TestClient(create_app(other)) as b:
        for client in (a, b):
            client.headers["Authorization"] = f"Bearer {ADMIN_TOKEN}"
        b.app.state.services.runs.keepalive = 600  # type: ignore[attr-defined]
        triage = create(a, TRIAGE)
        body = {"inputs": {"ticket": "Total outage since 9am", "customer": "acme"}}
        run = ok(a.post(f"{API}/agents/{triage}/runs", json=body), 202)
        until(a, run["id"], "waiting")
        url = f"{API}/runs/{run['id']}/events"
        seen: list[dict[str, Any]] = []
        followed = threading.Thread(target=lambda: seen.extend(sse(b, url)), daemon=True)
        followed.start()  # on b, which does not execute the run
        answer = {"values": {"escalate": True}}
        ok(a.post(f"{API}/runs/{run['id']}/inputs/approve", json=answer), 202)
        followed.join(60)  # its keep-alive is 600 s: only a notification wakes it sooner
        assert not followed.is_alive(), "the stream on the other server did not follow"
        stored = ok(b.get(url))["data"]
    assert seen == stored and seen[-1]["type"] == "run.succeeded"
