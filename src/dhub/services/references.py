"""References from agents (and roles) to stored prompts, tools, actors, roles and agents.

- ``Reach``: the one reference check (DESIGN.md 2.1), used at every save and every
  resolution: a referenced id counts only if the acting principal may use what it names
  (read for prompts, run for the rest, every marking held); anything else gets the one
  ``unreachable`` message, word for word whatever the reason.
- ``check_agent_references``: save-time checks: every reference usable, every required
  variable of a prompt bound, every plain string tool a built-in. Errors point into the
  agent document.
- ``resolve_agent`` (services/resolution.py, using the forms' rules and ``Reach`` from
  here): what the runtime runs, resolved for the run's user.

Both are re-exported by services/resources.py, the resources' public module.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson
from pydantic import ValidationError

from dhub.access import policy
from dhub.access.principal import Principal
from dhub.domain.agent import AgentSpec
from dhub.domain.documents import is_template_id
from dhub.domain.errors import FieldError
from dhub.domain.functions import (
    ITEM_TAGS,
    AgentResourceRef,
)
from dhub.domain.knowledge import KNOWLEDGE_FIELDS, KnowledgeTool
from dhub.domain.mcp import McpToolsUse, is_mcp_id
from dhub.domain.nodes import ActorCallWorkflowNode, TemplateWorkflowNode, ToolCallWorkflowNode
from dhub.domain.pointers import from_validation_error, join
from dhub.domain.resources import (
    BUILT_IN_TOOLS,
    REFERENCE_USE,
    ActorOverrides,
    InlineRoleConfig,
    PromptSpec,
    TemplateSpec,
    ToolOverrides,
    unreachable,
)
from dhub.domain.secrets import secret_refs
from dhub.services.knowledge import collisions, tools_of
from dhub.store import agents as agent_repo
from dhub.store import resources as repo
from dhub.store.db import Conn

Loc = tuple[str | int, ...]
_KINDS = (
    "agent", "prompt", "tool", "actor", "role", "table", "template", "ontology", "mcp_server",
    "secret",
)  # fmt: skip
# A stored id: ``<category>.<ulid>`` (lowercase); anything else with a kind's prefix names
# nothing, and is never sent to the database (PostgreSQL text cannot hold NUL, for one).
STORED_ID = re.compile(rf"(?:{'|'.join(_KINDS)})\.[0-9A-Za-z_-]{{1,56}}")
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


# -- walking the items --------------------------------------------------------------------------


def _a(kind: str) -> str:
    return f"an {kind}" if kind[0] in "aeiou" else f"a {kind}"


def _kinds(allowed: tuple[str, ...]) -> str:
    return " or ".join(f"{k} ({k}.…)" for k in allowed)


def _item_refs(
    items: Sequence[Any], at: Loc, allowed: tuple[str, ...], errors: list[FieldError]
) -> Iterator[_Ref]:
    """The references among ``items``: strings, ``{id, name}`` and, for tools and actors, the
    object form (an id with overrides); problems with the forms go to ``errors``. Inline
    configs are not references (and inline roles are checked by ``_inline_roles``)."""
    for i, item in enumerate(items):
        ref = _item_ref(item, (*at, i), join(*at), allowed, errors)
        if ref is not None:
            yield ref


def _item_ref(
    item: Any,
    at: Loc,
    where: str,
    allowed: tuple[str, ...],
    errors: list[FieldError],
    built_ins: bool = True,
    knowledge: Collection[str] = (),
) -> _Ref | None:
    """The reference ``item`` (at ``at``, in the list or field ``where``) makes, if any.
    ``built_ins``: whether a built-in tool's name may stand there (not in a tool_call node);
    ``knowledge``: the names of the tools the agent's tables, templates and ontologies give
    it, which its workflow nodes may call by name."""
    what = allowed[0]
    if isinstance(item, str) and item in knowledge:
        return None
    if isinstance(item, dict) and "mcp_server" in allowed and is_mcp_id(item.get("id")):
        return _mcp_use(item, at, built_ins, errors)
    if isinstance(item, AgentResourceRef):
        value, loc = item.id, (*at, "id")
    elif isinstance(item, str):
        value, loc = item, at
    elif isinstance(item, dict) and what in OVERRIDES:
        parsed = overrides_of(item, at, what, errors)
        if parsed is None:
            return None
        value, loc = parsed.id, (*at, "id")
    else:
        return None
    kind = kind_of(value)
    if kind == "mcp_server" and kind in allowed and not built_ins:
        errors.append(FieldError(join(*at), _one_tool(value), "one_tool"))
    if kind in allowed:
        return _Ref(loc, value, allowed)
    if kind is not None:
        message = (
            f"'{value}' is {_a(kind)}, but {where} takes {_a(_kinds(allowed))}: move it or "
            "name another."
        )
        errors.append(FieldError(join(*loc), message, "wrong_kind"))
    elif what == "tool" and isinstance(item, str) and built_ins:
        if value not in BUILT_IN_TOOLS:
            message = (
                f"'{value}' is neither a built-in tool nor a tool id: use one of {_BUILT_INS}, "
                "the id of a stored tool (tool.…), or an inline tool."
            )
            errors.append(FieldError(join(*loc), message, "unknown_tool"))
    else:
        inline = "" if what == "role" else f", or an inline {what}"
        message = f"'{value}' is not {_a(what)} id: name a stored {_kinds(allowed)}{inline}."
        errors.append(FieldError(join(*loc), message, "not_an_id"))
    return None


def _mcp_use(
    item: dict[str, Any], at: Loc, in_agent: bool, errors: list[FieldError]
) -> _Ref | None:
    """The object form of an MCP server: ``{id, tools, prefix}`` in an agent's tools, ``{id,
    tools: [one]}`` in a tool_call node (``in_agent`` False)."""
    try:
        use = McpToolsUse.model_validate(item)
    except ValidationError as exc:
        for err in from_validation_error(exc, item):
            message = err.message
            if err.code == "extra_forbidden":
                message = (
                    "An MCP server here takes 'id', 'name', 'tools' (the ones to give; all "
                    "when absent) and 'prefix' (put before their names): remove this field."
                )
            errors.append(FieldError(join(*at) + err.loc, message, err.code))
        return None
    if not in_agent and (use.tools is None or len(use.tools) != 1):
        errors.append(FieldError(join(*at, "tools"), _one_tool(use.id), "one_tool"))
    return _Ref((*at, "id"), use.id, ("mcp_server",))


def _one_tool(server_id: str) -> str:
    return (
        "A tool_call node calls one tool of an MCP server: name it, e.g. {'id': "
        f"'{server_id}', 'tools': ['search']}} (GET /api/v1/mcp-servers/{{id}}/tools lists "
        "them)."
    )


def _node_refs(
    spec: AgentSpec, errors: list[FieldError], knowledge: Collection[str] = ()
) -> Iterator[_Ref]:
    """The stored tools and actors that a workflow's tool_call and actor_call nodes call
    (``knowledge``: tool names the agent's knowledge gives it, which are no references), and
    the stored templates its template nodes render."""
    for i, node in enumerate(spec.nodes):
        item: Any
        allowed: tuple[str, ...]
        if isinstance(node, TemplateWorkflowNode):
            if is_template_id(node.config.template):
                at: Loc = ("nodes", i, "config", "template")
                yield _Ref(at, node.config.template.strip(), ("template",))
            continue
        if isinstance(node, ToolCallWorkflowNode):
            item, allowed, field = node.config.tool, ("tool", "mcp_server"), "tool"
        elif isinstance(node, ActorCallWorkflowNode):
            item, allowed, field = node.config.actor, ("actor",), "actor"
        else:
            continue
        at = ("nodes", i, "config", field)
        ref = _item_ref(item, at, join(*at), allowed, errors, False, knowledge)
        if ref is not None:
            yield ref


OVERRIDES: dict[str, type[ToolOverrides]] = {"tool": ToolOverrides, "actor": ActorOverrides}


def overrides_of(
    item: dict[str, Any], at: Loc, what: str, errors: list[FieldError]
) -> ToolOverrides | None:
    """An object that is neither ``{id, name}`` nor an inline config (no 'function'): a stored
    tool or actor with overrides, or an error saying which forms there are."""
    if "id" not in item:
        errors.append(
            FieldError(
                join(*at),
                f"This {what} has no 'function' and no 'id': write an inline {what} (name, "
                f"description, function) or name a stored one by its 'id' ({what}.…), "
                f"optionally with {_override_fields(what)} for this agent.",
                "not_callable",
            )
        )
        return None
    try:
        return OVERRIDES[what].model_validate(item)
    except ValidationError as exc:
        for err in from_validation_error(exc, item):
            message = err.message
            if err.code == "extra_forbidden":
                message = (
                    f"A stored {what} named by 'id' takes only {_override_fields(what)} for "
                    "this agent: remove this field, or write the whole inline "
                    f"{what} (with 'function')."
                )
            elif err.loc == "/confirmation_policy":
                message = (
                    "An agent may only tighten an actor's confirmation_policy to 'confirm'; "
                    "to stop asking, change the actor itself (its owner decides)."
                )
            errors.append(FieldError(join(*at) + err.loc, message, err.code))
        return None


def _override_fields(what: str) -> str:
    extra = ", 'confirmation_policy': 'confirm'" if what == "actor" else ""
    return f"'description', 'options'{extra}"


def _inline_roles(roles: Sequence[Any], errors: list[FieldError]) -> Iterator[_Ref]:
    """Each role written inline checked as a role (name, instructions, ...), and the
    references among its tools."""
    for i, role in enumerate(roles):
        if not isinstance(role, dict):
            continue
        at: Loc = ("agent", "roles", i)
        try:
            config = InlineRoleConfig.model_validate(role)
        except ValidationError as exc:
            for err in from_validation_error(exc, role, ITEM_TAGS):
                errors.append(FieldError(join(*at) + err.loc, err.message, err.code))
            continue
        yield from _item_refs(config.tools, (*at, "tools"), ("tool",), errors)


def _agent_refs(
    spec: AgentSpec, errors: list[FieldError], knowledge: Collection[str] = ()
) -> Iterator[_Ref]:
    yield from _node_refs(spec, errors, knowledge)
    config = spec.agent
    if config is None:
        return
    for i, prompt in enumerate(config.prompts):
        yield _Ref(("agent", "prompts", i, "prompt_id"), prompt.prompt_id, ("prompt",))
    yield from _item_refs(config.tools, ("agent", "tools"), ("tool", "mcp_server"), errors)
    yield from _item_refs(config.actors, ("agent", "actors"), ("actor",), errors)
    yield from _item_refs(config.roles, ("agent", "roles"), ("role", "agent"), errors)
    yield from _inline_roles(config.roles, errors)


# -- the one reference check --------------------------------------------------------------------

Row = repo.ResourceRow | agent_repo.AgentRow


class Reach:
    """The one reference check (DESIGN.md 2.1), for saves and for resolutions alike: which of
    the ids a document names ``principal`` may use. Prompts need read; tools, actors, roles
    and agents as roles need run; and every marking on the resource must be held. Nothing is
    trusted for being stored already: access can be lost between saves. Rows are read once
    per id (``load`` batches them; ``use`` reads one that was not loaded)."""

    def __init__(self, conn: Conn, principal: Principal) -> None:
        self.conn = conn
        self.principal = principal
        self._principals = sorted(principal.principal_ids)
        self._rows: dict[str, Row | None] = {}

    async def load(self, ids: Collection[str]) -> None:
        wanted = {i for i in ids if i not in self._rows and STORED_ID.fullmatch(i)}
        agent_ids = [i for i in wanted if kind_of(i) == "agent"]
        found: dict[str, Row] = {}
        found.update(await repo.get_resources(self.conn, wanted - set(agent_ids), self._principals))
        found.update(await agent_repo.get_agents(self.conn, agent_ids, self._principals))
        for ref_id in wanted:
            self._rows[ref_id] = found.get(ref_id)

    async def use(self, ref_id: str, kind: str) -> Row | None:
        """The row ``ref_id`` names when it is a ``kind`` the principal may use, else None
        (whatever the reason: callers answer ``unreachable`` alike for all of them)."""
        if kind_of(ref_id) != kind:
            return None
        if ref_id not in self._rows:
            await self.load([ref_id])
        row = self._rows.get(ref_id)
        if row is None or (isinstance(row, repo.ResourceRow) and row.record.category != kind):
            return None
        owners = [o["id"] for o in row.owners]
        markings = orjson.loads(row.record.markings)
        builtin = row.record.is_builtin
        seen = policy.access(
            self.principal, owners, row.grant, markings, row.above, builtin=builtin
        )
        return row if seen is not None and seen.allows(_ACTION[kind]) else None


_ACTION: dict[str, policy.Action] = {
    kind: "read" if use == "read" else "edit" if use == "edit" else "run"
    for kind, use in REFERENCE_USE.items()
}


async def check_references(
    reach: Reach, refs: Sequence[_Ref]
) -> tuple[dict[str, Row], list[FieldError]]:
    """The rows the references name that the principal may use, by id, and the error (the
    one ``unreachable`` message) for each other one."""
    await reach.load([r.id for r in refs])
    usable: dict[str, Row] = {}
    errors = []
    for ref in refs:
        kind = kind_of(ref.id) or ref.allowed[0]
        row = await reach.use(ref.id, kind)
        if row is None:
            errors.append(FieldError(join(*ref.at), unreachable(kind, ref.id), UNREACHABLE))
        else:
            usable[ref.id] = row
    return usable, errors


UNREACHABLE = "unknown_reference"


def binding_errors(at: Loc, prompt_id: str, prompt: PromptSpec, bound: Any) -> list[FieldError]:
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


def template_bindings(
    at: Loc, template_id: str, template: TemplateSpec, bound: dict[str, Any]
) -> list[FieldError]:
    """A template node's ``variables``: every required variable of the stored template bound,
    no name it does not declare."""
    declared = {v.name for v in template.variables}
    names = ", ".join(sorted(declared)) or "none"
    errors = [
        FieldError(
            join(*at, "variables"),
            f"The template '{template_id}' ({template.name}) needs the variable '{v.name}' "
            f'({v.type}): bind it in variables, e.g. {{"{v.name}": "{{{{ {v.name} }}}}"}}.',
            "missing_variable",
        )
        for v in template.variables
        if v.required and v.name not in bound
    ]
    errors += [
        FieldError(
            join(*at, "variables", name),
            f"The template '{template_id}' ({template.name}) has no variable '{name}' (it "
            f"declares {names}): remove it or check its spelling.",
            "unknown_variable",
        )
        for name in bound
        if name not in declared
    ]
    return errors


def template_binding_errors(spec: AgentSpec, usable: dict[str, Row]) -> list[FieldError]:
    errors: list[FieldError] = []
    for i, node in enumerate(spec.nodes):
        if not isinstance(node, TemplateWorkflowNode):
            continue
        row = usable.get(node.config.template.strip())
        if isinstance(row, repo.ResourceRow) and row.record.category == "template":
            template = TemplateSpec.model_validate_json(row.record.document)
            at = ("nodes", i, "config")
            errors += template_bindings(at, row.record.id, template, node.config.bindings)
    return errors


async def check_agent_references(
    conn: Conn, principal: Principal, spec: AgentSpec
) -> list[FieldError]:
    """Every problem with the references of a valid agent document, for ``principal`` who
    saves it: ids it cannot use (the one message, whatever the reason), ids of the wrong kind,
    unknown built-in tools, and for what it may use: prompt variables missing or unknown,
    roles naming a workflow agent. References count only where the schema puts them."""
    reach = Reach(conn, principal)
    known = await listed_knowledge(reach, spec)
    errors: list[FieldError] = list(known.errors)
    tools = tools_of(known.records)
    errors += _clashes(spec, tools)
    refs = list(_agent_refs(spec, errors, {t.name for t in tools}))
    usable, missing = await check_references(reach, refs)
    errors += missing
    config = spec.agent
    if config is not None:
        for i, prompt_ref in enumerate(config.prompts):
            row = usable.get(prompt_ref.prompt_id)
            if isinstance(row, repo.ResourceRow):
                prompt = PromptSpec.model_validate_json(row.record.document)
                at = ("agent", "prompts", i)
                errors += binding_errors(at, prompt_ref.prompt_id, prompt, prompt_ref.variables)
    errors += template_binding_errors(spec, usable)
    for ref in refs:
        agent = usable.get(ref.id)
        if (
            isinstance(agent, agent_repo.AgentRow)
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


# -- knowledge: tables, templates, ontologies ---------------------------------------------------


@dataclass
class Listed:
    """The knowledge an agent lists that the principal may read, by kind (in the agent's
    order), and the one unreachable error for each id it may not."""

    records: dict[str, list[repo.ResourceRecord]] = field(default_factory=dict)
    errors: list[FieldError] = field(default_factory=list)


async def listed_knowledge(reach: Reach, spec: AgentSpec) -> Listed:
    """The agent's ``tables``, ``templates`` and ``ontologies`` through the one reference
    check: read access and every marking held, at every save and every resolution."""
    found = Listed()
    await reach.load([i for name in KNOWLEDGE_FIELDS for i in getattr(spec, name)])
    for name, kind in KNOWLEDGE_FIELDS.items():
        for i, ref_id in enumerate(getattr(spec, name)):
            row = await reach.use(ref_id, kind)
            if isinstance(row, repo.ResourceRow):
                found.records.setdefault(kind, []).append(row.record)
            else:
                found.errors.append(
                    FieldError(join(name, i), unreachable(kind, ref_id), UNREACHABLE)
                )
    return found


_FIELD_OF = {kind: name for name, kind in KNOWLEDGE_FIELDS.items()}


def _clashes(spec: AgentSpec, tools: Sequence[KnowledgeTool]) -> list[FieldError]:
    """A knowledge tool named like another tool of the agent (the model calls tools by name)."""
    taken = [*BUILT_IN_TOOLS]
    if spec.agent is not None:
        taken += [i.name for i in (*spec.agent.tools, *spec.agent.actors) if hasattr(i, "name")]
        taken += [r["name"] for r in spec.agent.roles if isinstance(r, dict) and "name" in r]
    errors = []
    for name in collisions(tools, taken):
        tool = next(t for t in tools if t.name == name)
        where = _FIELD_OF.get(tool.operation.partition(".")[0], "tables")
        message = (
            f"This gives the agent a tool named '{name}', which another of its tools has too: "
            "rename one of them (the model calls tools by name)."
        )
        errors.append(FieldError(join(where), message, "duplicate_tool"))
    return errors


async def check_tool_items(
    conn: Conn, principal: Principal, items: Sequence[Any], at: Loc
) -> list[FieldError]:
    """The reference problems of a list of tool items (a role's ``tools``)."""
    errors: list[FieldError] = []
    refs = list(_item_refs(items, at, ("tool",), errors))
    errors += (await check_references(Reach(conn, principal), refs))[1]
    return errors


async def check_secret_references(reach: Reach, document: Any, at: Loc = ()) -> list[FieldError]:
    """The one ``unreachable`` error, pointing at the reference, for each ``{"secret": id}``
    in ``document`` (domain/secrets.py) whose secret the principal may not use: run scope and
    every marking held, at every save and every use. An id of another kind names no secret."""
    refs = secret_refs(document, at)
    await reach.load([ref_id for _, ref_id in refs])
    errors = []
    for loc, ref_id in refs:
        if await reach.use(ref_id, "secret") is None:
            errors.append(
                FieldError(join(*loc, "secret"), unreachable("secret", ref_id), UNREACHABLE)
            )
    return errors
