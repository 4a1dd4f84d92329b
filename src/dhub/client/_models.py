"""Small typed results. Agents themselves stay plain JSON dicts: the server owns their shape,
and a dict round-trips through files and ``apply`` without losing fields."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

from dhub.client._exceptions import FieldError

Agent = dict[str, Any]
ApplyAction = Literal["created", "updated", "unchanged"]


@dataclass(frozen=True)
class AgentPage:
    """One page of ``GET /agents``; pass ``next_cursor`` back to get the next one."""

    data: list[Agent]
    next_cursor: str | None


# Folders and collections: plain JSON dicts like agents (docs/folders.md). What a children
# listing yields is a ``Resource``: the envelope of any kind (``category`` says which), without
# its kind's own fields.
Folder = dict[str, Any]
Collection = dict[str, Any]
Resource = dict[str, Any]
# An ontology (its schema is its document) and one of its objects (docs/ontologies.md).
Ontology = dict[str, Any]
OntologyObject = dict[str, Any]


@dataclass(frozen=True)
class ObjectPage:
    """One page of an ontology's objects (a search, or the objects linked to one); pass
    ``next_cursor`` back to get the next one."""

    data: list[OntologyObject]
    next_cursor: str | None


@dataclass(frozen=True)
class ResourcePage:
    """One page of folders, collections or what is in one; pass ``next_cursor`` back to get
    the next one."""

    data: list[Resource]
    next_cursor: str | None


@dataclass(frozen=True)
class ValidationResult:
    valid: bool
    errors: list[FieldError]


@dataclass(frozen=True)
class AgentVersion:
    version: int
    created_at: int
    created_by: str


@dataclass(frozen=True)
class ApplyResult:
    """What ``apply_agent`` did; ``unchanged`` means the stored agent already matched."""

    action: ApplyAction
    agent: Agent


# Identity and sharing: plain JSON dicts too, named for what they hold. ``User`` carries
# ``id`` (user.<name>), ``display_name``, ``email``, ``is_admin``; ``me`` adds ``groups`` and
# ``markings``. ``Group`` and ``Marking`` carry ``members`` when fetched one at a time. A
# ``Token`` carries its secret under ``token`` only in the response that created it.
User = dict[str, Any]
Group = dict[str, Any]
Marking = dict[str, Any]
Token = dict[str, Any]
Grant = dict[str, Any]
AuditEntry = dict[str, Any]
ShareScope = Literal["viewer", "runner", "editor"]


@dataclass(frozen=True)
class AuditPage:
    """One page of ``GET /audit``, newest first; pass ``next_cursor`` back for older entries."""

    data: list[AuditEntry]
    next_cursor: str | None


# Runs. Typed (unlike agents) because callers branch on their fields: status, outputs, seq.
RunStatus = Literal["queued", "running", "waiting", "succeeded", "failed", "cancelled"]
TaskKind = Literal["await_input", "await_confirmation"]
FINISHED: tuple[RunStatus, ...] = ("succeeded", "failed", "cancelled")


@dataclass(frozen=True)
class Run:
    """One run of an agent version. ``waiting`` says what a waiting run waits for
    (``{"for": "input", "node_id": ...}``); ``error`` why a run failed."""

    id: str
    agent_id: str
    agent_version: int
    user_id: str
    status: RunStatus
    inputs: dict[str, Any]
    outputs: dict[str, Any] | None
    error: dict[str, Any] | None
    waiting: dict[str, Any] | None
    usage: dict[str, Any]
    created_at: int
    started_at: int | None
    finished_at: int | None
    updated_at: int

    @property
    def finished(self) -> bool:
        return self.status in FINISHED

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> Run:
        fields: dict[str, Any] = {name: raw.get(name) for name in _RUN_FIELDS}
        return cls(**fields)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


_RUN_FIELDS = tuple(Run.__dataclass_fields__)


@dataclass(frozen=True)
class RunPage:
    """One page of ``GET /runs``, newest first; pass ``next_cursor`` back for older runs."""

    data: list[Run]
    next_cursor: str | None


@dataclass(frozen=True)
class RunEvent:
    """One logged event of a run; ``seq`` counts from 1 with no gaps, so ``after=seq``
    resumes right after it. ``data`` is the event without its ``type`` and ``node_id``."""

    seq: int
    type: str
    node_id: str | None
    data: dict[str, Any]
    created_at: int

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> RunEvent:
        return cls(
            seq=int(raw["seq"]),
            type=str(raw["type"]),
            node_id=raw.get("node_id"),
            data=dict(raw.get("data") or {}),
            created_at=int(raw["created_at"]),
        )

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Task:
    """A pending human-input form (``await_input``: answer with ``answer_input(run_id,
    node_id, ...)``) or actor confirmation (``await_confirmation``: decide with
    ``confirm_call(run_id, command_id, ...)``). ``request`` holds the prompt and fields, or
    the actor and its arguments."""

    run_id: str
    command_id: str
    kind: TaskKind
    node_id: str
    frame: str
    request: dict[str, Any]
    assignees: list[str]
    created_at: int
    due_at: float | None

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> Task:
        fields: dict[str, Any] = {name: raw.get(name) for name in _TASK_FIELDS}
        return cls(**fields)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


_TASK_FIELDS = tuple(Task.__dataclass_fields__)


# Conversations with chat agents. A turn is a run, so a finished turn carries its Run.


@dataclass(frozen=True)
class Message:
    """One message of a conversation: ``role`` is ``user`` or ``assistant``; ``run_id`` is
    the turn (run) it belongs to. ``seq`` counts from 1 in the conversation."""

    seq: int
    role: str
    content: str
    run_id: str | None
    created_at: int

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> Message:
        return cls(
            seq=int(raw["seq"]),
            role=str(raw["role"]),
            content=str(raw["content"]),
            run_id=raw.get("run_id"),
            created_at=int(raw["created_at"]),
        )

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Conversation:
    """A conversation with a chat agent: its messages, oldest first, and the agent's
    ``conversations`` variables as the last finished turn left them."""

    id: str
    agent_id: str
    user_id: str
    variables: dict[str, Any]
    messages: list[Message]
    created_at: int
    updated_at: int

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> Conversation:
        return cls(
            id=str(raw["id"]),
            agent_id=str(raw["agent_id"]),
            user_id=str(raw["user_id"]),
            variables=dict(raw.get("variables") or {}),
            messages=[Message.from_json(m) for m in raw.get("messages") or []],
            created_at=int(raw["created_at"]),
            updated_at=int(raw["updated_at"]),
        )

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Turn:
    """A finished turn: the run that answered a message, and the reply it added to the
    conversation (None unless the run succeeded; ``run.error`` says why it did not)."""

    run: Run
    reply: str | None

    @property
    def run_id(self) -> str:
        return self.run.id


# Templates: plain JSON dicts like agents (docs/templates.md).
Template = dict[str, Any]

# MCP servers: plain JSON dicts like agents (docs/mcp.md); a secret in their headers or env
# stays a reference, ``{"secret": "secret.…"}``.
McpServer = dict[str, Any]


@dataclass(frozen=True)
class McpTool:
    """One tool an MCP server offers (``GET /mcp-servers/{id}/tools``), as the server lists
    it: what an agent given it calls ``name`` (after its ``prefix``)."""

    name: str
    title: str | None
    description: str
    input_schema: dict[str, Any]
    output_schema: dict[str, Any] | None
    annotations: dict[str, Any] | None

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> McpTool:
        return cls(
            name=str(raw["name"]),
            title=raw.get("title"),
            description=raw.get("description") or "",
            input_schema=dict(raw.get("input_schema") or {}),
            output_schema=raw.get("output_schema"),
            annotations=raw.get("annotations"),
        )


@dataclass(frozen=True)
class McpTools:
    """What an MCP server offers: its ``tools``, and which ``server`` (id, name, version)
    listed them."""

    server: dict[str, Any]
    tools: list[McpTool]


@dataclass(frozen=True)
class RenderedDocument:
    """A template rendered: its ``text`` (or HTML page, when asked for) and media type."""

    template_id: str
    version: int
    format: str  # markdown | html | text: the template's
    media_type: str
    text: str

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> RenderedDocument:
        fields: dict[str, Any] = {name: raw.get(name) for name in cls.__dataclass_fields__}
        return cls(**fields)


@dataclass(frozen=True)
class Artifact:
    """A document a run made (``GET /runs/{id}/artifacts``), without its content."""

    id: str
    run_id: str
    name: str
    media_type: str
    format: str | None
    size: int
    node_id: str | None
    template_id: str | None
    template_version: int | None
    created_at: int
    created_by: str

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> Artifact:
        fields: dict[str, Any] = {name: raw.get(name) for name in cls.__dataclass_fields__}
        return cls(**fields)


@dataclass(frozen=True)
class ArtifactFile:
    """An artifact's content as downloaded: its file name, media type and bytes."""

    name: str
    media_type: str
    content: bytes
