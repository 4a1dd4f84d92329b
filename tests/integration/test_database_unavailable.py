"""A database that takes no connections (PostgreSQL at its connection limit) gets a 503 with
Retry-After and a one-line warning in the log, not a 500 with a traceback; the server keeps
running and answers again, with nothing lost, once connections are taken again. Found by
bench/scale.py: with the default max_connections (100), an API process and two busy workers
can open more than that, and a client read 500s for "too many clients"."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from fastapi.testclient import TestClient

from dhub.api.app import create_app
from dhub.settings import Settings
from tests.conftest import ADMIN_TOKEN, PG_URL

pytestmark = pytest.mark.postgres

API = "/api/v1"
AGENT = {
    "name": "still-here", "description": "", "mode": "workflow", "input_mode": "event",
    "nodes": [{"id": "start", "type": "start", "config": {}},
              {"id": "end", "type": "end", "config": {}}],
    "edges": [{"source": "start", "target": "end"}],
}  # fmt: skip


def admin(sql: str) -> None:
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(sql)


@pytest.fixture
def role() -> Iterator[str]:
    """A login role of its own owning a fresh schema: its connection limit is ours to set."""
    name = f"dhub_limited_{uuid.uuid4().hex[:8]}"
    admin(f'CREATE ROLE "{name}" LOGIN')
    admin(f'CREATE SCHEMA "{name}" AUTHORIZATION "{name}"')
    try:
        yield name
    finally:
        admin(f'ALTER ROLE "{name}" CONNECTION LIMIT -1')
        admin(f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '{name}'")
        admin(f'DROP SCHEMA "{name}" CASCADE')
        admin(f'DROP ROLE "{name}"')


def refuse_connections(role: str) -> None:
    """No new connection for ``role`` (SQLSTATE 53300, as at max_connections), and the ones
    its pools hold are cut."""
    admin(f'ALTER ROLE "{role}" CONNECTION LIMIT 0')
    admin(f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '{role}'")


def test_no_connection_is_a_503_to_retry_and_the_server_recovers(
    role: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    base = PG_URL.replace("postgres@", f"{role}@", 1)
    url = f"{base}{'&' if '?' in base else '?'}options=-csearch_path%3D{role}"
    settings = Settings(data_dir=tmp_path / "data", database_url=url, admin_token=ADMIN_TOKEN)
    with TestClient(create_app(settings)) as client:
        client.headers["Authorization"] = f"Bearer {ADMIN_TOKEN}"
        made = client.post(f"{API}/agents", json=AGENT)
        assert made.status_code == 201, made.text
        agent = made.json()["id"]

        refuse_connections(role)
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="dhub.api"):
            for method, path, body in (
                ("GET", f"{API}/agents", None),
                ("POST", f"{API}/agents/{agent}/runs", {"inputs": {}}),
            ):
                got = client.request(method, path, json=body)
                assert got.status_code == 503, (path, got.status_code, got.text)
                assert got.headers["Retry-After"] == "1"
                assert got.json() == {
                    "detail": "The database is not taking connections right now; try again "
                    "in a moment.",
                    "errors": [],
                }
            openai = client.get("/v1/models")  # the OpenAI-compatible API answers in its shape
            assert openai.status_code == 503
            assert openai.json()["error"]["type"] == "server_error"
        api_records = [r for r in caplog.records if r.name == "dhub.api"]
        assert api_records and all(r.levelno == logging.WARNING for r in api_records)
        assert all(r.exc_info is None for r in api_records)  # no traceback: one line each
        assert "too many connections" in api_records[0].getMessage()

        admin(f'ALTER ROLE "{role}" CONNECTION LIMIT -1')
        listed = client.get(f"{API}/agents", params={"limit": 200})
        assert listed.status_code == 200
        assert agent in [a["id"] for a in listed.json()["data"]]
