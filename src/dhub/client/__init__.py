"""The dhub Python SDK.

    from dhub.client import Client

    with Client.from_env() as dhub:
        created = dhub.create_agent(doc)
        for agent in dhub.iter_agents(tags=["demo"]):
            print(agent["id"], agent["name"])
        run = dhub.start_run("ticket-triage", {"ticket": "Checkout fails"})  # a name or an id
        reports = dhub.create_folder("reports", collection="support")
        dhub.move(created["id"], folder=reports["id"])

Everything public is listed in ``__all__`` (pinned by tests/unit/test_client_surface.py); the
underscore modules behind it may change without notice.
"""

from dhub.client._client import Client
from dhub.client._config import DEFAULT_URL
from dhub.client._conversations import TurnStream
from dhub.client._exceptions import (
    AmbiguousName,
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
from dhub.client._models import (
    Agent,
    AgentPage,
    AgentVersion,
    ApplyAction,
    ApplyResult,
    Artifact,
    ArtifactFile,
    AuditEntry,
    AuditPage,
    Collection,
    Conversation,
    Folder,
    Grant,
    Group,
    Marking,
    McpServer,
    McpTool,
    McpTools,
    Message,
    ObjectPage,
    Ontology,
    OntologyObject,
    RenderedDocument,
    Resource,
    ResourcePage,
    Run,
    RunEvent,
    RunPage,
    RunStatus,
    ShareScope,
    Task,
    Template,
    Token,
    Turn,
    User,
    ValidationResult,
)
from dhub.client._triggers import Trigger, sign_delivery

__all__ = [
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

# Show the public path in reprs and tracebacks (dhub.client.NotFound, not ..._exceptions),
# as httpx does. Type aliases (Agent, ApplyAction) have no __module__ of their own to set.
for _name in __all__:
    _member = globals()[_name]
    if isinstance(_member, type):
        _member.__module__ = __name__
del _name, _member
