"""A react agent as compiled for running (DESIGN.md 3.3): its config, tools and roles, and the
node that runs its loop. Pure data: compile.py builds it, react.py runs it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from dhub.domain.knowledge import KnowledgeTool
from dhub.engine import compaction

ToolKind = Literal["tool", "actor", "builtin", "role", "knowledge"]
SET_VARIABLE = "set_conversation_variable"
MAX_RESULT_CHARS = 20_000  # a tool result longer than this is cut for the model (not the log)
ROLE_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {"task": {"type": "string", "description": "What to do, with everything "
                                                             "needed to do it."}},
    "required": ["task"],
}  # fmt: skip


@dataclass(frozen=True)
class ReactTool:
    """What the model may call. ``kind`` tool runs at once, actor after a person's yes when
    ``confirm``; builtin is performed by the engine itself; role runs a delegate's loop;
    knowledge is an operation the runtime performs on a listed table, template or ontology
    (after a person's yes too when ``confirm``)."""

    name: str
    description: str
    parameters: dict[str, Any]
    kind: ToolKind = "tool"
    confirm: bool = False
    source: str = ""
    entry: str | None = None
    timeout: float = 30.0
    dependencies: tuple[str, ...] = ()
    network: bool = False
    outputs: dict[str, Any] | None = None
    decorators: tuple[dict[str, Any], ...] = ()
    browser: bool = False  # require_browser
    knowledge: KnowledgeTool | None = None  # kind "knowledge": what the runtime performs

    def definition(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description,
                "parameters": self.parameters}  # fmt: skip


@dataclass(frozen=True)
class ReactConfig:
    """A react agent (or a role) resolved for running: its system prompt rendered, its tools
    inline, its roles with their own configs."""

    system: str
    model_provider: str
    model: str
    tools: tuple[ReactTool, ...] = ()
    max_iterations: int = 50
    outputs: dict[str, Any] | None = None
    reasoning_effort: str | None = None
    options: dict[str, Any] = field(default_factory=dict)
    conversation_variables: tuple[str, ...] = ()
    compaction: compaction.Settings | None = None  # None: no budget is known
    roles: tuple[ReactRole, ...] = ()
    # Why the agent cannot run as stored (a reference deleted since it was saved): a run that
    # meets it fails with this message instead of calling anything.
    broken: str | None = None

    def tool(self, name: str) -> ReactTool | None:
        return next((t for t in self.tools if t.name == name), None)

    def role(self, name: str) -> ReactConfig:
        return next(r.config for r in self.roles if r.name == name)

    def definitions(self) -> list[dict[str, Any]]:
        return [t.definition() for t in self.tools]


@dataclass(frozen=True)
class ReactRole:
    name: str
    description: str
    config: ReactConfig


@dataclass(frozen=True)
class AgentNode:
    """The node that runs the loop (not a document node: react agents have no nodes)."""

    id: str
    config: ReactConfig
    type: Literal["agent"] = "agent"
