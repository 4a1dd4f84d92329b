"""The public surface of dhub.client (in the style of httpx tests/test_exported_members.py),
plus what the client does with whatever a server answers, via httpx.MockTransport."""

from __future__ import annotations

import json
import re
from pathlib import Path

import httpx
import pytest

import dhub.client
from dhub.client import (
    Client,
    ConfigurationError,
    Conflict,
    DhubAPIError,
    DhubClientError,
    FieldError,
    Forbidden,
    InvalidInput,
    NotFound,
    ServerUnreachable,
    Unauthenticated,
)

PUBLIC = [
    "DEFAULT_URL",
    "Agent",
    "AgentPage",
    "AgentVersion",
    "ApplyAction",
    "ApplyResult",
    "Client",
    "ConfigurationError",
    "Conflict",
    "DhubAPIError",
    "DhubClientError",
    "FieldError",
    "Forbidden",
    "InvalidInput",
    "NotFound",
    "ServerUnreachable",
    "Unauthenticated",
    "ValidationResult",
]


def test_all_is_pinned() -> None:
    assert dhub.client.__all__ == PUBLIC


def test_all_imports_are_exported() -> None:
    public_names = {name for name in vars(dhub.client) if not name.startswith("_")}
    assert public_names == set(dhub.client.__all__)


def test_exported_classes_claim_the_public_module() -> None:
    for name in dhub.client.__all__:
        member = getattr(dhub.client, name)
        if isinstance(member, type):
            assert member.__module__ == "dhub.client", name


def test_one_exception_tree() -> None:
    for cls in (Unauthenticated, Forbidden, NotFound, Conflict, InvalidInput):
        assert issubclass(cls, DhubAPIError)
    for cls in (DhubAPIError, ServerUnreachable, ConfigurationError):
        assert issubclass(cls, DhubClientError)


def answering(status: int, body: bytes, content_type: str = "application/json") -> Client:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(status, content=body, headers={"Content-Type": content_type})

    return Client("http://dhub.test", "tok", transport=httpx.MockTransport(handler))


@pytest.mark.parametrize(
    ("status", "cls"),
    [
        (401, Unauthenticated),
        (403, Forbidden),
        (404, NotFound),
        (409, Conflict),
        (500, DhubAPIError),
    ],
)
def test_statuses_map_to_exceptions(status: int, cls: type[DhubAPIError]) -> None:
    with pytest.raises(cls) as caught:
        answering(status, b'{"detail": "Nope.", "errors": []}').get_agent("agent.x")
    assert type(caught.value) is cls
    assert caught.value.status_code == status
    assert caught.value.detail == "Nope."


def test_422_carries_every_field_error() -> None:
    body = {
        "detail": "The document is invalid.",
        "errors": [
            {"loc": "/name", "message": "Required.", "code": "missing"},
            {"loc": "/edges/0/target", "message": "No such node.", "code": "unknown_node"},
        ],
    }
    with pytest.raises(InvalidInput) as caught:
        answering(422, json.dumps(body).encode()).create_agent({})
    assert caught.value.errors == [
        FieldError("/name", "Required.", "missing"),
        FieldError("/edges/0/target", "No such node.", "unknown_node"),
    ]
    assert str(caught.value).splitlines() == [
        "The document is invalid. (HTTP 422)",
        "/name: Required.",
        "/edges/0/target: No such node.",
    ]


def test_an_error_without_a_json_body_still_has_a_detail() -> None:
    with pytest.raises(DhubAPIError) as caught:
        answering(502, b"<html>bad gateway</html>", "text/html").get_agent("agent.x")
    assert caught.value.detail == "<html>bad gateway</html>"
    with pytest.raises(DhubAPIError) as caught:
        answering(503, b"").get_agent("agent.x")
    assert caught.value.detail == "Service Unavailable"


def test_a_success_that_is_not_json_is_a_client_error() -> None:
    with pytest.raises(DhubClientError, match="not a JSON object"):
        answering(200, b"hello", "text/plain").get_agent("agent.x")


def test_connection_failures_are_server_unreachable() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    api = Client("http://dhub.test", "tok", transport=httpx.MockTransport(refuse))
    with pytest.raises(ServerUnreachable, match=re.escape("http://dhub.test")):
        api.list_agents()


def test_ids_stay_one_path_segment() -> None:
    seen: list[str] = []

    def record(request: httpx.Request) -> httpx.Response:
        seen.append(request.url.raw_path.decode())
        return httpx.Response(204)

    Client("http://dhub.test/", "tok", transport=httpx.MockTransport(record)).delete_agent("a/b?c")
    assert seen == ["/api/v1/agents/a%2Fb%3Fc"]


def recording_env_client(monkeypatch: pytest.MonkeyPatch, **env: str) -> list[httpx.Request]:
    for name in ("DHUB_URL", "DHUB_TOKEN", "DHUB_DATA_DIR"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    seen: list[httpx.Request] = []

    def record(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"data": [], "next_cursor": None})

    Client.from_env(transport=httpx.MockTransport(record)).list_agents()
    return seen


def test_from_env_reads_url_and_token(monkeypatch: pytest.MonkeyPatch) -> None:
    [request] = recording_env_client(monkeypatch, DHUB_URL="http://h:9/", DHUB_TOKEN="t1")
    assert str(request.url) == "http://h:9/api/v1/agents"
    assert request.headers["Authorization"] == "Bearer t1"


def test_from_env_falls_back_to_the_data_directory(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "admin.token").write_text("from-file\n")
    [request] = recording_env_client(monkeypatch, DHUB_DATA_DIR=str(tmp_path))
    assert str(request.url) == "http://127.0.0.1:8000/api/v1/agents"
    assert request.headers["Authorization"] == "Bearer from-file"


def test_from_env_without_a_token_says_how_to_get_one(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    with pytest.raises(ConfigurationError, match="DHUB_TOKEN"):
        recording_env_client(monkeypatch, DHUB_DATA_DIR=str(tmp_path))
