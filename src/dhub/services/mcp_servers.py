"""MCP servers' tools for agents and runs (issue 20; the resource is domain/mcp.py, the
connections services/mcp_client.py).

Every use goes through the one reference check (services/references.py ``Reach``): the run's
user (or the caller listing tools) must be able to *run* the MCP server, whatever placed its
id where it is. Its secrets are revealed for the server's owners, not for the user calling:
sharing a configured server shares its use, never its secret values, which stay out of
every answer. What the server answers (a tool's result or error, a failure to connect) is the
tool's result the model reads; nothing here fails a run.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import mcp_types
import orjson

from dhub.access.principal import Principal
from dhub.access.tokens import principal_of
from dhub.domain.errors import BadGateway, FieldError, NotFound
from dhub.domain.knowledge import KnowledgeTool
from dhub.domain.mcp import BOUND, McpToolsUse, SecretRef, mcp_tool, split_arguments
from dhub.domain.pointers import join
from dhub.domain.resources import McpServerSpec, unreachable
from dhub.engine.state import CallKnowledge, Done
from dhub.services import secrets
from dhub.services.mcp_client import McpClients, McpFailure, Target
from dhub.services.references import Reach
from dhub.store.db import Conn, Database
from dhub.store.resources import ResourceRow

Loc = tuple[str | int, ...]
KIND = "mcp_server"
# What a result's content blocks that are no text become for the model.
MAX_TEXT = 1 << 20


class SecretUnavailable(Exception):
    """A secret an MCP server names cannot be used by any of its owners now."""


async def target_for(conn: Conn, reach: Reach, server_id: str, user_id: str) -> Target | None:
    """The server ``server_id`` as ``reach``'s principal may run it (None: they may not,
    whatever the reason), its secrets revealed for its owners."""
    row = await reach.use(server_id, KIND)
    if not isinstance(row, ResourceRow):
        return None
    spec = _spec(row.record.id, row.record.version, row.record.document)
    headers = {k: await _value(conn, row, v) for k, v in spec.headers.items()}
    env = {k: await _value(conn, row, v) for k, v in spec.env.items()}
    return Target(row.record.id, row.record.version, spec.name, spec, user_id, headers, env)


@functools.lru_cache(maxsize=256)
def _spec(server_id: str, version: int, document: str) -> McpServerSpec:
    """A server version's document, parsed once (a version never changes)."""
    return McpServerSpec.model_validate_json(document)


async def _value(conn: Conn, row: ResourceRow, value: str | SecretRef) -> str:
    if isinstance(value, str):
        return value
    for owner in row.owners:
        owner_id = str(owner.get("id", ""))
        if not owner_id.startswith("user."):
            continue
        revealed = await _reveal(conn, await principal_of(conn, owner_id), value.secret)
        if revealed is not None:
            return revealed
    raise SecretUnavailable(
        f"The secret '{value.secret}' this MCP server uses is not usable by any of its owners "
        "now: ask its owners to share the secret with them again, or to change the server."
    )


async def _reveal(conn: Conn, principal: Principal, secret_id: str) -> str | None:
    """The secret's value when ``principal`` may use it (services/secrets.py); a usable one
    with no value here (an unset variable, a key that cannot open it) says why."""
    try:
        return await secrets.reveal_in(conn, principal, secret_id)
    except secrets.SecretProblem as exc:
        raise SecretUnavailable(f"The secret '{secret_id}' this MCP server uses: {exc}") from exc


# -- what agents get ----------------------------------------------------------------------------


@dataclass
class Found:
    tools: list[KnowledgeTool] = field(default_factory=list)
    errors: list[FieldError] = field(default_factory=list)


def use_of(item: Any) -> McpToolsUse | None:
    """An agent's tool item that names an MCP server, in any of its forms."""
    if isinstance(item, str):
        return McpToolsUse(id=item) if item.startswith(f"{KIND}.") else None
    if isinstance(item, dict) and str(item.get("id", "")).startswith(f"{KIND}."):
        try:
            return McpToolsUse.model_validate(item)
        except ValueError:
            return None
    identifier = getattr(item, "id", None)
    if isinstance(identifier, str) and identifier.startswith(f"{KIND}."):
        return McpToolsUse(id=identifier)
    return None


Placed = tuple[Loc, McpToolsUse, Target]


async def targets_of(
    conn: Conn, reach: Reach, user_id: str, uses: Sequence[tuple[Loc, McpToolsUse]]
) -> tuple[list[Placed], list[FieldError]]:
    """The servers an agent's items name that ``reach``'s principal may run (in the
    transaction that reads the agent's other references), and an error for each other."""
    found: list[Placed] = []
    errors: list[FieldError] = []
    for at, use in uses:
        try:
            target = await target_for(conn, reach, use.id, user_id)
        except SecretUnavailable as exc:
            errors.append(FieldError(join(*at), str(exc), "unreachable"))
            continue
        if target is None:
            errors.append(FieldError(join(*at), unreachable(KIND, use.id), "unreachable"))
            continue
        found.append((at, use, target))
    return found, errors


async def agent_tools(clients: McpClients, placed: Sequence[Placed]) -> Found:
    """The tools the MCP servers an agent lists give it (outside any transaction: listing
    may start a server): each server's list (cached), narrowed by the server's
    ``allowed_tools`` and the agent's ``tools``. A server that cannot be listed gives its
    named tools an open schema (a call says what is wrong) and its unnamed ones nothing."""
    found = Found()
    for at, use, target in placed:
        found.tools += await _tools_of(clients, target, use, at, found.errors)
    return found


async def _tools_of(
    clients: McpClients, target: Target, use: McpToolsUse, at: Loc, errors: list[FieldError]
) -> list[KnowledgeTool]:
    allowed = target.spec.allowed_tools
    try:
        listed = await clients.tools(target)
    except McpFailure:
        listed = [mcp_types.Tool(name=n, input_schema={"type": "object"}) for n in use.tools or ()]
    by_name = {t.name: t for t in listed if allowed is None or t.name in allowed}
    wanted = use.tools if use.tools is not None else list(by_name)
    tools = []
    for i, name in enumerate(wanted):
        tool = by_name.get(name)
        if tool is None:
            if allowed is not None and name not in allowed:
                message = (
                    f"The MCP server '{target.name}' does not allow '{name}' (its allowed_tools "
                    f"are {', '.join(allowed) or 'none'}): remove it, or ask its owners."
                )
            else:
                message = (
                    f"The MCP server '{target.name}' has no tool '{name}': GET "
                    f"/api/v1/mcp-servers/{target.server_id}/tools lists the ones it has."
                )
            errors.append(FieldError(join(*at, "tools", i), message, "unknown_tool"))
            continue
        description = tool.description or tool.title or tool.name
        tools.append(mcp_tool(target.server_id, tool.name, description, tool.input_schema,
                              use.prefix))  # fmt: skip
    return tools


def server_of(tool: KnowledgeTool) -> str | None:
    """The MCP server an agent's tool is of, if it is one's."""
    target = tool.bound.get(BOUND)
    return str(target.get("server")) if isinstance(target, dict) else None


def per_use(placed: Sequence[Placed], tools: Sequence[KnowledgeTool]) -> list[KnowledgeTool | None]:
    """For a workflow's nodes, each naming one tool: the tool each use gave (None: none)."""
    out: list[KnowledgeTool | None] = []
    for _, use, target in placed:
        wanted = {"server": target.server_id, "tool": (use.tools or [""])[0]}
        out.append(next((t for t in tools if t.bound.get(BOUND) == wanted), None))
    return out


# -- calls --------------------------------------------------------------------------------------


async def perform(db: Database, clients: McpClients, user_id: str, request: CallKnowledge) -> Done:
    """A run's call of an MCP tool, for its user as they are now (read with the server in
    one transaction, which ends before the call)."""
    parts = split_arguments(request.arguments)
    if parts is None:
        error = {"kind": "invalid_agent", "message": "This MCP tool call names no server."}
        return Done(request.command_id, False, error=error)
    server_id, tool, arguments = parts
    try:
        async with db.read() as conn:
            principal = await principal_of(conn, user_id)
            target = await target_for(conn, Reach(conn, principal), server_id, user_id)
    except SecretUnavailable as exc:
        return Done(request.command_id, False, error={"kind": "mcp", "message": str(exc)})
    if target is None:
        error = {"kind": "unreachable", "message": unreachable(KIND, server_id)}
        return Done(request.command_id, False, error=error)
    allowed = target.spec.allowed_tools
    if allowed is not None and tool not in allowed:
        message = f"The MCP server '{target.name}' no longer allows '{tool}'."
        return Done(request.command_id, False, error={"kind": "mcp", "message": message})
    try:
        result = await clients.call(target, tool, arguments)
    except McpFailure as exc:
        return Done(request.command_id, False, error={"kind": "mcp", "message": str(exc)})
    value = result_value(result)
    if result.is_error:
        message = value if isinstance(value, str) else orjson.dumps(value).decode()
        return Done(request.command_id, False, error={"kind": "tool", "message": message})
    return Done(request.command_id, True, value)


def result_value(result: mcp_types.CallToolResult) -> Any:
    """What the model (or the node's outputs) get of a tool's result: the structured
    result when there is one, else its text, else a description of each block."""
    if result.structured_content is not None and not result.is_error:
        return result.structured_content
    parts: list[str] = []
    for block in result.content:
        if isinstance(block, mcp_types.TextContent):
            parts.append(block.text)
        elif isinstance(block, mcp_types.ImageContent | mcp_types.AudioContent):
            parts.append(f"[{block.type}: {block.mime_type}, {len(block.data) * 3 // 4} bytes]")
        elif isinstance(block, mcp_types.ResourceLink):
            parts.append(f"[resource: {block.uri}]")
        elif isinstance(block, mcp_types.EmbeddedResource):
            text = getattr(block.resource, "text", None)
            parts.append(text if isinstance(text, str) else f"[resource: {block.resource.uri}]")
    return "\n".join(parts)[:MAX_TEXT]


class McpServerService:
    """``GET /api/v1/mcp-servers/{id}/tools``: what a server offers, for the caller who may
    run it (the console's picker, a user writing an agent)."""

    def __init__(self, db: Database, clients: McpClients | None) -> None:
        self.db = db
        self.clients = clients

    async def tools(self, principal: Principal, server_id: str, refresh: bool) -> dict[str, Any]:
        try:
            async with self.db.read() as conn:
                reach = Reach(conn, principal)
                target = await target_for(conn, reach, server_id, principal.user_id)
        except SecretUnavailable as exc:
            raise BadGateway(str(exc)) from exc
        if target is None:
            raise NotFound(unreachable(KIND, server_id))
        if self.clients is None:
            raise BadGateway("This process has no MCP connections (it runs no runtime).")
        try:
            tools = await self.clients.tools(target, refresh)
        except McpFailure as exc:
            raise BadGateway(str(exc)) from exc
        allowed = target.spec.allowed_tools
        return {
            "data": [_described(t) for t in tools if allowed is None or t.name in allowed],
            "server": {"id": target.server_id, "name": target.name, "version": target.version},
        }


def _described(tool: mcp_types.Tool) -> dict[str, Any]:
    annotations = tool.annotations.model_dump(exclude_none=True) if tool.annotations else None
    return {
        "name": tool.name,
        "title": tool.title,
        "description": tool.description or "",
        "input_schema": tool.input_schema,
        "output_schema": tool.output_schema,
        "annotations": annotations,
    }
