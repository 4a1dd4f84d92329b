"""Tables, templates and ontologies at work in runs (issue 19): the tools an agent's listed
knowledge gives it, and the port that performs their calls.

- ``tools_of``: the tools the knowledge an agent lists gives it (each kind says which:
  services/knowledge_kinds.py), for what the one reference check let through
  (services/references.py ``listed_knowledge``).
- ``KnowledgeCalls``: the runtime's knowledge port for one run. Every call is performed for
  the run's user as they are *now* (groups and markings read again), by an operation that
  checks their access itself: what a run reaches is what its user may read at that moment.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from dhub.access.tokens import principal_of
from dhub.domain.knowledge import KnowledgeTool
from dhub.domain.mcp import OPERATION as MCP_CALL
from dhub.engine.state import CallKnowledge, Done
from dhub.knowledge.errors import KnowledgeError
from dhub.runtime.ports import PortError
from dhub.store.db import Database
from dhub.store.resources import ResourceRecord

if TYPE_CHECKING:
    from dhub.services.mcp_client import McpClients

# The agent option by which its owner lets its ontology tools change objects without a
# person's confirmation: ``options: {ontology_confirmation: auto}`` (default "confirm").
AUTO_OPTION = "ontology_confirmation"


def tools_of(
    records: dict[str, list[ResourceRecord]], options: Mapping[str, Any] | None = None
) -> list[KnowledgeTool]:
    """The tools the listed resources give, kind by kind; ``options``: the agent's."""
    tools: list[KnowledgeTool] = []
    for kind, rows in records.items():
        provider = _kinds().KINDS.get(kind)
        if provider is not None and rows:
            tools += provider.agent_tools(rows)
    if (options or {}).get(AUTO_OPTION) == "auto":
        tools = [
            dataclasses.replace(t, confirm=False) if t.operation.startswith("ontology.") else t
            for t in tools
        ]
    return tools


def collisions(tools: Sequence[KnowledgeTool], taken: Sequence[str]) -> list[str]:
    """The names of ``tools`` that another tool of the agent has too (the model calls tools
    by name, so each must be one)."""
    seen = set(taken)
    clashing = []
    for tool in tools:
        if tool.name in seen:
            clashing.append(tool.name)
        seen.add(tool.name)
    return clashing


class KnowledgeCalls:
    """The knowledge port of one run (runtime/ports.py ``KnowledgePort``)."""

    def __init__(
        self, db: Database, user_id: str, run_id: str, mcp: McpClients | None = None
    ) -> None:
        self.db = db
        self.user_id = user_id
        self.run_id = run_id
        self.mcp = mcp

    async def call(self, request: CallKnowledge) -> Done:
        if request.operation == MCP_CALL and self.mcp is not None:
            # An MCP server's tool (domain/mcp.py): its arguments are the tool's own, whole.
            done: Done = await _mcp().perform(self.db, self.mcp, self.user_id, request)
            return done
        perform = _kinds().operation(request.operation)
        if perform is None:
            raise PortError(
                "invalid_agent",
                f"This dhub has no knowledge operation '{request.operation}' (the agent was "
                "saved by another version of dhub?): save the agent again.",
            )
        async with self.db.read() as conn:
            principal = await principal_of(conn, self.user_id)
        arguments: dict[str, Any] = {**request.arguments, "run_id": self.run_id}
        try:
            value = await perform(self.db, principal, arguments)
        except KnowledgeError as exc:
            error = {"kind": "knowledge", "message": str(exc)}
            return Done(request.command_id, False, error=error)
        return Done(request.command_id, True, value)


def _mcp() -> Any:
    """services/mcp_servers.py, imported when first needed (it imports the reference check)."""
    from dhub.services import mcp_servers

    return mcp_servers


def _kinds() -> Any:
    """services/knowledge_kinds.py, imported when first needed: the kinds' operations are
    services (tables, ontologies) that import the reference check, which imports this."""
    from dhub.services import knowledge_kinds

    return knowledge_kinds
