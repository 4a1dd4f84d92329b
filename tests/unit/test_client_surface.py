"""The public surface of dhub.client (in the style of httpx tests/test_exported_members.py),
plus what the client does with whatever a server answers, via httpx.MockTransport."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
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
    "AuditEntry",
    "AuditPage",
    "Client",
    "ConfigurationError",
    "Conflict",
    "Conversation",
    "DhubAPIError",
    "DhubClientError",
    "FieldError",
    "Forbidden",
    "Grant",
    "Group",
    "InvalidInput",
    "Marking",
    "Message",
    "NotFound",
    "Run",
    "RunEvent",
    "RunPage",
    "RunStatus",
    "ServerUnreachable",
    "ShareScope",
    "Task",
    "Token",
    "Turn",
    "TurnStream",
    "Unauthenticated",
    "User",
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


def recording_client() -> tuple[Client, list[httpx.Request]]:
    """A client whose server answers every call with an empty list page and records it."""
    seen: list[httpx.Request] = []

    def record(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"data": [], "next_cursor": None})

    return Client("http://dhub.test", "tok", transport=httpx.MockTransport(record)), seen


def sent(request: httpx.Request) -> tuple[str, str, object]:
    body = json.loads(request.content) if request.content else None
    return request.method, request.url.raw_path.decode(), body


def test_sharing_calls_follow_the_contract() -> None:
    api, seen = recording_client()
    assert api.list_grants("agent.a/b") == []
    api.grant("agent.a", "group.eng", "runner")
    api.revoke_grant("agent.a", "group.eng")
    api.set_owners("agent.a", ["user.a", "group.b"])
    api.mark_agent("agent.a", "marking.pii")
    api.unmark_agent("agent.a", "marking.pii")
    assert [sent(r) for r in seen] == [
        ("GET", "/api/v1/agents/agent.a%2Fb/grants", None),
        ("POST", "/api/v1/agents/agent.a/grants", {"principal_id": "group.eng", "scope": "runner"}),
        ("DELETE", "/api/v1/agents/agent.a/grants/group.eng", None),
        ("PATCH", "/api/v1/agents/agent.a", {"owners": ["user.a", "group.b"]}),
        ("POST", "/api/v1/agents/agent.a/markings", {"marking_id": "marking.pii"}),
        ("DELETE", "/api/v1/agents/agent.a/markings/marking.pii", None),
    ]
    assert seen[3].headers["Content-Type"] == "application/merge-patch+json"


def test_identity_calls_send_only_what_is_given() -> None:
    api, seen = recording_client()
    api.create_user("alice", "Alice")
    api.create_user("bob", "Bob", email="b@x.io", is_admin=True)
    api.create_marking("pii")
    api.create_token("ci", expires_at=datetime(2030, 1, 1, tzinfo=UTC))
    api.issue_token("user.alice", "laptop", expires_at=1_900_000_000_000)
    api.list_tokens()
    api.list_tokens("user.alice")
    api.audit(actor_id="user.admin", limit=5)
    assert [sent(r) for r in seen] == [
        ("POST", "/api/v1/users", {"name": "alice", "display_name": "Alice"}),
        (
            "POST",
            "/api/v1/users",
            {"name": "bob", "display_name": "Bob", "email": "b@x.io", "is_admin": True},
        ),
        ("POST", "/api/v1/markings", {"name": "pii"}),
        ("POST", "/api/v1/tokens", {"name": "ci", "expires_at": 1_893_456_000_000}),
        ("POST", "/api/v1/users/user.alice/tokens", {"name": "laptop", "expires_at": 1.9e12}),
        ("GET", "/api/v1/tokens", None),
        ("GET", "/api/v1/tokens?user_id=user.alice", None),
        ("GET", "/api/v1/audit?actor_id=user.admin&limit=5", None),
    ]
