"""The MCP servers half of ``Client`` (docs/mcp.md "Using MCP servers' tools"): the servers
agents take tools from, stored as resources, and the tools each one offers.

Where a method takes a server it takes its id (``mcp_server.…``) or its name, looked up among
the servers the caller can see (several of that name: ``AmbiguousName``). Secret values in
``headers`` and ``env`` are written ``{"secret": "secret.…"}`` and come back that way: no
answer ever holds the secret itself.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from dhub.client._models import McpServer, McpTool, McpTools, ResourcePage
from dhub.client._names import is_id, pick
from dhub.client._paths import follow, query, segment

if TYPE_CHECKING:
    import httpx

_MERGE_PATCH = {"Content-Type": "application/merge-patch+json"}
_CATEGORY = "mcp_server"


class McpServersMixin:
    """Mixed into ``Client``, which supplies the transport."""

    if TYPE_CHECKING:

        def _object(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]: ...

        def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response: ...

    def create_mcp_server(self, doc: Mapping[str, Any]) -> McpServer:
        """Store an MCP server: ``name``, ``transport`` (``streamable_http`` with a ``url``,
        or ``stdio`` with a ``command`` or a ``source``) and what that transport takes. A
        field that does not fit is ``InvalidInput`` naming it."""
        return self._object("POST", "/mcp-servers", json=dict(doc))

    def get_mcp_server(self, server: str) -> McpServer:
        """The MCP server ``server`` names (its id or its name)."""
        return self._object("GET", self._mcp_path(server))

    def update_mcp_server(self, server: str, patch: Mapping[str, Any]) -> McpServer:
        """Apply an RFC 7396 merge patch; a changed document is a new version."""
        return self._object("PATCH", self._mcp_path(server), json=dict(patch), headers=_MERGE_PATCH)

    def delete_mcp_server(self, server: str) -> None:
        self._request("DELETE", self._mcp_path(server))

    def list_mcp_servers(
        self,
        *,
        name: str | None = None,
        q: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> ResourcePage:
        """One page of the MCP servers the caller can see, in creation order."""
        params = query(name=name, q=q, limit=limit, cursor=cursor)
        body = self._object("GET", "/mcp-servers", params=params)
        return ResourcePage(data=list(body.get("data") or []), next_cursor=body.get("next_cursor"))

    def iter_mcp_servers(
        self, *, name: str | None = None, q: str | None = None, page_size: int | None = None
    ) -> Iterator[McpServer]:
        """Every matching MCP server, fetching pages lazily."""
        return follow(
            lambda cursor: self.list_mcp_servers(name=name, q=q, limit=page_size, cursor=cursor)
        )

    def mcp_server_tools(self, server: str, *, refresh: bool = False) -> McpTools:
        """The tools ``server`` offers agents (its allowed ones, with their input schemas),
        from the server's cache unless ``refresh``. Needs run access: a server the caller may
        only read is ``NotFound``, as one that does not exist; one dhub cannot reach is a
        ``DhubAPIError`` with status 502 saying why."""
        params = {"refresh": "true"} if refresh else {}
        body = self._object("GET", f"{self._mcp_path(server)}/tools", params=params)
        tools = [McpTool.from_json(t) for t in body.get("data") or []]
        return McpTools(server=dict(body.get("server") or {}), tools=tools)

    def _mcp_path(self, server: str) -> str:
        return f"/mcp-servers/{segment(self._mcp_server_id(server))}"

    def _mcp_server_id(self, server: str) -> str:
        if is_id(_CATEGORY, server):
            return server
        return str(pick(_CATEGORY, server, self.iter_mcp_servers(name=server))["id"])
