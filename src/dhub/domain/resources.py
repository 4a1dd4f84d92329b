"""Stored resources that agents reference: Prompts, Tools, Actors, Roles and Templates
(DESIGN.md 2, 3.3).

Each has the shared envelope of an Agent (``name, alias, category, type, collection_id,
folder_id, tags, description``) and a body of its own:

- a **Prompt** is a ``template`` with ``{{var}}`` placeholders and the ``variables`` it declares;
- a **Tool** and an **Actor** are an agent's inline tool / actor config, stored once: the
  resource ``name`` is the function's name (the entry point is looked up by it);
- a **Role** is a delegate: instructions, an optional model, and tools;
- a **Template** is a document (Markdown, HTML or text) written in the sandboxed template
  language of domain/documents.py, with typed ``variables``;
- a **Secret** is a value other resources use by reference and nobody reads back
  (docs/secrets.md): its document says only whether it has a value or which server
  environment variable holds it.

``*Spec`` is what a user writes; ``*Response`` adds the server's envelope. ``ResolvedAgent`` is
what the react runtime gets from ``services.resources.resolve_agent``: every reference replaced
by the inline config it names.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

import orjson
from pydantic import MISSING, BaseModel, ConfigDict, Field, model_validator

from dhub.domain.agent import EFFECTIVE_MARKINGS, Owner, ShareScope
from dhub.domain.base import JsonObject, PositiveInt, SpecModel
from dhub.domain.documents import DocumentFormat, TemplateVariable
from dhub.domain.functions import AgentActorConfig, AgentToolConfig, FunctionSpec, ToolItem
from dhub.domain.knowledge import KnowledgeTool
from dhub.domain.mcp import McpServerBody
from dhub.knowledge.ontology_schema import OntologyBody

Category = Literal[
    "prompt", "tool", "actor", "role", "folder", "collection", "template", "table", "ontology",
    "mcp_server", "secret",
]  # fmt: skip
CATEGORIES: tuple[Category, ...] = (
    "prompt", "tool", "actor", "role", "folder", "collection", "template", "table", "ontology",
    "mcp_server", "secret",
)  # fmt: skip
# The kinds that hold other resources (DESIGN.md 2.2).
CONTAINERS = frozenset({"folder", "collection"})
HOME = "home"  # the ``type`` of a user's home folder, which only the server creates

# Tools the platform itself provides; an agent names them with a plain string.
BUILT_IN_TOOLS = frozenset({"set_conversation_variable"})

# ``{{ name }}``: the only template feature of a Prompt. Anything between the braces that is
# not a plain identifier is refused when the prompt is stored.
PLACEHOLDER = re.compile(r"\{\{(.*?)\}\}", re.DOTALL)
IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


# What a reference needs of what it names (DESIGN.md 2.1): a prompt is read into the agent's
# system prompt; tools, actors, roles and agents as roles run on the caller's behalf.
REFERENCE_USE: dict[str, str] = {
    "prompt": "read",
    "tool": "run",
    "actor": "run",
    "role": "run",
    "agent": "run",
    "folder": "edit",  # to place something in it
    "collection": "edit",
    "table": "read",
    "template": "read",
    "ontology": "read",
    "mcp_server": "run",  # its tools are called on the caller's behalf
    # A secret's value goes into something the user runs (an MCP server's headers): using it
    # takes run; reading its document (which never holds the value) takes read.
    "secret": "run",
}
# Where each kind is listed: /api/v1/<plural>.
PLURALS = {"ontology": "ontologies", "mcp_server": "mcp-servers"}


def plural(kind: str) -> str:
    return PLURALS.get(kind, f"{kind}s")


def unreachable(kind: str, ref_id: str) -> str:
    """The one message for a reference the acting user cannot use: the same, word for word,
    whether the id names nothing, something unshared, something marked or something the user
    may only read, so it reveals nothing of what (if anything) is there."""
    return (
        f"No {kind} '{ref_id}' that you can {REFERENCE_USE.get(kind, 'read')}: check the id "
        f"(GET /api/v1/{plural(kind)} lists the ones you can read), or ask its owner to share it "
        "with you."
    )


def placeholders(template: str) -> list[str]:
    """The text between each ``{{`` and ``}}`` of ``template``, stripped, in order."""
    return [m.group(1).strip() for m in PLACEHOLDER.finditer(template)]


def is_identifier(name: str) -> bool:
    return IDENTIFIER.fullmatch(name) is not None


def render_value(value: Any) -> str:
    """A bound value as prompt text: strings as they are, ``null`` as nothing, anything else
    as JSON."""
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    return orjson.dumps(value).decode()


def render_template(template: str, values: Mapping[str, Any]) -> str:
    """Replace each ``{{name}}`` with its value, in one pass: a value that itself contains
    ``{{...}}`` is inserted as text, never expanded again, and nothing else is evaluated.
    A placeholder without a value raises KeyError (the prompt was validated on create, so
    callers pass every declared variable)."""
    return PLACEHOLDER.sub(lambda m: render_value(values[m.group(1).strip()]), template)


# -- documents ----------------------------------------------------------------------------------


class ResourceSpec(SpecModel):
    """The envelope every resource shares; ``category`` is fixed by each kind."""

    name: Annotated[str, Field(min_length=1, max_length=200)] = Field(description="Resource name")
    alias: str | None = Field(default=None, description="Display name shown to users.")
    category: str = Field(description="Resource type tag")
    type: str | None = Field(default=None, description="Subtype within category")
    collection_id: str | None = Field(default=None, description="Parent collection ID")
    folder_id: str | None = Field(default=None, description="Identifier of the containing folder.")
    tags: list[str] | None = Field(default=None, description="Classification labels")
    description: str


class PromptVariable(SpecModel):
    name: str = Field(description="An identifier, used in the template as {{name}}.")
    description: str = ""
    default: Any | MISSING = MISSING
    required: bool = Field(
        default=True,
        description="Whether an agent must bind it; defaults to true without a default, "
        "false with one.",
    )

    @model_validator(mode="after")
    def _optional_when_defaulted(self) -> PromptVariable:
        if "required" not in self.model_fields_set and self.default is not MISSING:
            self.required = False
        return self


class PromptSpec(ResourceSpec):
    category: Literal["prompt"] = Field(default="prompt", description="Resource type tag")
    template: str = Field(description="Text with {{var}} placeholders.")
    variables: list[PromptVariable] = Field(default=[])


class ToolSpec(ResourceSpec):
    """An AgentToolConfig stored on its own; ``name`` is the tool's name."""

    category: Literal["tool"] = Field(default="tool", description="Resource type tag")
    type: Literal["python"] = Field(default="python", description="The tool's language.")
    function: FunctionSpec
    require_browser: bool = False
    options: JsonObject = Field(default={})


class ActorSpec(ResourceSpec):
    """An AgentActorConfig stored on its own; ``name`` is the actor's name."""

    category: Literal["actor"] = Field(default="actor", description="Resource type tag")
    function: FunctionSpec
    confirmation_policy: Literal["confirm", "auto"] = "confirm"
    options: JsonObject = Field(default={})


class RoleSpec(ResourceSpec):
    """A delegate the model can hand a task to; it runs a nested react loop."""

    category: Literal["role"] = Field(default="role", description="Resource type tag")
    instructions: str
    model_provider: str | None = Field(default=None, description="null: the calling agent's")
    model: str | None = Field(default=None, description="null: the calling agent's")
    tools: list[ToolItem] = Field(default=[])
    max_iterations: PositiveInt | None = Field(default=None, description="null: 10")


class FolderSpec(ResourceSpec):
    """A folder: ``folder_id`` is the folder it sits in (none: the top of its collection, or
    the caller's home folder when it has no collection either)."""

    category: Literal["folder"] = Field(default="folder", description="Resource type tag")
    description: str = ""


class CollectionSpec(ResourceSpec):
    """A workspace: folders and resources sit in it; its owners, grants and markings apply
    to everything inside. A collection sits in nothing."""

    category: Literal["collection"] = Field(default="collection", description="Resource type tag")
    description: str = ""
    collection_id: None = Field(default=None, description="Always null: collections do not nest.")
    folder_id: None = Field(default=None, description="Always null: a collection is in no folder.")


class TemplateSpec(ResourceSpec):
    """A document template: ``body`` in the sandboxed template language, using only the
    ``variables`` it declares; ``format`` says what the rendered text is."""

    category: Literal["template"] = Field(default="template", description="Resource type tag")
    format: DocumentFormat = Field(
        default="markdown", description="What the body renders to: markdown, html or text."
    )
    body: str = Field(description="The template (Jinja2, sandboxed): {{ name }}, {% for %}, ...")
    variables: list[TemplateVariable] = Field(default=[])
    description: str = ""


ColumnType = Literal["string", "number", "integer", "boolean", "date", "datetime", "json"]
COLUMN_TYPES: tuple[ColumnType, ...] = (
    "string", "number", "integer", "boolean", "date", "datetime", "json",
)  # fmt: skip
MAX_COLUMNS = 200
MAX_COLUMN_NAME = 63  # PostgreSQL's identifier length


class TableColumn(SpecModel):
    """One typed column. ``name``: letters, digits and '_', starting with a letter; unique
    in its table whatever the case (``Price`` and ``price`` are the same column)."""

    name: str = Field(description="An identifier: letters, digits and '_', a letter first.")
    type: ColumnType = Field(description="What every value in the column is.")
    description: str = ""
    nullable: bool = Field(default=True, description="Whether a row may leave it null.")


class TableSpec(ResourceSpec):
    """A table of typed rows (docs/tables.md): the document is its schema; the rows live in
    the platform database, outside the document and its versions."""

    category: Literal["table"] = Field(default="table", description="Resource type tag")
    description: str = ""
    columns: list[TableColumn] = Field(default=[], description="The columns, in order.")


class OntologySpec(ResourceSpec, OntologyBody):
    """Object types with typed properties and link types between them; the objects and links
    themselves are data (``/api/v1/ontologies/{id}/objects``), not part of the document."""

    category: Literal["ontology"] = Field(default="ontology", description="Resource type tag")


class McpServerSpec(ResourceSpec, McpServerBody):
    """An MCP server whose tools agents may list (domain/mcp.py)."""

    category: Literal["mcp_server"] = Field(default="mcp_server", description="Resource type tag")
    description: str = ""


# Written by the server into a secret's stored document; never taken from a user.
SECRET_SERVER_FIELDS = ("has_value", "value_updated_at")


class SecretSpec(ResourceSpec):
    """A secret (docs/secrets.md). ``value`` is write-only: it is kept encrypted outside the
    document and never returned; ``from_env`` names a server environment variable read when
    the secret is used instead (only admins may set it). ``has_value`` and
    ``value_updated_at`` are the server's: what a response shows in place of the value."""

    category: Literal["secret"] = Field(default="secret", description="Resource type tag")
    description: str = ""
    value: str | None = Field(
        default=None,
        exclude=True,  # never dumped, so never stored in the document or its versions
        repr=False,  # nor shown by a log line or a traceback that prints the spec
        json_schema_extra={"writeOnly": True},
        description="Write-only: the secret's value, stored encrypted and never returned. "
        "Required on create unless from_env is given; on PATCH, a new value rotates it.",
    )
    from_env: str | None = Field(
        default=None,
        description="Instead of a value: the server environment variable (DHUB_SECRET_...) "
        "that holds it, read each time the secret is used. Only admins may set it.",
    )
    has_value: bool = Field(
        default=False,
        json_schema_extra={"readOnly": True},
        description="Read-only: whether a value is stored (false when from_env gives it).",
    )
    value_updated_at: int | None = Field(
        default=None,
        json_schema_extra={"readOnly": True},
        description="Read-only: when the stored value was last set (Unix ms).",
    )


class InlineRoleConfig(SpecModel):
    """An agent's role written inline (an object in ``agent.roles``), as the runtime reads it."""

    name: str
    description: str = ""
    instructions: str
    model_provider: str | None = None
    model: str | None = None
    tools: list[ToolItem] = Field(default=[])
    max_iterations: PositiveInt | None = None


class ToolOverrides(SpecModel):
    """The object form of an agent's tool: the stored tool ``id`` with some of its fields set
    for this agent only. ``options`` are merged over the stored ones."""

    id: str = Field(description="The stored tool's id (tool.…).")
    name: str | None = Field(default=None, description="For display only, as in {id, name}.")
    description: str | None = Field(default=None, description="What the model is told.")
    options: JsonObject | None = Field(default=None, description="Merged over the tool's.")


class ActorOverrides(ToolOverrides):
    """The object form of an agent's actor. An agent may ask for confirmation of an ``auto``
    actor, never waive it for a ``confirm`` one: its owner decided that."""

    id: str = Field(description="The stored actor's id (actor.…).")
    confirmation_policy: Literal["confirm"] | None = Field(
        default=None, description="Only 'confirm': make an auto actor ask a person first."
    )


class _Served(BaseModel):
    """The server-owned fields of a response, as an AgentResponse has them."""

    id: str = Field(description="Server-assigned unique identifier")
    markings: list[str] = Field(
        default=[],
        description="Mandatory marking ids this resource requires; read-only — set via the "
        "marking guard endpoints, not Create/PATCH.",
    )
    effective_markings: list[str] = Field(default=[], description=EFFECTIVE_MARKINGS)
    created_at: int | None = Field(default=None, description="Creation timestamp (Unix ms)")
    updated_at: int | None = Field(default=None, description="Last update timestamp (Unix ms)")
    owners: list[Owner] = Field(default=[], description="Users and groups that own the resource.")
    my_share_scope: ShareScope | None = Field(
        default=None, description="How the current caller received access to the resource."
    )
    is_builtin: bool = Field(default=False, description="Whether the platform ships it")
    item: str = Field(deprecated=True, description="Deprecated: the resource id.")
    version: int = Field(default=1, description="Version number; every update adds one.")


_RESPONSE_CONFIG = ConfigDict(extra="ignore", strict=False)


class PromptResponse(PromptSpec, _Served):
    model_config = _RESPONSE_CONFIG


class ToolResponse(ToolSpec, _Served):
    model_config = _RESPONSE_CONFIG


class ActorResponse(ActorSpec, _Served):
    model_config = _RESPONSE_CONFIG


class RoleResponse(RoleSpec, _Served):
    model_config = _RESPONSE_CONFIG


class TemplateResponse(TemplateSpec, _Served):
    model_config = _RESPONSE_CONFIG


class FolderResponse(FolderSpec, _Served):
    model_config = _RESPONSE_CONFIG


class CollectionResponse(CollectionSpec, _Served):
    model_config = _RESPONSE_CONFIG


class TableResponse(TableSpec, _Served):
    model_config = _RESPONSE_CONFIG


class McpServerResponse(McpServerSpec, _Served):
    model_config = _RESPONSE_CONFIG


class OntologyResponse(OntologySpec, _Served):
    model_config = _RESPONSE_CONFIG


class SecretResponse(SecretSpec, _Served):
    model_config = _RESPONSE_CONFIG


@dataclass(frozen=True, slots=True)
class ResourceKind:
    category: Category
    label: str  # "Prompt": for messages
    spec: type[ResourceSpec]
    response: type[BaseModel]


KINDS: dict[str, ResourceKind] = {
    "prompt": ResourceKind("prompt", "Prompt", PromptSpec, PromptResponse),
    "tool": ResourceKind("tool", "Tool", ToolSpec, ToolResponse),
    "actor": ResourceKind("actor", "Actor", ActorSpec, ActorResponse),
    "role": ResourceKind("role", "Role", RoleSpec, RoleResponse),
    "folder": ResourceKind("folder", "Folder", FolderSpec, FolderResponse),
    "collection": ResourceKind("collection", "Collection", CollectionSpec, CollectionResponse),
    "template": ResourceKind("template", "Template", TemplateSpec, TemplateResponse),
    "table": ResourceKind("table", "Table", TableSpec, TableResponse),
    "ontology": ResourceKind("ontology", "Ontology", OntologySpec, OntologyResponse),
    "mcp_server": ResourceKind("mcp_server", "MCP server", McpServerSpec, McpServerResponse),
    "secret": ResourceKind("secret", "Secret", SecretSpec, SecretResponse),
}


# -- what the react runtime gets ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class InlineRole:
    """A delegate with every reference resolved. ``instructions`` is the delegate's whole
    system prompt; for a role that is another (react) agent, its rendered prompts and
    instructions, and ``agent_id`` names it. None for model or provider: the calling agent's;
    for iterations: 10 (engine/react_build.py)."""

    name: str
    description: str
    instructions: str
    model_provider: str | None
    model: str | None
    tools: list[AgentToolConfig | str]
    max_iterations: int | None
    agent_id: str | None = None


@dataclass(frozen=True, slots=True)
class ResolvedAgent:
    """A react agent's system prompt and callables, references replaced by what they name
    (built-in tools stay names)."""

    system_prompt: str
    tools: list[AgentToolConfig | str] = field(default_factory=list)
    actors: list[AgentActorConfig] = field(default_factory=list)
    roles: list[InlineRole] = field(default_factory=list)
    # What its tables, templates and ontologies give it (domain/knowledge.py).
    knowledge: list[KnowledgeTool] = field(default_factory=list)
