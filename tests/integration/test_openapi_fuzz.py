"""schemathesis against /openapi.json: every operation of the document, as the admin and as a
plain user, answers no server error (issue 16's criterion); the agent endpoints' responses
also match the schema. On SQLite and PostgreSQL (NUL characters, say, only PostgreSQL refuses);
tests/integration/test_bad_input.py sends each class of bad input to every operation.

The schemathesis pytest plugin does not support pytest 9, so hypothesis drives each
operation's strategy here (schemathesis' Python API)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

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
from tests.conftest import ADMIN_TOKEN, DATABASES, FIXTURES, load_json, url_for


@pytest.fixture(scope="module", params=DATABASES)
def app(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[FastAPI]:
    data = tmp_path_factory.mktemp("fuzz")
    url = url_for(request, data)
    application = create_app(Settings(data_dir=data, database_url=url, admin_token=ADMIN_TOKEN))
    with TestClient(application) as client:  # runs the lifespan: migrations, admin
        client.headers["Authorization"] = f"Bearer {ADMIN_TOKEN}"
        # Some real agents so that generated ids sometimes hit, and lists are not empty.
        for path in sorted((FIXTURES / "valid").glob("*.json")):
            client.post("/api/v1/agents", json=load_json(path))
        # A plain user, with a token of its own.
        client.post("/api/v1/users", json={"name": "pat", "display_name": "Pat"})
        issued = client.post("/api/v1/users/user.pat/tokens", json={"name": "fuzz"}).json()
        application.state.user_token = issued["token"]
        yield application


# Schema-valid bodies may still break graph rules (one start node, no cycles...) that JSON
# Schema cannot express, so "positive data is accepted" is not a check we can promise.
CHECKS = [not_a_server_error, status_code_conformance, response_schema_conformance]


def _operations(app: FastAPI, path_regex: str = "^/api/v1/agents") -> list[APIOperation]:
    schema = schemathesis.openapi.from_asgi("/openapi.json", app).include(path_regex=path_regex)
    return [result.ok() for result in schema.get_all_operations()]


def test_agent_endpoints_conform(app: FastAPI) -> None:
    """Every agent operation, driven by schemathesis' generated cases (the schemathesis pytest
    plugin does not support pytest 9, so hypothesis drives each operation's strategy here)."""
    operations = _operations(app)
    paths = app.openapi()["paths"]
    expected = sum(len(ops) for path, ops in paths.items() if path.startswith("/api/v1/agents"))
    assert len(operations) == expected >= 8  # every agent operation is fuzzed

    for operation in operations:
        _fuzz(operation, ADMIN_TOKEN, CHECKS, 30)


def _fuzz(operation: APIOperation, token: str, checks: list[Any], examples: int) -> None:
    @given(case=operation.as_strategy())
    @settings(
        max_examples=examples,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        database=None,
    )
    def run(case: Case) -> None:
        case.call_and_validate(headers={"Authorization": f"Bearer {token}"}, checks=checks)

    run()


# Per operation, caller and database: ~170 operations x 2 callers x 2 databases; each case
# costs ~20 ms, so 6 keeps the four runs near a minute and a half in all (the agent
# endpoints get 30 each above). DHUB_FUZZ_EXAMPLES=200 hunts longer.
EXAMPLES_EVERYWHERE = int(os.environ.get("DHUB_FUZZ_EXAMPLES", "6"))


@pytest.mark.parametrize("who", ["admin", "user"])
def test_no_operation_answers_a_server_error(app: FastAPI, who: str) -> None:
    """Every operation of the whole document, with schemathesis' generated cases (valid and
    invalid), answers no 5xx. Every failing operation is reported, not just the first."""
    operations = _operations(app, "^/")
    expected = sum(len(ops) for ops in app.openapi()["paths"].values())
    assert len(operations) == expected > 100  # every operation is fuzzed
    token = ADMIN_TOKEN if who == "admin" else app.state.user_token
    failures = []
    for operation in operations:
        try:
            _fuzz(operation, token, [not_a_server_error], EXAMPLES_EVERYWHERE)
        except Exception as exc:  # a failed check: collected, all reported below
            failures.append(f"{operation.method.upper()} {operation.path}: {exc}"[:2000])
    assert failures == [], "\n\n".join(failures)
