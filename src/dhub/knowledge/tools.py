"""What a knowledge kind provides: the tools a listed resource gives an agent and the
operations that perform their calls.

An operation runs for a run's user (``principal``), checks that user's access itself on every
call (access may have been lost since the run started) and refuses ids outside the ones the
agent listed (they arrive as bound arguments: domain/knowledge.py). ``run_id`` is in the
arguments when a run calls it (a rendered template becomes one of the run's artifacts).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dhub.domain.knowledge import KnowledgeTool

if TYPE_CHECKING:
    from dhub.access.principal import Principal
    from dhub.store.db import Database
    from dhub.store.resources import ResourceRecord

__all__ = ["AgentTools", "KnowledgeKind", "KnowledgeTool", "Operation"]

Operation = Callable[["Database", "Principal", dict[str, Any]], Awaitable[Any]]
# The tools the resources of one kind that an agent lists give it (read for its user).
AgentTools = Callable[[Sequence["ResourceRecord"]], list[KnowledgeTool]]


@dataclass(frozen=True, slots=True)
class KnowledgeKind:
    category: str  # "table", "template", "ontology"
    agent_tools: AgentTools
    operations: Mapping[str, Operation]  # "table.query" -> what performs it
