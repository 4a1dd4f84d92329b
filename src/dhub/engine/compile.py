"""Compile an agent document into an immutable graph the stepper walks (DESIGN.md 3.2).

The document is validated once, here, with the same checks as the API; the compiled graph then
answers the stepper's questions without searching: each scope (the top level, a loop body, a
parallel branch) with its entry nodes, each node's outgoing and incoming links, and the error
handler that guards it.

A handler's fallback is wired in as a *failure link* from the guarded node to the fallback
node: taken when the guarded node fails for good, not taken when it succeeds. Joins and
dead-path elimination then treat it like any other link, so a fallback that is not needed is
skipped, and a node joining the normal and the fallback paths runs exactly once either way.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

from dhub.domain.agent import AgentSpec
from dhub.domain.knowledge import KnowledgeTool, for_code
from dhub.domain.nodes import (
    Edge,
    ErrorHandlerWorkflowNode,
    LoopWorkflowNode,
    ParallelWorkflowNode,
    WorkflowNode,
)
from dhub.domain.resources import ResolvedAgent
from dhub.engine.react_build import broken_config, react_config, react_nodes
from dhub.engine.react_config import AgentNode, ReactConfig
from dhub.engine.validate import validate_agent_document

ROOT = ""  # the id of the top-level scope
LinkKind = Literal["edge", "failure"]


@dataclass(frozen=True, slots=True)
class Link:
    """A way control flows from ``source`` to ``target``: a document edge (``index`` is its
    position in ``edges``, ``condition`` its expression, if any) or a failure link."""

    source: str
    target: str
    kind: LinkKind = "edge"
    index: int | None = None
    condition: str | None = None


@dataclass(frozen=True, slots=True)
class Scope:
    """A sub-graph run as a unit: the top level, one loop body or one parallel branch."""

    id: str
    node_ids: tuple[str, ...]
    entries: tuple[str, ...]  # nodes with no incoming link inside the scope


GraphNode = WorkflowNode | AgentNode


@dataclass(frozen=True)
class CompiledGraph:
    spec: AgentSpec
    nodes: MappingProxyType[str, GraphNode]
    order: tuple[str, ...]  # document order: the deterministic order of everything
    scopes: MappingProxyType[str, Scope]
    scope_of: MappingProxyType[str, str]  # node id -> scope id
    outgoing: MappingProxyType[str, tuple[Link, ...]]
    incoming: MappingProxyType[str, tuple[Link, ...]]
    handler_of: MappingProxyType[str, str]  # guarded node id -> error handler id
    start: str
    ends: tuple[str, ...]
    # A workflow's knowledge tools by name: what tool_call and actor_call nodes may name
    # besides functions (domain/knowledge.py), resolved for the run's user.
    knowledge: MappingProxyType[str, KnowledgeTool] = field(
        default_factory=lambda: MappingProxyType({})
    )

    @functools.cached_property
    def code_knowledge(self) -> tuple[dict[str, Any], ...]:
        """The knowledge tools as the calls of its functions carry them (their code may call
        them: domain/knowledge.py ``for_code``)."""
        return for_code(self.knowledge.values())

    def body_scope(self, loop_id: str) -> Scope:
        return self.scopes[loop_id]

    def branch_scope(self, parallel_id: str, branch_id: str) -> Scope:
        return self.scopes[f"{parallel_id}/{branch_id}"]


def compile_document(doc: Any) -> CompiledGraph:
    """Validate ``doc`` (InvalidInput lists every problem) and compile it."""
    return compile_spec(validate_agent_document(doc))


Budget = Callable[[str, str, int | None], int]  # provider, model, max_input_tokens -> budget


def compile_agent(
    doc: Any,
    budget: Budget | None = None,
    resolved: ResolvedAgent | str | None = None,
) -> CompiledGraph:
    """Validate (unless ``doc`` is a spec already) and compile an agent: a workflow, or a
    react agent. ``resolved``: the react agent's references resolved (services/references.py),
    or why they cannot be (its runs then fail saying so); without it, its references must be
    inline (its instructions the system prompt). ``budget`` gives its input-token budget,
    and with it compaction. A workflow takes only the ``knowledge`` of ``resolved``: its
    nodes' stored tools are resolved into the spec (services/resolution.py)."""
    spec = doc if isinstance(doc, AgentSpec) else validate_agent_document(doc)
    if spec.mode != "react" or spec.agent is None:
        known = resolved.knowledge if isinstance(resolved, ResolvedAgent) else ()
        return compile_spec(spec, knowledge=known)
    if isinstance(resolved, str):
        return compile_spec(spec, broken_config(spec, resolved))
    agent = spec.agent
    tokens = None if budget is None else budget(agent.model_provider, agent.model,
                                                agent.max_input_tokens)  # fmt: skip
    if resolved is None:
        return compile_spec(spec, react_config(spec, budget=tokens))
    config = react_config(
        spec, system=resolved.system_prompt, tools=resolved.tools, actors=resolved.actors,
        budget=tokens, roles=resolved.roles, knowledge=resolved.knowledge,
    )  # fmt: skip
    # The graph has them too: its function tools' code may call them (CallFunction.knowledge).
    return compile_spec(spec, config, resolved.knowledge)


def compile_spec(
    spec: AgentSpec, react: ReactConfig | None = None, knowledge: Sequence[KnowledgeTool] = ()
) -> CompiledGraph:
    """Compile a validated spec. A react agent needs its ``react`` config (references
    resolved, see ``react_config``): it becomes ``start → agent → end``. ``knowledge``: the
    tools a workflow's nodes may name (a react agent's model has them in its config), and
    the code of its functions may call."""
    if spec.mode != "workflow":
        if react is None:
            raise ValueError("a react agent compiles with its resolved config (react_config)")
        return _graph(spec, *react_nodes(spec, react), knowledge)
    return _graph(spec, list(spec.nodes), list(spec.edges), knowledge)


def _graph(
    spec: AgentSpec,
    node_list: list[GraphNode],
    edges: list[Edge],
    knowledge: Sequence[KnowledgeTool] = (),
) -> CompiledGraph:
    nodes: dict[str, GraphNode] = {node.id: node for node in node_list}
    order = tuple(nodes)
    scope_members, scope_of = _scopes(node_list)
    links = _links(node_list, edges, nodes)
    outgoing: dict[str, list[Link]] = {n: [] for n in order}
    incoming: dict[str, list[Link]] = {n: [] for n in order}
    for link in links:
        outgoing[link.source].append(link)
        incoming[link.target].append(link)
    scopes = {
        sid: Scope(
            sid,
            tuple(members),
            tuple(
                n
                for n in members
                if nodes[n].type != "error_handler"
                and not any(scope_of[link.source] == sid for link in incoming[n])
            ),
        )
        for sid, members in scope_members.items()
    }
    handler_of = {
        node.config.target_node_id: node.id
        for node in node_list
        if isinstance(node, ErrorHandlerWorkflowNode)
    }
    return CompiledGraph(
        spec=spec,
        nodes=MappingProxyType(nodes),
        order=order,
        scopes=MappingProxyType(scopes),
        scope_of=MappingProxyType(scope_of),
        outgoing=MappingProxyType({k: tuple(v) for k, v in outgoing.items()}),
        incoming=MappingProxyType({k: tuple(v) for k, v in incoming.items()}),
        handler_of=MappingProxyType(handler_of),
        start=next(n.id for n in node_list if n.type == "start"),
        ends=tuple(n.id for n in node_list if n.type == "end"),
        knowledge=MappingProxyType({k.name: k for k in knowledge}),
    )


def _scopes(nodes: list[GraphNode]) -> tuple[dict[str, list[str]], dict[str, str]]:
    """Members of every scope, in document order, and the scope of every node."""
    scope_of: dict[str, str] = {}
    for node in nodes:
        if isinstance(node, LoopWorkflowNode):
            for member in node.config.body_node_ids:
                scope_of[member] = node.id
        elif isinstance(node, ParallelWorkflowNode):
            for branch in node.config.branches:
                for member in branch.node_ids:
                    scope_of[member] = f"{node.id}/{branch.id}"
    members: dict[str, list[str]] = {ROOT: []}
    for node in nodes:
        if isinstance(node, LoopWorkflowNode):
            members.setdefault(node.id, [])
        elif isinstance(node, ParallelWorkflowNode):
            for branch in node.config.branches:
                members.setdefault(f"{node.id}/{branch.id}", [])
    for node in nodes:
        sid = scope_of.setdefault(node.id, ROOT)
        members[sid].append(node.id)
    return members, scope_of


def _links(
    node_list: list[GraphNode], edges: list[Edge], nodes: dict[str, GraphNode]
) -> list[Link]:
    links = [
        Link(e.source, e.target, "edge", i, e.condition if isinstance(e.condition, str) else None)
        for i, e in enumerate(edges)
    ]
    for node in node_list:
        if isinstance(node, ErrorHandlerWorkflowNode) and node.config.on_error == "fallback":
            fallback = node.config.fallback_node_id
            if isinstance(fallback, str) and fallback in nodes:
                links.append(Link(node.config.target_node_id, fallback, "failure"))
    return links
