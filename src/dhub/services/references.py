"""References from agents (and roles) to stored prompts, tools, actors, roles and agents.

- ``check_agent_references``: create-time checks (DESIGN.md 3.3): every referenced id names a
  resource the caller can read, every required variable of a prompt is bound, every plain
  string tool is a built-in. Errors point into the agent document.
- ``resolve_agent``: what the react runtime runs: the system prompt rendered, and every
  reference replaced by the inline config it names (the latest version, without access
  checks: the agent's author was checked when the reference was saved).

Both are re-exported by services/resources.py, the resources' public module.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import orjson
from pydantic import MISSING, ValidationError

from dhub.access import policy
from dhub.access.principal import Principal
from dhub.domain.agent import AgentSpec, PromptRef
from dhub.domain.errors import FieldError, InvalidInput
from dhub.domain.functions import (
    ITEM_TAGS,
    AgentActorConfig,
    AgentResourceRef,
    AgentToolConfig,
)
from dhub.domain.pointers import from_validation_error, join
from dhub.domain.resources import (
    BUILT_IN_TOOLS,
    ActorSpec,
    InlineRole,
    InlineRoleConfig,
    PromptSpec,
    ResolvedAgent,
    RoleSpec,
    ToolSpec,
    render_template,
)
from dhub.store import agents as agent_repo
from dhub.store import resources as repo
from dhub.store.db import Conn, Database

Loc = tuple[str | int, ...]
_KINDS = ("agent", "prompt", "tool", "actor", "role")
# A stored id: ``<category>.<ulid>`` (lowercase); anything else with a kind's prefix names
# nothing, and is never sent to the database (PostgreSQL text cannot hold NUL, for one).
_STORED_ID = re.compile(r"(?:agent|prompt|tool|actor|role)\.[0-9A-Za-z_-]{1,56}")
_BUILT_INS = ", ".join(sorted(BUILT_IN_TOOLS))


def kind_of(value: str) -> str | None:
    """The category a string names when it looks like a stored id (``tool.…``), else None."""
    head, dot, _ = value.partition(".")
    return head if dot and head in _KINDS else None


@dataclass(frozen=True, slots=True)
class _Ref:
    at: Loc  # where the id is in the document
    id: str
    allowed: tuple[str, ...]  # the categories that may be referenced there


class UnresolvableAgent(InvalidInput):
    """An agent refers to something that no longer exists (deleted since it was saved), or
    holds an item the runtime cannot call; ``errors`` point into the agent document."""


# -- walking the items --------------------------------------------------------------------------


def _a(kind: str) -> str:
    return f"an {kind}" if kind[0] in "aeiou" else f"a {kind}"


def _kinds(allowed: tuple[str, ...]) -> str:
    return " or ".join(f"{k} ({k}.…)" for k in allowed)


def _item_refs(
    items: Sequence[Any], at: Loc, allowed: tuple[str, ...], errors: list[FieldError]
) -> Iterator[_Ref]:
    """The references among ``items`` (strings and ``{id, name}``); problems with the forms
    go to ``errors``. Inline configs and objects are not references."""
    what = allowed[0]
    for i, item in enumerate(items):
        if isinstance(item, AgentResourceRef):
            value, loc = item.id, (*at, i, "id")
        elif isinstance(item, str):
            value, loc = item, (*at, i)
        else:
            continue
        kind = kind_of(value)
        if kind in allowed:
            yield _Ref(loc, value, allowed)
        elif kind is not None:
            errors.append(
                FieldError(
                    join(*loc),
                    f"'{value}' is {_a(kind)}, but {join(*at)} takes {_a(_kinds(allowed))}: "
                    "move it or name another.",
                    "wrong_kind",
                )
            )
        elif what == "tool" and isinstance(item, str):
            if value not in BUILT_IN_TOOLS:
                errors.append(
                    FieldError(
                        join(*loc),
                        f"'{value}' is neither a built-in tool nor a tool id: use one of "
                        f"{_BUILT_INS}, the id of a stored tool (tool.…), or an inline tool.",
                        "unknown_tool",
                    )
                )
        else:
            inline = "" if what == "role" else f", or an inline {what}"
            errors.append(
                FieldError(
                    join(*loc),
                    f"'{value}' is not {_a(what)} id: name a stored {_kinds(allowed)}{inline}.",
                    "not_an_id",
                )
            )


def _agent_refs(spec: AgentSpec, errors: list[FieldError]) -> Iterator[_Ref]:
    config = spec.agent
    if config is None:
        return
    for i, prompt in enumerate(config.prompts):
        yield _Ref(("agent", "prompts", i, "prompt_id"), prompt.prompt_id, ("prompt",))
    yield from _item_refs(config.tools, ("agent", "tools"), ("tool",), errors)
    yield from _item_refs(config.actors, ("agent", "actors"), ("actor",), errors)
    yield from _item_refs(config.roles, ("agent", "roles"), ("role", "agent"), errors)
    for i, role in enumerate(config.roles):
        tools = role.get("tools") if isinstance(role, dict) else None
        if isinstance(tools, list):  # an inline role's own tools
            yield from _item_refs(tools, ("agent", "roles", i, "tools"), ("tool",), errors)


def _ids_in(document: Any) -> set[str]:
    """Every string in a stored document that looks like a resource id."""
    found: set[str] = set()
    stack = [document]
    while stack:
        value = stack.pop()
        if isinstance(value, str):
            if kind_of(value):
                found.add(value)
        elif isinstance(value, dict):
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
    return found


# -- create-time checks -------------------------------------------------------------------------


def _unknown(ref: _Ref, kept: bool) -> FieldError:
    kind = kind_of(ref.id) or ref.allowed[0]
    if kept:  # it was there before: it was deleted since
        message = (
            f"The {kind} '{ref.id}' no longer exists: remove the reference, or name another {kind}."
        )
    else:
        message = (
            f"No {kind} '{ref.id}' that you can read: check the id (GET /api/v1/{kind}s lists "
            f"the ones you can read), or ask its owner to share it with you."
        )
    return FieldError(join(*ref.at), message, "unknown_reference")


async def check_references(
    conn: Conn,
    principal: Principal,
    refs: Sequence[_Ref],
    trusted: Collection[str] = (),
) -> tuple[dict[str, repo.ResourceRow], dict[str, agent_repo.AgentRow], list[FieldError]]:
    """Look every reference up: (the resources found, the agents found, an error for each that
    is missing or, unless ``trusted`` (already referenced by the stored document, so checked
    when it was added), not readable by the caller)."""
    principals = sorted(principal.principal_ids)
    valid = [r for r in refs if _STORED_ID.fullmatch(r.id)]
    found = await repo.get_resources(
        conn, [r.id for r in valid if kind_of(r.id) != "agent"], principals
    )
    agents = await agent_repo.get_agents(
        conn, [r.id for r in valid if kind_of(r.id) == "agent"], principals
    )
    errors = []
    for ref in refs:
        row: repo.ResourceRow | agent_repo.AgentRow | None
        row = agents.get(ref.id) if kind_of(ref.id) == "agent" else found.get(ref.id)
        if isinstance(row, repo.ResourceRow) and row.record.category != kind_of(ref.id):
            row = None
        kept = ref.id in trusted
        if row is None or not (kept or _readable(principal, row)):
            errors.append(_unknown(ref, kept))
    return found, agents, errors


def _readable(principal: Principal, row: repo.ResourceRow | agent_repo.AgentRow) -> bool:
    owners = [o["id"] for o in row.owners]
    markings = orjson.loads(row.record.markings)
    return policy.access(principal, owners, row.grant, markings) is not None


def _binding_errors(at: Loc, prompt_id: str, prompt: PromptSpec, bound: Any) -> list[FieldError]:
    """A required variable of the prompt left unbound, or a bound name it does not declare."""
    bound = bound if isinstance(bound, dict) else {}
    declared = {v.name for v in prompt.variables}
    errors = [
        FieldError(
            join(*at, "variables"),
            f"The prompt '{prompt_id}' ({prompt.name}) needs the variable '{v.name}': bind "
            f'it in variables, e.g. {{"{v.name}": "..."}}.',
            "missing_variable",
        )
        for v in prompt.variables
        if v.required and v.name not in bound
    ]
    names = ", ".join(sorted(declared)) or "none"
    errors += [
        FieldError(
            join(*at, "variables", name),
            f"The prompt '{prompt_id}' ({prompt.name}) has no variable '{name}' (it declares "
            f"{names}): remove it or check its spelling.",
            "unknown_variable",
        )
        for name in bound
        if name not in declared
    ]
    return errors


async def check_agent_references(
    conn: Conn, principal: Principal, spec: AgentSpec, before: Any = None
) -> list[FieldError]:
    """Every problem with the references of a valid agent document, for ``principal`` who
    writes it: unknown or unreadable prompt, tool, actor, role and agent ids, ids of the wrong
    kind, unknown built-in tools, prompt variables missing or unknown, roles naming a workflow
    agent. ``before``: the stored document an update replaces; references it already held
    need only exist (an editor keeps what an owner referenced)."""
    errors: list[FieldError] = []
    refs = list(_agent_refs(spec, errors))
    found, agents, missing = await check_references(
        conn, principal, refs, _ids_in(before) if before is not None else ()
    )
    errors += missing
    unseen = {e.loc for e in missing}  # nothing more is said about what the caller cannot read
    config = spec.agent
    if config is not None:
        for i, prompt_ref in enumerate(config.prompts):
            row = found.get(prompt_ref.prompt_id)
            if join("agent", "prompts", i, "prompt_id") in unseen:
                continue
            if row is not None and row.record.category == "prompt":
                prompt = PromptSpec.model_validate_json(row.record.document)
                at = ("agent", "prompts", i)
                errors += _binding_errors(at, prompt_ref.prompt_id, prompt, prompt_ref.variables)
    for ref in refs:
        agent = agents.get(ref.id)
        if (
            agent is not None
            and join(*ref.at) not in unseen
            and orjson.loads(agent.record.document).get("mode") != "react"
        ):
            errors.append(
                FieldError(
                    join(*ref.at),
                    f"'{ref.id}' is a workflow agent; a role delegates to a react agent (or a "
                    "role): name one of those.",
                    "not_react",
                )
            )
    return sorted(set(errors), key=errors.index)


async def check_tool_items(
    conn: Conn, principal: Principal, items: Sequence[Any], at: Loc, before: Any = None
) -> list[FieldError]:
    """The reference problems of a list of tool items (a role's ``tools``)."""
    errors: list[FieldError] = []
    refs = list(_item_refs(items, at, ("tool",), errors))
    trusted = _ids_in(before) if before is not None else ()
    errors += (await check_references(conn, principal, refs, trusted))[2]
    return errors


# -- resolving for the runtime ------------------------------------------------------------------


class _Resolver:
    """Loads what references name (once each), collecting what cannot be resolved."""

    def __init__(self, conn: Conn) -> None:
        self.conn = conn
        self.errors: list[FieldError] = []
        self._resources: dict[str, repo.ResourceRow | None] = {}
        self._agents: dict[str, agent_repo.AgentRow | None] = {}

    async def document(self, at: Loc, ref_id: str, kind: str) -> str | None:
        row: repo.ResourceRow | agent_repo.AgentRow | None = None
        if _STORED_ID.fullmatch(ref_id) and kind_of(ref_id) == kind:
            if kind == "agent":
                if ref_id not in self._agents:
                    self._agents.update(await agent_repo.get_agents(self.conn, [ref_id], ()))
                row = self._agents.setdefault(ref_id, None)
            else:
                if ref_id not in self._resources:
                    self._resources.update(await repo.get_resources(self.conn, [ref_id], ()))
                row = self._resources.setdefault(ref_id, None)
                if row is not None and row.record.category != kind:
                    row = None
        if row is None:
            self.fail(
                at,
                f"The {kind} '{ref_id}' no longer exists (it was deleted after the agent was "
                "saved): remove the reference from the agent, or name another.",
                "unknown_reference",
            )
            return None
        return row.record.document

    def fail(self, at: Loc, message: str, code: str) -> None:
        self.errors.append(FieldError(join(*at), message, code))

    async def system_prompt(self, at: Loc, prompts: Sequence[PromptRef], instructions: str) -> str:
        parts = []
        for i, ref in enumerate(prompts):
            loc = (*at, "prompts", i)
            document = await self.document((*loc, "prompt_id"), ref.prompt_id, "prompt")
            if document is None:
                continue
            prompt = PromptSpec.model_validate_json(document)
            problems = _binding_errors(loc, ref.prompt_id, prompt, ref.variables)
            if problems:
                self.errors += problems
                continue
            values: dict[str, Any] = {
                v.name: "" if v.default is MISSING else v.default for v in prompt.variables
            }
            values.update(ref.variables or {})
            parts.append(render_template(prompt.template, values))
        return "\n\n".join([*parts, instructions]) if parts else instructions

    async def tools(self, at: Loc, items: Sequence[Any]) -> list[AgentToolConfig | str]:
        out: list[AgentToolConfig | str] = []
        for i, item in enumerate(items):
            if isinstance(item, AgentToolConfig):
                out.append(item)
            elif isinstance(item, str) and kind_of(item) is None:
                out.append(item)  # a built-in tool, by name
            elif isinstance(item, str | AgentResourceRef):
                ref_id = item if isinstance(item, str) else item.id
                document = await self.document((*at, i), ref_id, "tool")
                if document is not None:
                    tool = ToolSpec.model_validate_json(document)
                    out.append(
                        AgentToolConfig(
                            name=tool.name,
                            description=tool.description,
                            type=tool.type,
                            function=tool.function,
                            require_browser=tool.require_browser,
                            options=tool.options,
                        )
                    )
            else:
                self.fail((*at, i), _NOT_CALLABLE.format(what="tool"), "not_callable")
        return out

    async def actors(self, at: Loc, items: Sequence[Any]) -> list[AgentActorConfig]:
        out: list[AgentActorConfig] = []
        for i, item in enumerate(items):
            if isinstance(item, AgentActorConfig):
                out.append(item)
            elif isinstance(item, str | AgentResourceRef):
                ref_id = item if isinstance(item, str) else item.id
                document = await self.document((*at, i), ref_id, "actor")
                if document is not None:
                    actor = ActorSpec.model_validate_json(document)
                    out.append(
                        AgentActorConfig(
                            name=actor.name,
                            description=actor.description,
                            function=actor.function,
                            confirmation_policy=actor.confirmation_policy,
                            options=actor.options,
                        )
                    )
            else:
                self.fail((*at, i), _NOT_CALLABLE.format(what="actor"), "not_callable")
        return out

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
        inner = _Resolver(self.conn)
        inner._resources, inner._agents = self._resources, self._agents
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


_NOT_CALLABLE = (
    "This {what} is a free-form object, which the runtime cannot call: write an inline {what} "
    "(with 'function') or name a stored one."
)


async def resolve_agent(db_or_conn: Database | Conn, spec: AgentSpec) -> ResolvedAgent:
    """The react agent ``spec`` ready to run: its system prompt (the rendered prompts in order,
    each with its bindings over the prompt's defaults, joined with "\\n\\n", then
    "\\n\\n" + instructions; just the instructions without prompts) and its tools, actors and
    roles as inline configs, references resolved to their latest versions (built-in tools stay
    names). Raises UnresolvableAgent, listing every reference that no longer resolves."""
    if spec.agent is None:
        raise ValueError("resolve_agent needs a react agent: this one has no 'agent' config")
    if isinstance(db_or_conn, Database):
        async with db_or_conn.read(snapshot=True) as conn:
            return await _resolve(conn, spec)
    return await _resolve(db_or_conn, spec)


async def _resolve(conn: Conn, spec: AgentSpec) -> ResolvedAgent:
    config = spec.agent
    assert config is not None
    resolver = _Resolver(conn)
    system_prompt = await resolver.system_prompt(("agent",), config.prompts, config.instructions)
    tools = await resolver.tools(("agent", "tools"), config.tools)
    actors = await resolver.actors(("agent", "actors"), config.actors)
    roles = await resolver.roles(("agent", "roles"), config.roles)
    if resolver.errors:
        raise UnresolvableAgent(
            resolver.errors,
            f"The agent '{spec.name}' cannot run as stored: "
            + "; ".join(f"{e.loc}: {e.message}" for e in resolver.errors[:3]),
        )
    return ResolvedAgent(system_prompt, tools, actors, roles)
