"""References from agents (and roles) to stored prompts, tools, actors, roles and agents.

- ``check_agent_references``: create-time checks (DESIGN.md 3.3): every referenced id names a
  resource the caller can read, every required variable of a prompt is bound, every plain
  string tool is a built-in. Errors point into the agent document.
- ``resolve_agent`` (services/resolution.py, using the forms' rules from here): what the
  react runtime runs.

Both are re-exported by services/resources.py, the resources' public module.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import orjson
from pydantic import ValidationError

from dhub.access import policy
from dhub.access.principal import Principal
from dhub.domain.agent import AgentSpec
from dhub.domain.errors import FieldError
from dhub.domain.functions import (
    ITEM_TAGS,
    AgentResourceRef,
)
from dhub.domain.nodes import ActorCallWorkflowNode, ToolCallWorkflowNode
from dhub.domain.pointers import from_validation_error, join
from dhub.domain.resources import (
    BUILT_IN_TOOLS,
    ActorOverrides,
    InlineRoleConfig,
    PromptSpec,
    ToolOverrides,
)
from dhub.store import agents as agent_repo
from dhub.store import resources as repo
from dhub.store.db import Conn

Loc = tuple[str | int, ...]
_KINDS = ("agent", "prompt", "tool", "actor", "role")
# A stored id: ``<category>.<ulid>`` (lowercase); anything else with a kind's prefix names
# nothing, and is never sent to the database (PostgreSQL text cannot hold NUL, for one).
STORED_ID = re.compile(r"(?:agent|prompt|tool|actor|role)\.[0-9A-Za-z_-]{1,56}")
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
) -> _Ref | None:
    """The reference ``item`` (at ``at``, in the list or field ``where``) makes, if any.
    ``built_ins``: whether a built-in tool's name may stand there (not in a tool_call node)."""
    what = allowed[0]
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


def _node_refs(spec: AgentSpec, errors: list[FieldError]) -> Iterator[_Ref]:
    """The stored tools and actors that a workflow's tool_call and actor_call nodes call."""
    for i, node in enumerate(spec.nodes):
        item: Any
        if isinstance(node, ToolCallWorkflowNode):
            item, allowed, field = node.config.tool, ("tool",), "tool"
        elif isinstance(node, ActorCallWorkflowNode):
            item, allowed, field = node.config.actor, ("actor",), "actor"
        else:
            continue
        at: Loc = ("nodes", i, "config", field)
        ref = _item_ref(item, at, join(*at), allowed, errors, built_ins=False)
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


def _agent_refs(spec: AgentSpec, errors: list[FieldError]) -> Iterator[_Ref]:
    yield from _node_refs(spec, errors)
    config = spec.agent
    if config is None:
        return
    for i, prompt in enumerate(config.prompts):
        yield _Ref(("agent", "prompts", i, "prompt_id"), prompt.prompt_id, ("prompt",))
    yield from _item_refs(config.tools, ("agent", "tools"), ("tool",), errors)
    yield from _item_refs(config.actors, ("agent", "actors"), ("actor",), errors)
    yield from _item_refs(config.roles, ("agent", "roles"), ("role", "agent"), errors)
    yield from _inline_roles(config.roles, errors)


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
    valid = [r for r in refs if STORED_ID.fullmatch(r.id)]
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
                errors += binding_errors(at, prompt_ref.prompt_id, prompt, prompt_ref.variables)
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
