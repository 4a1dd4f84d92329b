"""Compiled agent versions for runs: each version compiled once, its references resolved for
the run's user at every start and resume (the one reference check)."""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

import orjson

from dhub.access.principal import Principal
from dhub.access.tokens import principal_of
from dhub.domain.agent import AgentSpec
from dhub.domain.errors import NotFound
from dhub.domain.resources import ResolvedAgent
from dhub.engine.compile import Budget, CompiledGraph, compile_agent
from dhub.engine.validate import validate_agent_document
from dhub.services.mcp_client import McpClients
from dhub.services.resolution import (
    UnresolvableAgent,
    refers,
    resolve_agent,
    resolve_nodes,
    unresolvable,
    with_node_items,
)
from dhub.store import agents as agents_store
from dhub.store.db import Database

_GRAPHS_CACHED = 256
_T = TypeVar("_T")


class Graphs:
    """Compiled agent versions. A version never changes, so an agent without references
    compiles once. References (a react agent's prompts, tools, actors and roles by id, a
    workflow node's stored tool or actor) resolve to what they name now, for the run's user
    (the one reference check), each time a run starts or resumes: a fixed tool or prompt
    applies to the runs that wait, and access lost meanwhile stops them."""

    def __init__(
        self, db: Database, budget: Budget | None = None, mcp: McpClients | None = None
    ) -> None:
        self.db = db
        self.budget = budget  # a react agent's input-token budget (compaction): see app.py
        self.mcp = mcp  # the process's MCP connections: MCP servers' tools (mcp_client.py)
        self._cache: OrderedDict[Hashable, CompiledGraph] = OrderedDict()
        self._specs: OrderedDict[tuple[str, int], AgentSpec] = OrderedDict()

    async def load(
        self,
        agent_id: str,
        version: int,
        user: Principal | str,
        document: str | None = None,
        *,
        starting: bool = False,
    ) -> CompiledGraph:
        """The graph of an agent version run by ``user`` (a principal, or a user id to act
        as), ``document``: its stored JSON, when the caller has read it. ``starting``: a run
        is about to start, so a reference that does not resolve is the caller's error
        (UnresolvableAgent, 422); otherwise the graph fails each run that meets it, saying
        why."""
        key = (agent_id, version)
        graph = _cached(self._cache, key)
        if graph is not None:
            return graph
        spec = _cached(self._specs, key)
        if spec is None:
            spec = validate_agent_document(orjson.loads(document or await self._read(*key)))
            if not refers(spec):
                return _keep(self._cache, key, compile_agent(spec, self.budget))
            _keep(self._specs, key, spec)
        principal = user if isinstance(user, Principal) else await self._principal(user)
        if spec.mode == "workflow":
            nodes, problems = await resolve_nodes(self.db, spec, principal, self.mcp)
            if problems and starting:
                raise unresolvable(spec, problems)
            known = ResolvedAgent("", knowledge=nodes.knowledge)
            return self._compiled(
                key, nodes, lambda: compile_agent(with_node_items(spec, nodes.items), None, known)
            )
        resolved: ResolvedAgent | str
        try:
            resolved = await resolve_agent(self.db, spec, principal, self.mcp)
        except UnresolvableAgent as exc:
            if starting:
                raise
            resolved = str(exc)
        return self._compiled(key, resolved, lambda: compile_agent(spec, self.budget, resolved))

    def _compiled(
        self, key: tuple[str, int], resolved: object, make: Callable[[], CompiledGraph]
    ) -> CompiledGraph:
        """The graph of an agent version with what its references resolved to: compiled once
        for each thing they resolve to."""
        digest = hashlib.blake2b(repr(resolved).encode(), digest_size=16).digest()
        return _cached(self._cache, (*key, digest)) or _keep(self._cache, (*key, digest), make())

    async def __call__(self, agent_id: str, version: int, user_id: str) -> CompiledGraph:
        return await self.load(agent_id, version, user_id)

    async def _principal(self, user_id: str) -> Principal:
        async with self.db.read() as conn:
            return await principal_of(conn, user_id)

    async def _read(self, agent_id: str, version: int) -> str:
        async with self.db.read() as conn:
            found = await agents_store.get_version(conn, agent_id, version)
        if found is None:
            raise NotFound(f"Agent '{agent_id}' has no version {version}.")
        return found.document


def _cached(cache: OrderedDict[Any, _T], key: Hashable) -> _T | None:
    found = cache.get(key)
    if found is not None:
        cache.move_to_end(key)
    return found


def _keep(cache: OrderedDict[Any, _T], key: Hashable, value: _T) -> _T:
    cache[key] = value
    while len(cache) > _GRAPHS_CACHED:
        cache.popitem(last=False)
    return value
