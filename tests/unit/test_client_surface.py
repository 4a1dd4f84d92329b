"""The public surface of dhub.client (in the style of httpx tests/test_exported_members.py),
plus what the client does with whatever a server answers, via httpx.MockTransport."""

from __future__ import annotations

import inspect
import json
import re
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest

import dhub.client
from dhub.client import (
    AmbiguousName,
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
    UnknownName,
)

PUBLIC = [
    "DEFAULT_URL",
    "Agent",
    "AgentPage",
    "AgentVersion",
    "AmbiguousName",
    "ApplyAction",
    "ApplyResult",
    "Artifact",
    "ArtifactFile",
    "AuditEntry",
    "AuditPage",
    "Client",
    "Collection",
    "ConfigurationError",
    "Conflict",
    "Conversation",
    "DhubAPIError",
    "DhubClientError",
    "FieldError",
    "Folder",
    "Forbidden",
    "Grant",
    "Group",
    "InvalidInput",
    "Marking",
    "McpServer",
    "McpTool",
    "McpTools",
    "Message",
    "NotFound",
    "ObjectPage",
    "Ontology",
    "OntologyObject",
    "RenderedDocument",
    "Resource",
    "ResourcePage",
    "Run",
    "RunEvent",
    "RunPage",
    "RunStatus",
    "ServerUnreachable",
    "ShareScope",
    "Task",
    "Template",
    "Token",
    "Trigger",
    "Turn",
    "TurnStream",
    "Unauthenticated",
    "UnknownName",
    "User",
    "ValidationResult",
    "sign_delivery",
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
    for cls in (DhubAPIError, ServerUnreachable, ConfigurationError, AmbiguousName):
        assert issubclass(cls, DhubClientError)
    assert issubclass(UnknownName, NotFound)


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

    Client("http://dhub.test/", "tok", transport=httpx.MockTransport(record)).delete_user("a/b?c")
    assert seen == ["/api/v1/users/a%2Fb%3Fc"]


A = "agent.01m8pq9je70y0jz9n1k7fmy8v2"  # shaped like an id: used as is, never looked up


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
    assert api.list_grants(A) == []
    api.grant(A, "group.eng", "runner")
    api.revoke_grant(A, "group.eng")
    api.set_owners(A, ["user.a", "group.b"])
    api.mark_agent(A, "marking.pii")
    api.unmark_agent(A, "marking.pii")
    assert [sent(r) for r in seen] == [
        ("GET", f"/api/v1/agents/{A}/grants", None),
        ("POST", f"/api/v1/agents/{A}/grants", {"principal_id": "group.eng", "scope": "runner"}),
        ("DELETE", f"/api/v1/agents/{A}/grants/group.eng", None),
        ("PATCH", f"/api/v1/agents/{A}", {"owners": ["user.a", "group.b"]}),
        ("POST", f"/api/v1/agents/{A}/markings", {"marking_id": "marking.pii"}),
        ("DELETE", f"/api/v1/agents/{A}/markings/marking.pii", None),
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


# -- the Client's methods, and names where ids go ----------------------------------------------

# Each public method of Client and the parameters it takes: renaming or dropping one breaks
# callers, so it is a decision, made here. ``agent`` parameters take an id or a name.
CLIENT_METHODS = {
    "create_object": ["ontology", "type", "properties"],
    "create_ontology": ["doc"],
    "delete_object": ["ontology", "type", "key"],
    "delete_ontology": ["ontology"],
    "folder_paths": ["ids"],
    "follow_links": ["ontology", "type", "key", "link", "reverse", "limit", "cursor"],
    "get_object": ["ontology", "type", "key"],
    "get_ontology": ["ontology"],
    "import_objects": ["ontology", "items"],
    "iter_objects": ["ontology", "type", "filters", "q", "page_size"],
    "iter_ontologies": ["q", "name", "tags", "folder_id", "page_size"],
    "import_objects_from_table": [
        "ontology", "table", "type", "properties", "link_type", "from_column", "to_column"
    ],
    "link_objects": ["ontology", "link_type", "from_key", "to_key"],
    "list_ontologies": ["q", "name", "tags", "folder_id", "limit", "cursor"],
    "resolve_ontology": ["ontology"],
    "search_objects": ["ontology", "type", "filters", "q", "limit", "cursor"],
    "unlink_objects": ["ontology", "link_type", "from_key", "to_key"],
    "update_object": ["ontology", "type", "key", "properties"],
    "update_ontology": ["ontology", "patch"],
    "add_marking_member": ["marking_id", "principal_id"],
    "add_member": ["group_id", "principal_id"],
    "agent_version": ["agent", "version"],
    "agent_versions": ["agent"],
    "answer_input": ["run_id", "node_id", "values"],
    "apply_agent": ["doc"],
    "with_ids": ["doc"],
    "audit": ["actor_id", "target_id", "action", "limit", "cursor"],
    "cancel_run": ["run_id"],
    "usage": ["agent", "user_id", "since", "until"],
    "close": [],
    "confirm_call": ["run_id", "call_id", "approve", "arguments", "reason"],
    "create_agent": ["doc"],
    "create_conversation": ["agent"],
    "create_group": ["name", "display_name"],
    "create_marking": ["name", "description"],
    "create_token": ["name", "expires_at"],
    "create_user": ["name", "display_name", "email", "is_admin"],
    "delete_agent": ["agent"],
    "delete_group": ["group_id"],
    "delete_user": ["user_id"],
    "copy_agent": ["agent", "name", "folder_id", "tables", "templates", "ontologies"],
    "export_agent": ["agent"],
    "collection_children": ["collection", "limit", "cursor"],
    "create_collection": ["name", "description", "alias", "tags"],
    "create_folder": ["name", "folder", "collection", "description", "alias", "tags"],
    "delete_collection": ["collection"],
    "delete_folder": ["folder"],
    "find_agent_by_name": ["name", "folder_id", "collection_id"],
    "folder_children": ["folder", "limit", "cursor"],
    "get_collection": ["collection"],
    "get_folder": ["folder"],
    "get_resource": ["resource"],
    "resource_version": ["resource", "version"],
    "resource_versions": ["resource"],
    "home_folder": [],
    "iter_collection_children": ["collection", "page_size"],
    "iter_collections": ["q", "name", "tags", "page_size"],
    "iter_folder_children": ["folder", "page_size"],
    "iter_folders": ["q", "name", "tags", "collection_id", "folder_id", "type", "page_size"],
    "list_collections": ["q", "name", "tags", "limit", "cursor"],
    "list_folders": [
        "q", "name", "tags", "collection_id", "folder_id", "type", "limit", "cursor",
    ],
    "mark": ["resource", "marking_id"],
    "move": ["resource", "folder", "collection"],
    "resolve_collection": ["collection"],
    "resolve_folder": ["folder"],
    "unmark": ["resource", "marking_id"],
    "update_collection": ["collection", "patch"],
    "update_folder": ["folder", "patch"],
    "from_env": ["url", "token", "data_dir", "transport"],
    "get_agent": ["agent"],
    "get_conversation": ["conversation_id"],
    "get_group": ["group_id"],
    "get_marking": ["marking_id"],
    "get_run": ["run_id"],
    "get_user": ["user_id"],
    "grant": ["agent", "principal_id", "scope"],
    "issue_token": ["user_id", "name", "expires_at"],
    "iter_agents": [
        "q", "name", "tags", "collection_id", "folder_id", "mode", "input_mode", "type",
        "is_builtin", "page_size",
    ],
    "iter_audit": ["actor_id", "target_id", "action", "page_size"],
    "list_agents": [
        "q", "name", "tags", "collection_id", "folder_id", "mode", "input_mode", "type",
        "is_builtin", "limit", "cursor",
    ],
    "list_grants": ["agent"],
    "list_groups": [],
    "list_markings": [],
    "list_runs": ["agent", "status", "page_size"],
    "list_tasks": [],
    "list_tokens": ["user_id"],
    "list_users": [],
    "mark_agent": ["agent", "marking_id"],
    "me": [],
    "remove_marking_member": ["marking_id", "principal_id"],
    "remove_member": ["group_id", "principal_id"],
    "resolve_agent": ["agent"],
    "resolve_provider": ["name"],
    "revoke_grant": ["agent", "principal_id"],
    "revoke_token": ["token_id"],
    "run_events": ["run_id", "after", "limit"],
    "runs_page": ["agent", "status", "limit", "cursor"],
    "send_message": ["conversation_id", "content", "timeout"],
    "set_owners": ["agent", "owners"],
    "start_run": ["agent", "inputs", "version"],
    "stream_message": ["conversation_id", "content", "timeout"],
    "stream_run_events": ["run_id", "after", "timeout"],
    "unmark_agent": ["agent", "marking_id"],
    "update_agent": ["agent", "patch"],
    "update_group": ["group_id", "display_name"],
    "update_user": ["user_id", "changes"],
    "validate_agent": ["doc"],
    "wait_run": ["run_id", "timeout"],
    # templates and run artifacts
    "create_template": ["doc"],
    "delete_template": ["template"],
    "download_artifact": ["run_id", "artifact_id", "format"],
    "get_template": ["template"],
    "iter_templates": ["name", "q", "page_size"],
    "list_artifacts": ["run_id"],
    "list_templates": ["name", "q", "limit", "cursor"],
    "render_template": ["template", "variables", "output", "version"],
    "render_template_pdf": ["template", "variables", "version"],
    "update_template": ["template", "patch"],
    # tables
    "append_rows": ["table", "rows"],
    "create_table": ["name", "columns", "description", "folder", "collection"],
    "delete_rows": ["table", "row_ids"],
    "delete_table": ["table"],
    "get_table": ["table"],
    "import_rows": ["table", "file", "format"],
    "import_table": ["name", "file", "format", "description", "folder", "collection"],
    "iter_rows": ["table", "page_size"],
    "iter_tables": ["q", "name", "folder_id", "collection_id"],
    "list_rows": ["table", "limit", "cursor"],
    "list_tables": ["q", "name", "folder_id", "collection_id", "limit", "cursor"],
    "query_table": ["table", "query"],
    "resolve_table": ["table"],
    "sql": ["sql", "tables", "limit"],
    "update_row": ["table", "row_id", "values"],
    "update_table": ["table", "patch"],
    # MCP servers
    "create_mcp_server": ["doc"],
    "delete_mcp_server": ["server"],
    "get_mcp_server": ["server"],
    "iter_mcp_servers": ["name", "q", "page_size"],
    "list_mcp_servers": ["name", "q", "limit", "cursor"],
    "mcp_server_tools": ["server", "refresh"],
    "update_mcp_server": ["server", "patch"],
    # secrets
    "create_secret": ["doc"],
    "delete_secret": ["secret"],
    "get_secret": ["secret"],
    "iter_secrets": ["name", "q", "page_size"],
    "list_secrets": ["name", "q", "limit", "cursor"],
    "set_secret_value": ["secret", "value"],
    "update_secret": ["secret", "patch"],
    # triggers
    "create_trigger": ["agent", "doc"],
    "delete_trigger": ["agent", "trigger"],
    "get_trigger": ["agent", "trigger"],
    "list_triggers": ["agent"],
    "rotate_trigger_secret": ["agent", "trigger"],
    "send_delivery": ["url", "secret", "body", "delivery"],
    "trigger_history": ["agent", "trigger", "limit", "before"],
    "update_trigger": ["agent", "trigger", "patch"],
}  # fmt: skip


def test_client_methods_are_pinned() -> None:
    found = {
        name: [p for p in inspect.signature(member).parameters if p not in ("self", "cls")]
        for name, member in inspect.getmembers(Client, callable)
        if not name.startswith("_")
    }
    assert found == CLIENT_METHODS


B = "agent.01m8pq9je9a2d4kq7vmb3ntc5x"


def listing(*agents: dict[str, object]) -> tuple[Client, list[httpx.Request]]:
    """A client whose server lists ``agents`` for any name query and answers other calls
    with an empty object."""
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if request.url.path == "/api/v1/agents" and request.method == "GET":
            return httpx.Response(200, json={"data": list(agents), "next_cursor": None})
        return httpx.Response(200, json={"id": "run.x", "data": []})

    return Client("http://dhub.test", "tok", transport=httpx.MockTransport(answer)), seen


def test_an_id_is_used_as_is_and_a_name_is_looked_up_once() -> None:
    api, seen = listing({"id": B, "name": "triage", "folder_id": None})
    api.list_grants(A)
    api.list_grants("triage")
    with pytest.raises(UnknownName):  # shaped unlike an id: a name (which nobody has here)
        api.list_grants("agent.not-a-ulid")
    assert [(r.method, r.url.path, dict(r.url.params)) for r in seen] == [
        ("GET", f"/api/v1/agents/{A}/grants", {}),
        ("GET", "/api/v1/agents", {"name": "triage"}),
        ("GET", f"/api/v1/agents/{B}/grants", {}),
        ("GET", "/api/v1/agents", {"name": "agent.not-a-ulid"}),
    ]


def test_a_name_nobody_has_is_not_found_and_says_how_to_list() -> None:
    api, _ = listing({"id": B, "name": "triage-2", "folder_id": None})
    with pytest.raises(UnknownName) as caught:
        api.start_run("triage", {})
    assert isinstance(caught.value, NotFound)
    assert str(caught.value) == (
        "No agent named 'triage' that you can see; Client.iter_agents() lists the ones you can."
    )


def test_a_name_in_several_folders_is_ambiguous_and_names_each() -> None:
    found = [
        {"id": A, "name": "triage", "folder_id": None},
        {"id": B, "name": "triage", "folder_id": "folder.team-a"},
    ]
    api, seen = listing(*found)
    with pytest.raises(AmbiguousName) as caught:
        api.get_agent("triage")
    assert caught.value.matches == found
    assert str(caught.value) == (
        f"2 agents you can see are named 'triage': {A} (top level), {B} (folder folder.team-a); "
        "give the id of the one you mean."
    )
    assert len(seen) == 1  # nothing was done to either
