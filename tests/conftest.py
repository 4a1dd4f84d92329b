"""Shared fixtures: a running app on SQLite or PostgreSQL, and the shared fixture documents.

Real network calls are blocked (tests/support/netguard.py): a TCP connection or a name lookup
for anything but this machine raises ``NetworkBlocked``; ``@pytest.mark.allow_network`` lifts
that for one test. Model providers are faked by local servers that speak their wire protocols
(tests/support/wire, fixtures ``openai_server``, ``openai_compatible_server``,
``anthropic_server``; docs/testing.md).

PostgreSQL tests use DHUB_TEST_POSTGRES_URL (default: the local server, database ``test``) in a
schema of their own. Outside CI they are skipped when the server is unreachable; in CI
(CI=true) that is a failure, so CI never passes without running them.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
import typer.main
import typer.testing
from fastapi.testclient import TestClient

from dhub.api.app import create_app
from dhub.sandbox.runner import SandboxSettings
from dhub.services.builtins import shipped
from dhub.settings import Settings
from dhub.store.db import Database
from tests.support import netguard
from tests.support.wire.fixtures import anthropic_server as anthropic_server
from tests.support.wire.fixtures import openai_compatible_server as openai_compatible_server
from tests.support.wire.fixtures import openai_server as openai_server

ROOT = Path(__file__).resolve().parents[1]
# Copies of the published seed and the shared fixtures: the repository stands alone.
FIXTURES = ROOT / "tests" / "fixtures" / "agents"
SEED = ROOT / "tests" / "fixtures" / "seed"
ADMIN_TOKEN = "dhub_test_admin_token"
# The built-in agents every server installs and everyone sees (services/builtins.py), by id.
BUILTIN_IDS = sorted(b.id for b in shipped())
BUILTIN_NAMES = {b.spec.name for b in shipped()}
BUILTIN_WORKFLOW_IDS = sorted(b.id for b in shipped() if b.spec.mode == "workflow")
BUILTIN_REACT_IDS = sorted(b.id for b in shipped() if b.spec.mode == "react")
# Dependency environments built by tests outlive a session, so a rerun does not reinstall.
SANDBOX_ENVS = Path(tempfile.gettempdir()) / "dhub-test-envs"
PG_URL = os.environ.get("DHUB_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")
TABLES = (
    "agent_versions", "resource_tags", "resource_owners", "agents", "tokens", "users", "groups",
    "group_members", "resource_grants", "markings", "marking_members", "resource_markings",
    "audit_log", "runs", "run_steps", "run_events", "run_commands", "run_task_assignees",
    "conversations", "conversation_messages", "resource_versions", "resources", "run_inbox",
    "workers", "marking_history", "resource_ancestors", "run_artifacts",
    "ontology_links", "ontology_objects", "trigger_events", "triggers",
)  # fmt: skip
# procrastinate's (distributed mode), PostgreSQL only.
QUEUE_TABLES = ("procrastinate_jobs", "procrastinate_workers", "procrastinate_periodic_defers",
                "procrastinate_events")  # fmt: skip


def pytest_configure(config: pytest.Config) -> None:
    netguard.install()
    # typer's CliRunner builds the whole click command tree from the app at every invoke
    # (about a fifth of a CLI test's time); the tree is the same each time, so build it once.
    typer.testing._get_command = functools.cache(typer.main.get_command)  # type: ignore[attr-defined]


def pytest_unconfigure(config: pytest.Config) -> None:
    netguard.uninstall()


@pytest.fixture(autouse=True)
def _network_guard(request: pytest.FixtureRequest) -> Iterator[None]:
    """Real network stays blocked unless the test is marked ``allow_network``."""
    if request.node.get_closest_marker("allow_network") is None:
        yield
        return
    with netguard.allowed():
        yield


def load_json(path: Path) -> Any:
    return json.loads(path.read_text())


def valid_fixtures() -> list[Path]:
    return sorted((FIXTURES / "valid").glob("*.json"))


def invalid_fixtures() -> list[Path]:
    return sorted((FIXTURES / "invalid").glob("*.json"))


@pytest.fixture(scope="session")
def pg_schema() -> Iterator[str]:
    """A fresh schema for this test session on the PostgreSQL server."""
    schema = f"dhub_test_{uuid.uuid4().hex[:10]}"
    try:
        conn = psycopg.connect(PG_URL, autocommit=True, connect_timeout=5)
    except psycopg.OperationalError as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(f"PostgreSQL at {PG_URL} is required in CI and unreachable: {exc}")
        pytest.skip(f"PostgreSQL at {PG_URL} is unreachable (outside CI, so skipped): {exc}")
    with conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    try:
        yield schema
    finally:
        with psycopg.connect(PG_URL, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


def pg_url(schema: str) -> str:
    sep = "&" if "?" in PG_URL else "?"
    return f"{PG_URL}{sep}options=-csearch_path%3D{schema}"


def _truncate(schema: str) -> None:
    """Empty the schema's tables (DELETE with the foreign keys' triggers off: much faster than
    TRUNCATE on a few dozen small tables) and drop the table resources' row tables."""
    with psycopg.connect(PG_URL) as conn:
        found = conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = %s",
            (schema,),
        ).fetchall()
        present = {name for (name,) in found}
        conn.execute("SET LOCAL session_replication_role = replica")
        for table in (*TABLES, *QUEUE_TABLES):
            if table in present:
                conn.execute(f'DELETE FROM "{schema}"."{table}"')
        for name in sorted(present):
            if name.startswith("kt_"):  # table resources' rows (store/table_rows.py)
                conn.execute(f'DROP TABLE "{schema}"."{name}"')


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite database migrated and empty, as PostgreSQL's schema is after ``_truncate``:
    copying it saves each test the migrations."""
    path = tmp_path_factory.mktemp("sqlite-template") / "dhub.db"

    async def prepare() -> None:
        db = Database(f"sqlite:///{path}")
        try:
            await db.migrate()
        finally:
            await db.dispose()

    asyncio.run(prepare())
    return path


# Both databases, for fixtures of any scope: ``params=DATABASES``, then ``url_for(request, dir)``.
DATABASES = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


def url_for(request: pytest.FixtureRequest, directory: Path) -> str:
    """The database URL of the fixture's parameter: a SQLite file in ``directory`` (a copy of
    an empty migrated one), or the session's PostgreSQL schema, emptied."""
    if request.param == "sqlite":
        target = directory / "dhub.db"
        directory.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(request.getfixturevalue("sqlite_template"), target)
        return f"sqlite:///{target}"
    schema = request.getfixturevalue("pg_schema")
    _truncate(schema)
    return pg_url(schema)


@pytest.fixture(params=DATABASES)
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return url_for(request, tmp_path)


@pytest.fixture
def settings(database_url: str, tmp_path: Path) -> Settings:
    return Settings(data_dir=tmp_path / "data", database_url=database_url, admin_token=ADMIN_TOKEN)


@pytest.fixture
def client(settings: Settings) -> Iterator[TestClient]:
    """An HTTP client on a started app, authenticated as the admin."""
    with TestClient(create_app(settings)) as c:
        c.headers["Authorization"] = f"Bearer {ADMIN_TOKEN}"
        yield c


def sandbox_settings(**overrides: Any) -> SandboxSettings:
    """The sandbox as the product runs it (bubblewrap, warm pool), with test-owned envs."""
    return SandboxSettings(envs_dir=SANDBOX_ENVS, **overrides)
