"""The Agent resource as published in ``shared/seed/AgentResponse.schema.txt``.

``AgentSpec`` is the part a user writes (Create/PATCH bodies); ``AgentResponse`` adds the
server-owned envelope. Field order follows the seed.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import MISSING, BaseModel, EmailStr, Field

from dhub.domain.base import (
    JsonObject,
    PositiveInt,
    Ratio,
    ReasoningEffort,
    SpecModel,
    SummaryTokens,
    VariableType,
)
from dhub.domain.functions import ActorItem, RoleItem, ToolItem
from dhub.domain.nodes import Edge, WorkflowNode

InputMode = Literal["chat", "event"]
AgentMode = Literal["react", "workflow"]
OwnerType = Literal["user", "group", "public"]
ShareScope = Literal["owner", "grant", "admin"]

# Fields only the server writes. Clients may not send them in Create/PATCH bodies.
SERVER_OWNED_FIELDS = (
    "id",
    "created_at",
    "updated_at",
    "owners",
    "my_share_scope",
    "is_builtin",
    "item",
    "version",
    "effective_markings",
)


# Where the built-in agents' names are unique (store/agents.py ``folder_key``): among
# themselves, apart from every folder. No agent may name it as its folder_id.
BUILTIN_FOLDER = "(built-in)"


class PromptRef(SpecModel):
    prompt_id: str
    variables: JsonObject | None = Field(
        default=None, description="{{var}} bindings for the referenced Prompt"
    )


class AgentCompaction(SpecModel):
    enabled: bool | None = Field(
        default=None, description="Whether conversation compaction is enabled for the agent."
    )
    trigger_ratio: Ratio | None = Field(
        default=None, description="Fraction of the input-token budget that triggers compaction."
    )
    target_ratio: Ratio | None = Field(
        default=None,
        description="Fraction of the input-token budget targeted after compaction. "
        "It must be lower than trigger_ratio.",
    )
    summary_max_tokens: SummaryTokens | None = Field(
        default=None,
        description="Maximum number of tokens allowed in the generated compaction summary.",
    )


class AgentNodeConfig(SpecModel):
    instructions: str = Field(description="Agent system instructions")
    prompts: list[PromptRef] = Field(
        default=[],
        description="Reusable Prompt references. Rendered in list order and joined with '\\n\\n' "
        "as the system prefix; inline instructions is appended as a suffix.",
    )
    model_provider: str = Field(description="LLM provider name")
    model: str = Field(description="LLM model name")
    tools: list[ToolItem] = Field(default=[], description="Available tools")
    actors: list[ActorItem] = Field(default=[])
    roles: list[RoleItem] = Field(default=[])
    outputs: JsonObject | None = None
    max_iterations: PositiveInt = Field(default=50, description="Maximum iteration count")
    max_input_tokens: PositiveInt | None = Field(
        default=None,
        description="Maximum input-token budget for the system prompt and conversation history "
        "before each model call; null uses the D.Hub default.",
    )
    compaction: AgentCompaction | None = None
    options: JsonObject | None = None
    reasoning_effort: ReasoningEffort | None = None


class ConversationVariable(SpecModel):
    name: str
    type: VariableType
    description: str
    default: Any | MISSING = MISSING


class AgentSpec(SpecModel):
    """What a user writes to create or replace an agent."""

    name: Annotated[str, Field(min_length=1, max_length=200)] = Field(description="Resource name")
    alias: str | None = Field(default=None, description="Display name shown to users.")
    category: Literal["agent"] = Field(default="agent", description="Resource type tag")
    type: str | None = Field(default=None, description="Subtype within category")
    collection_id: str | None = Field(default=None, description="Parent collection ID")
    folder_id: str | None = Field(default=None, description="Identifier of the containing folder.")
    tags: list[str] | None = Field(default=None, description="Classification labels")
    description: str
    input_mode: InputMode = "chat"
    mode: AgentMode = "react"
    agent: AgentNodeConfig | None = None
    nodes: list[WorkflowNode] = Field(default=[])
    edges: list[Edge] = Field(default=[])
    tables: list[str] = Field(default=[])
    templates: list[str] = Field(default=[])
    ontologies: list[str] = Field(default=[])
    conversations: list[ConversationVariable] = Field(default=[])
    options: JsonObject | None = None


class Owner(BaseModel):
    id: str = Field(description='"user." | "group." | "public.all"')
    type: OwnerType
    display_name: str
    avatar_url: str | None = None
    avatar_config: JsonObject | None = None
    email: EmailStr | None = None


EFFECTIVE_MARKINGS = (
    "Read-only: its own markings and those of every folder and the collection it sits in; a "
    "caller must hold all of them to see it."
)


class AgentResponse(BaseModel):
    """Data returned for Agent, exactly the seed's shape plus ``version``."""

    id: str = Field(description="Server-assigned unique identifier")
    name: str = Field(description="Resource name")
    alias: str | None = Field(default=None, description="Display name shown to users.")
    category: str = Field(description="Resource type tag")
    type: str | None = Field(default=None, description="Subtype within category")
    collection_id: str | None = Field(default=None, description="Parent collection ID")
    folder_id: str | None = Field(default=None, description="Identifier of the containing folder.")
    tags: list[str] | None = Field(default=None, description="Classification labels")
    description: str
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
    input_mode: InputMode = "chat"
    mode: AgentMode = "react"
    agent: AgentNodeConfig | None = None
    nodes: list[WorkflowNode] = Field(default=[])
    edges: list[Edge] = Field(default=[])
    tables: list[str] = Field(default=[])
    templates: list[str] = Field(default=[])
    ontologies: list[str] = Field(default=[])
    conversations: list[ConversationVariable] = Field(default=[])
    options: JsonObject | None = None
    is_builtin: bool = Field(
        default=False, description="Whether this is a platform-shipped built-in agent"
    )
    item: str = Field(deprecated=True, description="Deprecated: the resource id.")
    version: int = Field(default=1, description="Version number; every update adds one.")
