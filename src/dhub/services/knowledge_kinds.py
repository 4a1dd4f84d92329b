"""The knowledge kinds dhub has, by category (the agent field that lists each is
domain/knowledge.py ``KNOWLEDGE_FIELDS``)."""

from __future__ import annotations

from collections.abc import Mapping

from dhub.knowledge import tables_tools, templates
from dhub.knowledge.tools import KnowledgeKind, Operation
from dhub.services import table_tools
from dhub.services.ontology_ops import KIND as ONTOLOGY

KINDS: Mapping[str, KnowledgeKind] = {
    "table": KnowledgeKind("table", tables_tools.agent_tools, table_tools.OPERATIONS),
    "template": templates.KIND,
    "ontology": ONTOLOGY,
}


def operation(name: str) -> Operation | None:
    """What performs the operation ``name`` ("table.query"), if any kind has it."""
    for kind in KINDS.values():
        found = kind.operations.get(name)
        if found is not None:
            return found
    return None
