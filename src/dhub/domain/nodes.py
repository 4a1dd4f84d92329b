"""The 13 workflow node types, discriminated by ``type``, and the edges between them."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import MISSING, Discriminator, Field

from dhub.domain.base import (
    JsonObject,
    NonNegativeInt,
    NonNegativeSeconds,
    PositiveInt,
    PositiveSeconds,
    ReasoningEffort,
    SpecModel,
    VariableType,
)
from dhub.domain.documents import DocumentFormat, TemplateVariable
from dhub.domain.functions import ActorItem, ToolItem

# Fields typed ``X | MISSING`` are omitted from responses when the document left them out,
# so documents round-trip exactly (an explicit ``null`` stays ``null``).


class StartVariable(SpecModel):
    name: str
    type: VariableType
    required: bool = True
    default: Any | MISSING = MISSING
    description: str = ""


class StartConfig(SpecModel):
    variables: list[StartVariable] = Field(default=[])


class EndOutput(SpecModel):
    name: str
    type: VariableType
    value: Any = Field(description="Expression giving the output's value.")


class EndConfig(SpecModel):
    outputs: list[EndOutput] = Field(default=[])


class LLMConfig(SpecModel):
    model_provider: str
    model: str
    prompt: str
    system_prompt: str = ""
    reasoning_effort: ReasoningEffort | None = None
    output: str = "llm_output"
    # A string: one ``{{ … }}`` expression giving the schema at run time (engine/walk.py),
    # e.g. ``"{{ schema }}"`` for a schema that is one of the run's inputs.
    response: JsonObject | str = Field(
        default={},
        description="JSON schema, or {} for text; or one {{ … }} expression giving the schema.",
    )


class ToolCallConfig(SpecModel):
    tool: ToolItem
    input_mappings: JsonObject = Field(default={})
    outputs: JsonObject = Field(default={})
    timeout: PositiveSeconds = 30


class ActorCallConfig(SpecModel):
    actor: ActorItem
    input_mappings: JsonObject = Field(default={})
    outputs: JsonObject = Field(default={})
    timeout: PositiveSeconds = 30


class IfElseConfig(SpecModel):
    condition: str


class LoopConfig(SpecModel):
    mode: Literal["list", "count"] = "list"
    source: str | MISSING | None = MISSING
    iterator: str = "item"
    count: NonNegativeInt | MISSING | None = MISSING
    counter: str = "index"
    max_iterations: PositiveInt = 100
    body_node_ids: list[str] = Field(default=[])


class ParallelBranch(SpecModel):
    id: str
    node_ids: list[str] = Field(default=[])


class ParallelConfig(SpecModel):
    branches: list[ParallelBranch] = Field(default=[])
    join_strategy: Literal["all", "any", "all_settled"] = "all"
    timeout: PositiveSeconds = 300


class InputField(SpecModel):
    name: str
    type: VariableType
    description: str = ""
    required: bool = True
    options: list[Any] = Field(default=[])
    default: Any | MISSING = MISSING


class HumanInputConfig(SpecModel):
    prompt: str
    input_fields: list[InputField] = Field(default=[])
    timeout: PositiveSeconds = 86400
    assignees: list[str] = Field(default=[])
    on_timeout: Literal["error", "skip", "default"] = "error"


class ErrorHandlerConfig(SpecModel):
    target_node_id: str
    retry_count: NonNegativeInt = 0
    retry_delay_seconds: NonNegativeSeconds = 5
    retry_backoff: Literal["fixed", "linear", "exponential"] = "fixed"
    on_error: Literal["fallback", "continue", "fail"] = "fallback"
    fallback_node_id: str | MISSING | None = MISSING


class CodeConfig(SpecModel):
    language: Literal["python"] = "python"
    source: str
    input_mappings: JsonObject = Field(default={})
    outputs: JsonObject = Field(default={})
    timeout: PositiveSeconds = 30
    dependencies: list[str] = Field(default=[])


class TemplateConfig(SpecModel):
    template: str = Field(
        description="Template text rendered with the run's scope, or exactly the id of a "
        "stored template (template.…) rendered with 'variables'."
    )
    output: str = "text"
    variables: JsonObject | MISSING = Field(
        default=MISSING,
        description="A stored template's variables: name -> value expression (as in "
        "input_mappings). Only with a stored template.",
    )

    @property
    def bindings(self) -> dict[str, Any]:
        """``variables``, or none when the document leaves them out."""
        return {} if self.variables is MISSING else dict(self.variables)


class ResolvedTemplateConfig(TemplateConfig):
    """A template node's stored template, resolved for the run's user before the graph
    compiles (services/resolution.py): what the engine renders. Never written by users: the
    node's document keeps the id."""

    template_id: str
    template_version: int
    name: str
    format: DocumentFormat
    body: str
    declared: list[TemplateVariable]


VariableAction = Literal[
    "set", "append", "extend", "remove", "increment", "decrement", "merge", "clear"
]


class VariableOperation(SpecModel):
    action: VariableAction
    variable: str
    value: Any | MISSING = MISSING


class VariableConfig(SpecModel):
    operations: list[VariableOperation] = Field(default=[])


class _Node(SpecModel):
    id: str = Field(description="Unique node ID")
    metadata: JsonObject = Field(default={})


class StartWorkflowNode(_Node):
    type: Literal["start"]
    config: StartConfig


class EndWorkflowNode(_Node):
    type: Literal["end"]
    config: EndConfig


class LLMWorkflowNode(_Node):
    type: Literal["llm"]
    config: LLMConfig


class ToolCallWorkflowNode(_Node):
    type: Literal["tool_call"]
    config: ToolCallConfig


class ActorCallWorkflowNode(_Node):
    type: Literal["actor_call"]
    config: ActorCallConfig


class IfElseWorkflowNode(_Node):
    type: Literal["if_else"]
    config: IfElseConfig


class LoopWorkflowNode(_Node):
    type: Literal["loop"]
    config: LoopConfig


class ParallelWorkflowNode(_Node):
    type: Literal["parallel"]
    config: ParallelConfig


class HumanInputWorkflowNode(_Node):
    type: Literal["human_input"]
    config: HumanInputConfig


class ErrorHandlerWorkflowNode(_Node):
    type: Literal["error_handler"]
    config: ErrorHandlerConfig


class CodeWorkflowNode(_Node):
    type: Literal["code"]
    config: CodeConfig


class TemplateWorkflowNode(_Node):
    type: Literal["template"]
    config: TemplateConfig


class VariableWorkflowNode(_Node):
    type: Literal["variable"]
    config: VariableConfig


WorkflowNode = Annotated[
    StartWorkflowNode
    | EndWorkflowNode
    | LLMWorkflowNode
    | ToolCallWorkflowNode
    | ActorCallWorkflowNode
    | IfElseWorkflowNode
    | LoopWorkflowNode
    | ParallelWorkflowNode
    | HumanInputWorkflowNode
    | ErrorHandlerWorkflowNode
    | CodeWorkflowNode
    | TemplateWorkflowNode
    | VariableWorkflowNode,
    Discriminator("type"),
]

NODE_TYPES = (
    "start",
    "end",
    "llm",
    "tool_call",
    "actor_call",
    "if_else",
    "loop",
    "parallel",
    "human_input",
    "error_handler",
    "code",
    "template",
    "variable",
)


class Edge(SpecModel):
    source: str = Field(description="Source node ID")
    target: str = Field(description="Target node ID")
    condition: str | MISSING | None = Field(
        default=MISSING, description="Condition expression (unconditional if omitted)"
    )
