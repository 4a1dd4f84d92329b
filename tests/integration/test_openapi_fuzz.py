"""schemathesis against /openapi.json for the agent endpoints: no 500s, responses match the
schema. Runs on SQLite; the conformance of the stores is covered by the other suites."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import schemathesis
from fastapi import FastAPI
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from schemathesis import Case
from schemathesis.checks import not_a_server_error
from schemathesis.schemas import APIOperation
from schemathesis.specs.openapi.checks import (
    response_schema_conformance,
    status_code_conformance,
)

from dhub.api.app import create_app
from dhub.settings import Settings
from tests.conftest import ADMIN_TOKEN, FIXTURES, load_json


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FastAPI]:
    data = tmp_path_factory.mktemp("fuzz")
    application = create_app(
        Settings(
            data_dir=data, database_url=f"sqlite:///{data / 'dhub.db'}", admin_token=ADMIN_TOKEN
        )
    )
    with TestClient(application) as client:  # runs the lifespan: migrations, admin
        client.headers["Authorization"] = f"Bearer {ADMIN_TOKEN}"
        # Some real agents so that generated ids sometimes hit, and lists are not empty.
        for path in sorted((FIXTURES / "valid").glob("*.json")):
            client.post("/api/v1/agents", json=load_json(path))
        yield application


# Schema-valid bodies may still break graph rules (one start node, no cycles...) that JSON
# Schema cannot express, so "positive data is accepted" is not a check we can promise.
CHECKS = [not_a_server_error, status_code_conformance, response_schema_conformance]


def _operations(app: FastAPI) -> list[APIOperation]:
    schema = schemathesis.openapi.from_asgi("/openapi.json", app).include(
        path_regex="^/api/v1/agents"
    )
    return [result.ok() for result in schema.get_all_operations()]


def test_agent_endpoints_conform(app: FastAPI) -> None:
    """Every agent operation, driven by schemathesis' generated cases (the schemathesis pytest
    plugin does not support pytest 9, so hypothesis drives each operation's strategy here)."""
    operations = _operations(app)
    paths = app.openapi()["paths"]
    expected = sum(len(ops) for path, ops in paths.items() if path.startswith("/api/v1/agents"))
    assert len(operations) == expected >= 8  # every agent operation is fuzzed

    for operation in operations:

        @given(case=operation.as_strategy())
        @settings(
            max_examples=30,
            deadline=None,
            suppress_health_check=list(HealthCheck),
            database=None,
        )
        def run(case: Case) -> None:
            case.call_and_validate(
                headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}, checks=CHECKS
            )

        run()
