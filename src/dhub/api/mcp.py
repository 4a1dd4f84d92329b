"""``/mcp``: dhub as an MCP server (docs/mcp.md), over the Streamable HTTP transport,
stateless, with the official SDK's low-level server.

The route is one of the process's shared routes (app.py ``_shared_routes``); each app holds its
own session manager (``app.state.mcp``, run for the app's lifespan). A request is authenticated
here, with the bearer token like every /api/v1 route (no token: 401), before the SDK sees it;
the handlers then reach the caller and the calling app's services through the request the SDK
hands them, never through a global. What tools mean is services/agent_tools.py.
"""

from __future__ import annotations

from typing import Any

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.shared.exceptions import MCPError
from starlette.requests import Request
from starlette.types import Receive, Scope, Send

from dhub import __version__
from dhub.access.principal import Principal
from dhub.api.deps import Services, check_parameters
from dhub.domain.bounds import MAX_BODY_BYTES
from dhub.services.agent_tools import WAIT_SECONDS, AgentTool, AgentTools, UnknownTool

PATH = "/mcp"
_CALLER = "dhub.caller"  # the scope key of the authenticated principal
INSTRUCTIONS = (
    "Each tool runs one dhub agent as you (the owner of the API token): a workflow or event "
    "agent with its start inputs, a chat agent with a message (pass the conversation_id of an "
    "answer to continue that conversation). A call waits for the run and answers its outputs; "
    "a run that waits for a person answers where to answer it."
)


class Endpoint:
    """The ASGI endpoint of ``/mcp``. A class, not a function, so that Starlette hands it the
    raw request (the SDK answers it) rather than wrapping it in a request-response route."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        check_parameters(request)
        svc: Services = request.app.state.services
        who = await svc.auth.authenticate(request.headers.get("authorization"))
        manager: StreamableHTTPSessionManager = request.app.state.mcp
        await manager.handle_request({**scope, _CALLER: who}, receive, send)


def session_manager(wait_seconds: float = WAIT_SECONDS) -> StreamableHTTPSessionManager:
    """One app's MCP session manager: stateless (each POST stands alone, so any API process
    answers it) and answering JSON rather than an event stream (a call answers once).
    ``wait_seconds``: how long a call waits for its run (``DHUB_MCP_WAIT_SECONDS``)."""

    async def list_tools(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        who, catalog, _ = _caller(ctx, wait_seconds)
        listed = await catalog.tools(who)
        return types.ListToolsResult(tools=[_mcp_tool(t) for t in listed])

    async def call_tool(
        ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        who, catalog, base_url = _caller(ctx, wait_seconds)
        return await _call(catalog, who, params, base_url)

    server: Server[Any] = Server(
        "dhub",
        version=__version__,
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        # Our tools' schemas bind no parameter to an Mcp-Param-* header, so there is nothing
        # for the SDK to check such headers against; without this it runs tools/list (every
        # runnable agent's schema) on every tools/call to find that out (bench/README.md).
        get_tool_input_schema=_no_header_parameters,
    )
    return StreamableHTTPSessionManager(
        server, json_response=True, stateless=True, max_request_body_size=MAX_BODY_BYTES
    )


def _no_header_parameters(name: str) -> None:
    return None


def _caller(
    ctx: ServerRequestContext[Any, Any], wait_seconds: float
) -> tuple[Principal, AgentTools, str]:
    request = ctx.request
    if not isinstance(request, Request) or not isinstance(request.scope.get(_CALLER), Principal):
        # Only Endpoint reaches the manager, and it always sets the caller.
        raise MCPError(types.INTERNAL_ERROR, "The request reached MCP unauthenticated.")
    svc: Services = request.app.state.services
    tools = AgentTools(svc.agents, svc.runs, svc.conversations, wait_seconds)
    return request.scope[_CALLER], tools, str(request.base_url).rstrip("/")


async def _call(
    catalog: AgentTools, who: Principal, params: types.CallToolRequestParams, base_url: str
) -> types.CallToolResult:
    try:
        done = await catalog.call(who, params.name, params.arguments or {}, base_url)
    except UnknownTool as exc:
        # The same answer for a name no agent has and for an agent the caller may not run.
        raise MCPError(types.INVALID_PARAMS, str(exc)) from None
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=done.text)],
        structured_content=done.result,
        is_error=done.error,
    )


def _mcp_tool(tool: AgentTool) -> types.Tool:
    return types.Tool(
        name=tool.name,
        title=tool.title,
        description=tool.description,
        input_schema=tool.input_schema,
        meta={"dhub/agent_id": tool.agent_id},
    )
