"""What an MCP server offers (docs/mcp.md "Using MCP servers' tools"). The MCP server resource
itself (its document, sharing, versions) has the endpoints every kind has
(routers/resources.py)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query, Response

from dhub.api.deps import Ctx
from dhub.api.responses import ERROR_RESPONSES, JSON

router = APIRouter(prefix="/mcp-servers", tags=["mcp-servers"], responses=ERROR_RESPONSES)

_RESPONSES: dict[int | str, dict[str, Any]] = {
    502: {"description": "The MCP server could not be reached, or answered an error"}
}


@router.get(
    "/{server_id}/tools",
    name="list_mcp_server_tools",
    summary="The tools an MCP server offers agents (its allowed ones), listed live or cached",
    responses=_RESPONSES,
)
async def tools(
    server_id: str,
    ctx: Ctx,
    refresh: bool = Query(False, description="List them again now instead of from the cache."),
) -> Response:
    """Needs run access to the server (its tools are called on the caller's behalf)."""
    return JSON(await ctx.svc.mcp_servers.tools(ctx.who, server_id, refresh))
