"""What a react agent's references name, for the runtime (services/graphs.py ``Graphs``).

``resolve_agent`` renders the system prompt and replaces every reference (a tool, actor or
role by id, the object form's overrides applied, another agent as a role) with the inline
config it names: the latest version, checked again against the run's user by the one
reference check (services/references.py ``Reach``): access may have been lost since the
agent was saved, and whoever saved it is not who runs it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import MISSING, ValidationError

from dhub.access.principal import Principal
from dhub.domain.agent import AgentSpec, PromptRef
from dhub.domain.documents import is_template_id
from dhub.domain.errors import FieldError, InvalidInput
from dhub.domain.functions import ITEM_TAGS, AgentActorConfig, AgentResourceRef, AgentToolConfig
from dhub.domain.knowledge import KNOWLEDGE_FIELDS, KnowledgeTool
from dhub.domain.mcp import McpToolsUse
from dhub.domain.nodes import (
    ActorCallWorkflowNode,
    ResolvedTemplateConfig,
    TemplateWorkflowNode,
    ToolCallWorkflowNode,
)
from dhub.domain.pointers import from_validation_error, join
from dhub.domain.resources import (
    ActorOverrides,
    ActorSpec,
    InlineRole,
    InlineRoleConfig,
    PromptSpec,
    ResolvedAgent,
    RoleSpec,
    TemplateSpec,
    ToolOverrides,
    ToolSpec,
    render_template,
    unreachable,
)
from dhub.services import mcp_servers
from dhub.services.knowledge import collisions, tools_of
from dhub.services.mcp_client import McpClients
from dhub.services.references import (
    OVERRIDES,
    UNREACHABLE,
    Loc,
    Reach,
    binding_errors,
    kind_of,
    listed_knowledge,
    overrides_of,
    template_bindings,
)
from dhub.store.db import Conn, Database


class UnresolvableAgent(InvalidInput):
    """An agent refers to something its runner cannot use (deleted, unshared or marked since
    it was saved, or never theirs), or holds an item the runtime cannot call; ``errors``
    point into the agent document."""


class _Resolver:
    """Loads what references name (once each, through ``reach``), collecting what cannot be
    resolved."""

    def __init__(self, reach: Reach) -> None:
        self.reach = reach
        self.errors: list[FieldError] = []
        self.mcp_uses: list[tuple[Loc, McpToolsUse]] = []  # the MCP servers it lists

    async def document(self, at: Loc, ref_id: str, kind: str) -> str | None:
        row = await self.reach.use(ref_id, kind)
        if row is None:
            self.fail(at, unreachable(kind, ref_id), UNREACHABLE)
            return None
        return row.record.document

    def fail(self, at: Loc, message: str, code: str) -> None:
        self.errors.append(FieldError(join(*at), message, code))

    async def knowledge(self, spec: AgentSpec) -> list[KnowledgeTool]:
        """The tools its tables, templates and ontologies give the agent, for the run's
        user: only those the user may read now."""
        found = await listed_knowledge(self.reach, spec)
        self.errors += found.errors
        return tools_of(found.records, spec.options)

    async def system_prompt(self, at: Loc, prompts: Sequence[PromptRef], instructions: str) -> str:
        parts = []
        for i, ref in enumerate(prompts):
            loc = (*at, "prompts", i)
            document = await self.document((*loc, "prompt_id"), ref.prompt_id, "prompt")
            if document is None:
                continue
            prompt = PromptSpec.model_validate_json(document)
            problems = binding_errors(loc, ref.prompt_id, prompt, ref.variables)
            if problems:
                self.errors += problems
                continue
            values: dict[str, Any] = {
                v.name: "" if v.default is MISSING else v.default for v in prompt.variables
            }
            values.update(ref.variables or {})
            parts.append(render_template(prompt.template, values))
        return "\n\n".join([*parts, instructions]) if parts else instructions

    async def tools(
        self, at: Loc, items: Sequence[Any], mcp: bool = False
    ) -> list[AgentToolConfig | str]:
        """The tool items as the runtime calls them; ``mcp``: MCP servers may be among them
        (the agent's own tools), collected in ``mcp_uses`` for ``mcp_tools``."""
        found: list[AgentToolConfig | str] = []
        for i, item in enumerate(items):
            use = mcp_servers.use_of(item)
            if use is not None:
                if mcp:
                    self.mcp_uses.append(((*at, i), use))
                else:
                    self.fail((*at, i), _MCP_IN_ROLE, "wrong_kind")
                continue
            tool = await self.tool((*at, i), item)
            if tool is not None:
                found.append(tool)
        return found

    async def mcp_targets(self, user_id: str) -> list[mcp_servers.Placed]:
        """The MCP servers collected so far, through the one reference check."""
        if not self.mcp_uses:
            return []
        placed, errors = await mcp_servers.targets_of(
            self.reach.conn, self.reach, user_id, self.mcp_uses
        )
        self.errors += errors
        return placed

    async def tool(self, at: Loc, item: Any) -> AgentToolConfig | str | None:
        """A tool item as the runtime calls it (None, with an error, when it cannot be)."""
        if isinstance(item, AgentToolConfig):
            return item
        if isinstance(item, str) and kind_of(item) is None:
            return item  # a built-in tool, by name
        found = await self._stored(at, item, "tool")
        if found is None:
            return None
        tool, changes = ToolSpec.model_validate_json(found[0]), found[1]
        return AgentToolConfig(
            name=tool.name,
            description=_given(changes.description, tool.description),
            type=tool.type,
            function=tool.function,
            require_browser=tool.require_browser,
            options={**tool.options, **(changes.options or {})},
        )

    async def actors(self, at: Loc, items: Sequence[Any]) -> list[AgentActorConfig]:
        found = [await self.actor((*at, i), item) for i, item in enumerate(items)]
        return [a for a in found if a is not None]

    async def actor(self, at: Loc, item: Any) -> AgentActorConfig | None:
        """An actor item as the runtime calls it (None, with an error, when it cannot be)."""
        if isinstance(item, AgentActorConfig):
            return item
        found = await self._stored(at, item, "actor")
        if found is None:
            return None
        actor, changes = ActorSpec.model_validate_json(found[0]), found[1]
        policy = actor.confirmation_policy
        if isinstance(changes, ActorOverrides) and changes.confirmation_policy:
            policy = changes.confirmation_policy
        return AgentActorConfig(
            name=actor.name,
            description=_given(changes.description, actor.description),
            function=actor.function,
            confirmation_policy=policy,
            options={**actor.options, **(changes.options or {})},
        )

    async def _stored(self, at: Loc, item: Any, what: str) -> tuple[str, ToolOverrides] | None:
        """The stored document a tool or actor item names, with the item's overrides (none
        for a plain reference)."""
        if isinstance(item, str):
            changes = OVERRIDES[what](id=item)
        elif isinstance(item, AgentResourceRef):
            changes, at = OVERRIDES[what](id=item.id), (*at, "id")
        elif isinstance(item, dict):
            errors: list[FieldError] = []
            parsed = overrides_of(item, at, what, errors)
            if parsed is None:
                self.errors += errors
                return None
            changes, at = parsed, (*at, "id")
        else:
            self.fail(at, _NOT_CALLABLE.format(what=what), "not_callable")
            return None
        document = await self.document(at, changes.id, what)
        return None if document is None else (document, changes)

    async def template(self, at: Loc, node: TemplateWorkflowNode) -> ResolvedTemplateConfig | None:
        """A template node's stored template, latest version, for the run's user."""
        config = node.config
        template_id = config.template.strip()
        row = await self.reach.use(template_id, "template")
        if row is None:
            self.fail((*at, "template"), unreachable("template", template_id), UNREACHABLE)
            return None
        template = TemplateSpec.model_validate_json(row.record.document)
        # Bindings that no longer fit (the template changed since the agent was saved) stop
        # a run from starting; a run already going fails at the node, naming the variable.
        self.errors += template_bindings(at, template_id, template, config.bindings)
        return ResolvedTemplateConfig(
            template=config.template,
            output=config.output,
            variables=config.variables,
            template_id=template_id,
            template_version=row.record.version,
            name=template.name,
            format=template.format,
            body=template.body,
            declared=template.variables,
        )

    async def roles(self, at: Loc, items: Sequence[Any]) -> list[InlineRole]:
        out: list[InlineRole] = []
        for i, item in enumerate(items):
            loc = (*at, i)
            if isinstance(item, dict):
                role = await self._inline_role(loc, item)
            else:
                ref_id = item if isinstance(item, str) else item.id
                if kind_of(ref_id) == "agent":
                    role = await self._agent_role(loc, ref_id)
                else:
                    role = await self._stored_role(loc, ref_id)
            if role is not None:
                out.append(role)
        return out

    async def _inline_role(self, at: Loc, item: dict[str, Any]) -> InlineRole | None:
        try:
            config = InlineRoleConfig.model_validate(item)
        except ValidationError as exc:
            for err in from_validation_error(exc, item, ITEM_TAGS):
                self.errors.append(FieldError(join(*at) + err.loc, err.message, err.code))
            return None
        return await self._role(at, config, config.instructions)

    async def _stored_role(self, at: Loc, ref_id: str) -> InlineRole | None:
        document = await self.document(at, ref_id, "role")
        if document is None:
            return None
        spec = RoleSpec.model_validate_json(document)
        return await self._role(at, spec, spec.instructions)

    async def _role(
        self, at: Loc, role: InlineRoleConfig | RoleSpec, instructions: str
    ) -> InlineRole:
        return InlineRole(
            name=role.name,
            description=role.description,
            instructions=instructions,
            model_provider=role.model_provider,
            model=role.model,
            tools=await self.tools((*at, "tools"), role.tools),
            max_iterations=role.max_iterations,
        )

    async def _agent_role(self, at: Loc, agent_id: str) -> InlineRole | None:
        document = await self.document(at, agent_id, "agent")
        if document is None:
            return None
        spec = AgentSpec.model_validate_json(document)
        if spec.agent is None:
            self.fail(at, f"'{agent_id}' is a workflow agent: it cannot be a role.", "not_react")
            return None
        config = spec.agent
        # Its own references are reported at the role that brought them in.
        inner = _Resolver(self.reach)
        prompt = await inner.system_prompt(("agent",), config.prompts, config.instructions)
        tools = await inner.tools(("agent", "tools"), config.tools)
        for err in inner.errors:
            self.fail(at, f"In the role's agent '{agent_id}' at {err.loc}: {err.message}", err.code)
        return InlineRole(
            name=spec.name,
            description=spec.description,
            instructions=prompt,
            model_provider=config.model_provider,
            model=config.model,
            tools=tools,
            max_iterations=config.max_iterations,
            agent_id=agent_id,
        )


def _given(override: str | None, stored: str) -> str:
    return stored if override is None else override


_MCP_IN_ROLE = (
    "A role cannot list an MCP server: list it in the agent's own tools (its tools are then "
    "the agent's), or give the role stored tools."
)
_NOT_CALLABLE = (
    "This {what} is a free-form object, which the runtime cannot call: write an inline {what} "
    "(with 'function') or name a stored one."
)


async def resolve_agent(
    db_or_conn: Database | Conn,
    spec: AgentSpec,
    principal: Principal,
    mcp: McpClients | None = None,
) -> ResolvedAgent:
    """The react agent ``spec`` ready to run: its system prompt (the rendered prompts in order,
    each with its bindings over the prompt's defaults, joined with "\\n\\n", then
    "\\n\\n" + instructions; just the instructions without prompts) and its tools, actors and
    roles as inline configs, references resolved to their latest versions (built-in tools stay
    names) for ``principal``, who runs it, and the tools of the MCP servers it lists (from
    ``mcp``, after the database's part). Raises UnresolvableAgent, listing every reference
    it cannot use."""
    if spec.agent is None:
        raise ValueError("resolve_agent needs a react agent: this one has no 'agent' config")
    if isinstance(db_or_conn, Database):
        async with db_or_conn.read(snapshot=True) as conn:
            resolved, placed = await _resolve(conn, spec, principal)
    else:
        resolved, placed = await _resolve(db_or_conn, spec, principal)
    if not placed:
        return resolved
    found = await _mcp_tools(
        spec,
        placed,
        mcp,
        [t.name for t in resolved.knowledge]
        + [t if isinstance(t, str) else t.name for t in (*resolved.tools, *resolved.actors)]
        + [r.name for r in resolved.roles],
    )
    return dataclasses.replace(resolved, knowledge=[*resolved.knowledge, *found])


async def _mcp_tools(
    spec: AgentSpec, placed: list[mcp_servers.Placed], mcp: McpClients | None, taken: list[str]
) -> list[KnowledgeTool]:
    """The MCP servers' tools, each with a name no other tool of the agent has."""
    if mcp is None:
        errors = [FieldError(join(*at), _NO_MCP, "unavailable") for at, _, _ in placed]
        raise unresolvable(spec, errors)
    found = await mcp_servers.agent_tools(mcp, placed)
    errors = found.errors
    for name in collisions(found.tools, taken):
        at = next(at for at, use, t in placed if name in _names_of(found.tools, t.server_id))
        message = (
            f"An MCP server gives the agent a tool named '{name}', which another of its tools "
            "has too: give the server a 'prefix' here ({'id': ..., 'prefix': 'gh_'}), or list "
            "only the tools the agent needs ('tools')."
        )
        errors.append(FieldError(join(*at), message, "duplicate_tool"))
    if errors:
        raise unresolvable(spec, errors)
    return found.tools


def _names_of(tools: Sequence[KnowledgeTool], server_id: str) -> set[str]:
    return {t.name for t in tools if mcp_servers.server_of(t) == server_id}


_NO_MCP = (
    "MCP servers' tools need the dhub server's runtime: run the agent there (e.g. `dhub agents "
    "run`)."
)


async def _resolve(
    conn: Conn, spec: AgentSpec, principal: Principal
) -> tuple[ResolvedAgent, list[mcp_servers.Placed]]:
    config = spec.agent
    assert config is not None
    resolver = _Resolver(Reach(conn, principal))
    system_prompt = await resolver.system_prompt(("agent",), config.prompts, config.instructions)
    tools = await resolver.tools(("agent", "tools"), config.tools, mcp=True)
    actors = await resolver.actors(("agent", "actors"), config.actors)
    roles = await resolver.roles(("agent", "roles"), config.roles)
    knowledge = await resolver.knowledge(spec)
    placed = await resolver.mcp_targets(principal.user_id)
    if resolver.errors:
        raise unresolvable(spec, resolver.errors)
    return ResolvedAgent(system_prompt, tools, actors, roles, knowledge), placed


def unresolvable(spec: AgentSpec, errors: list[FieldError]) -> UnresolvableAgent:
    return UnresolvableAgent(
        errors,
        f"The agent '{spec.name}' cannot run as stored: "
        + "; ".join(f"{e.loc}: {e.message}" for e in errors[:3]),
    )


NodeItems = dict[str, AgentToolConfig | AgentActorConfig | ResolvedTemplateConfig | str]


@dataclass(frozen=True, slots=True)
class ResolvedNodes:
    """A workflow's references resolved for a run's user: the stored tools and actors its
    nodes call, as inline configs by node id, and the tools its knowledge gives it."""

    items: NodeItems
    knowledge: list[KnowledgeTool]


async def resolve_nodes(
    db: Database, spec: AgentSpec, principal: Principal, mcp: McpClients | None = None
) -> tuple[ResolvedNodes, list[FieldError]]:
    """The stored tools and actors a workflow's tool_call and actor_call nodes name, the
    stored templates its template nodes render, the MCP servers' tools its nodes call (from
    ``mcp``, after the database's part) and the knowledge it lists, and an error for each
    that ``principal`` cannot use (such a node keeps its reference: a run that reaches it
    fails there, saying so, engine/actions.py)."""
    found: NodeItems = {}
    async with db.read(snapshot=True) as conn:
        resolver = _Resolver(Reach(conn, principal))
        knowledge = await resolver.knowledge(spec)
        names = {k.name for k in knowledge}
        callers: dict[tuple[str | int, ...], str] = {}  # where each MCP use is -> its node
        for i, node in enumerate(spec.nodes):
            item: AgentToolConfig | AgentActorConfig | ResolvedTemplateConfig | str | None = None
            at: Loc = ("nodes", i, "config", "tool")
            use = (
                mcp_servers.use_of(node.config.tool)
                if isinstance(node, ToolCallWorkflowNode)
                else None
            )
            if use is not None:
                resolver.mcp_uses.append((at, use))
                callers[at] = node.id
            elif isinstance(node, ToolCallWorkflowNode) and _stored(node.config.tool, names):
                item = await resolver.tool(at, node.config.tool)
            elif isinstance(node, ActorCallWorkflowNode) and _stored(node.config.actor, names):
                item = await resolver.actor(("nodes", i, "config", "actor"), node.config.actor)
            elif isinstance(node, TemplateWorkflowNode) and is_template_id(node.config.template):
                item = await resolver.template(("nodes", i, "config"), node)
            if isinstance(item, AgentToolConfig | AgentActorConfig | ResolvedTemplateConfig):
                found[node.id] = item
        placed = await resolver.mcp_targets(principal.user_id)
    errors = resolver.errors
    if placed and mcp is None:
        errors += [FieldError(join(*at), _NO_MCP, "unavailable") for at, _, _ in placed]
    elif placed and mcp is not None:
        tools = await mcp_servers.agent_tools(mcp, placed)
        errors += tools.errors
        for (at, _, _), tool in zip(placed, mcp_servers.per_use(placed, tools.tools), strict=True):
            if tool is not None:
                tool = _unique(tool, names)
                names.add(tool.name)
                knowledge.append(tool)
                found[callers[at]] = tool.name
    return ResolvedNodes(found, knowledge), errors


def _unique(tool: KnowledgeTool, taken: Collection[str]) -> KnowledgeTool:
    """A node's MCP tool under a name no other tool of the workflow has (its nodes and
    code call it by that name; two servers may both have a 'search')."""
    name, n = tool.name, 1
    while name in taken:
        n += 1
        name = f"{tool.name[:60]}_{n}"
    return dataclasses.replace(tool, name=name) if name != tool.name else tool


def with_node_items(spec: AgentSpec, items: NodeItems) -> AgentSpec:
    """``spec`` with those nodes calling the resolved configs."""
    if not items:
        return spec
    nodes = []
    for node in spec.nodes:
        item = items.get(node.id)
        if isinstance(node, ToolCallWorkflowNode) and isinstance(item, AgentToolConfig | str):
            # A string: the name of the knowledge tool it calls (an MCP server's tool).
            node = node.model_copy(update={"config": node.config.model_copy(update={"tool": item})})
        elif isinstance(node, TemplateWorkflowNode) and isinstance(item, ResolvedTemplateConfig):
            node = node.model_copy(update={"config": item})
        elif isinstance(node, ActorCallWorkflowNode) and isinstance(item, AgentActorConfig):
            config = node.config.model_copy(update={"actor": item})
            node = node.model_copy(update={"config": config})
        nodes.append(node)
    return spec.model_copy(update={"nodes": nodes})


def _stored(item: Any, knowledge: Collection[str] = ()) -> bool:
    """Whether a tool or actor item names a stored one (any form but inline, and but the
    name of a knowledge tool)."""
    if isinstance(item, str) and item in knowledge:
        return False
    return not isinstance(item, AgentToolConfig | AgentActorConfig)


def refers(spec: AgentSpec) -> bool:
    """Whether an agent names anything stored (so it needs resolving before it compiles)."""
    if any(getattr(spec, name) for name in KNOWLEDGE_FIELDS):
        return True
    for node in spec.nodes:
        if isinstance(node, TemplateWorkflowNode) and is_template_id(node.config.template):
            return True
        if isinstance(node, ToolCallWorkflowNode) and _stored(node.config.tool):
            return True
        if isinstance(node, ActorCallWorkflowNode) and _stored(node.config.actor):
            return True
    config = spec.agent
    if config is None:
        return False
    items = [*config.tools, *config.actors]
    inline = all(
        isinstance(i, AgentToolConfig | AgentActorConfig)
        or (isinstance(i, str) and kind_of(i) is None)
        for i in items
    )
    return bool(config.prompts or config.roles) or not inline
