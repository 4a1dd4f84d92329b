"""A react agent's spec made runnable: its tools as ``ReactTool`` s, its graph's three nodes.

Stored references (tools, actors, roles and prompts by id) are resolved before this, by the
service that loads agents (it needs the database); what arrives here is inline.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from dhub.domain.agent import AgentCompaction, AgentSpec
from dhub.domain.functions import AgentActorConfig, AgentToolConfig
from dhub.domain.knowledge import KnowledgeTool
from dhub.domain.nodes import (
    Edge,
    EndConfig,
    EndOutput,
    EndWorkflowNode,
    StartConfig,
    StartVariable,
    StartWorkflowNode,
)
from dhub.domain.resources import InlineRole
from dhub.engine import compaction
from dhub.engine.actions import function_parameters
from dhub.engine.react_config import (
    ROLE_PARAMETERS,
    SET_VARIABLE,
    AgentNode,
    ReactConfig,
    ReactRole,
    ReactTool,
)

DEFAULT_TIMEOUT = 30.0
ROLE_ITERATIONS = 10  # a delegate's max_iterations unless its role says
_EMPTY_OBJECT: dict[str, Any] = {"type": "object", "properties": {}}
_VARIABLE_TYPES = ("string", "number", "boolean", "object", "array")


def react_config(
    spec: AgentSpec,
    system: str | None = None,
    tools: Sequence[AgentToolConfig | str] | None = None,
    actors: Sequence[AgentActorConfig] | None = None,
    budget: int | None = None,
    roles: Sequence[InlineRole | Mapping[str, Any]] | None = None,
    knowledge: Sequence[KnowledgeTool] = (),
) -> ReactConfig:
    """The loop's config. ``system``, ``tools`` and ``actors`` are the resolved ones (prompts
    rendered, references replaced by their stored configs); by default the spec's own, which
    must then be inline. ``budget`` is the input-token budget that applies (the agent's
    ``max_input_tokens`` or the server's default, capped at the model's context window):
    without one, nothing is compacted. ``roles`` are resolved roles, or inline role objects
    ({name, description, instructions, model_provider?, model?, tools?, max_iterations?}), by
    default the spec's. ``knowledge``: the tools its tables, templates and ontologies give it
    (domain/knowledge.py), resolved for the run's user."""
    agent = spec.agent
    if agent is None:
        raise ValueError("a react agent needs its 'agent' config")
    tool_items: list[Any] = list(agent.tools) if tools is None else list(tools)
    actor_items: list[Any] = list(agent.actors) if actors is None else list(actors)
    built = [_tool(item, "tool") for item in tool_items]
    built += [_tool(item, "actor") for item in actor_items]
    built += [_knowledge(item) for item in knowledge]
    variables = tuple(v.name for v in spec.conversations)
    if variables and not any(t.name == SET_VARIABLE for t in built):
        built.append(_set_variable(variables))
    settings = None if budget is None else _compaction(agent.compaction, budget)
    role_items: list[Any] = list(agent.roles) if roles is None else list(roles)
    delegates = tuple(_role(item, agent.model_provider, agent.model, settings)
                      for item in role_items)  # fmt: skip
    built += [ReactTool(r.name, r.description, ROLE_PARAMETERS, "role") for r in delegates]
    return ReactConfig(
        system=agent.instructions if system is None else system,
        model_provider=agent.model_provider,
        model=agent.model,
        tools=tuple(built),
        max_iterations=agent.max_iterations,
        outputs=dict(agent.outputs) if agent.outputs else None,
        reasoning_effort=agent.reasoning_effort,
        options=dict(agent.options or {}),
        conversation_variables=variables,
        compaction=settings,
        roles=delegates,
    )


def _role(item: Any, provider: str, model: str, settings: compaction.Settings | None) -> ReactRole:
    """A role as a delegate: its own instructions, tools and iteration budget; the parent's
    model unless it names one."""
    if isinstance(item, Mapping) and isinstance(item.get("name"), str):
        item = InlineRole(
            name=item["name"], description=str(item.get("description") or ""),
            instructions=str(item.get("instructions") or ""),
            model_provider=item.get("model_provider"), model=item.get("model"),
            tools=[AgentToolConfig.model_validate(t) if isinstance(t, Mapping) else t
                   for t in item.get("tools") or ()],
            max_iterations=item.get("max_iterations"),
        )  # fmt: skip
    if not isinstance(item, InlineRole):
        raise ValueError(
            f"role {item!r} is a reference: resolve the agent's stored references first"
        )
    config = ReactConfig(
        system=item.instructions,
        model_provider=item.model_provider or provider,
        model=item.model or model,
        tools=tuple(_tool(t, "tool") for t in item.tools),
        max_iterations=item.max_iterations or ROLE_ITERATIONS,
        compaction=settings,
    )
    return ReactRole(item.name, item.description, config)


def broken_config(spec: AgentSpec, problem: str) -> ReactConfig:
    """A react agent that cannot run as stored: every run of it fails saying ``problem``."""
    agent = spec.agent
    if agent is None:
        raise ValueError("a react agent needs its 'agent' config")
    return ReactConfig(agent.instructions, agent.model_provider, agent.model, broken=problem)


def _compaction(given: AgentCompaction | None, budget: int) -> compaction.Settings:
    """The agent's compaction settings over the server's defaults (compaction.Settings)."""
    defaults = compaction.Settings(budget)
    if given is None:
        return defaults
    chosen: dict[str, Any] = {
        name: value
        for name in ("enabled", "trigger_ratio", "target_ratio", "summary_max_tokens")
        if (value := getattr(given, name)) is not None
    }
    return dataclasses.replace(defaults, **chosen)


def _tool(item: Any, kind: str) -> ReactTool:
    if isinstance(item, str) and item == SET_VARIABLE:
        return ReactTool(SET_VARIABLE, "", _EMPTY_OBJECT, "builtin")
    if not isinstance(item, AgentToolConfig | AgentActorConfig):
        raise ValueError(
            f"{kind} {item!r} is a reference: resolve the agent's stored references first"
        )
    function = item.function
    options = dict(item.options)
    timeout = options.get("timeout")
    parameters = function_parameters(function.source, item.name, dict(function.inputs))
    return ReactTool(
        name=item.name,
        description=item.description,
        parameters=parameters or _EMPTY_OBJECT,
        kind="actor" if isinstance(item, AgentActorConfig) else "tool",
        confirm=isinstance(item, AgentActorConfig) and item.confirmation_policy == "confirm",
        source=function.source,
        entry=item.name,
        timeout=float(timeout) if isinstance(timeout, int | float) else DEFAULT_TIMEOUT,
        dependencies=tuple(function.dependencies),
        network=options.get("network") is True,
        outputs=dict(function.outputs) or None,
        decorators=tuple(d.model_dump(mode="json") for d in function.decorators),
        browser=isinstance(item, AgentToolConfig) and item.require_browser,
    )


def _knowledge(item: KnowledgeTool) -> ReactTool:
    return ReactTool(item.name, item.description, item.parameters, "knowledge",
                     confirm=item.confirm, knowledge=item)  # fmt: skip


def _set_variable(variables: tuple[str, ...]) -> ReactTool:
    parameters = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "enum": list(variables)},
            "value": {"description": "The variable's new value."},
        },
        "required": ["name", "value"],
    }
    return ReactTool(SET_VARIABLE, "Remember a value in a conversation variable, kept for "
                     "the conversation's later turns.", parameters, "builtin")  # fmt: skip


def react_nodes(spec: AgentSpec, config: ReactConfig) -> tuple[list[Any], list[Edge]]:
    """``start → agent → end``: ``message`` is the optional start input (a run started through
    the API; chat and events give the task in ``sys``), ``answer`` the only output."""
    answer_type = "string"
    if config.outputs is not None:
        declared = config.outputs.get("type")
        answer_type = declared if declared in _VARIABLE_TYPES else "object"
    start = StartWorkflowNode(id="start", type="start", config=StartConfig(variables=[
        StartVariable(name="message", type="string", required=False,
                      description="What to do (the user's message).")]))  # fmt: skip
    end = EndWorkflowNode(id="end", type="end", config=EndConfig(outputs=[
        EndOutput(name="answer", type=answer_type, value="{{ answer }}")]))  # type: ignore[arg-type]  # fmt: skip
    nodes: list[Any] = [start, AgentNode("agent", config), end]
    edges = [Edge(source="start", target="agent"), Edge(source="agent", target="end")]
    return nodes, edges
