"""What an agent gets from the tables, templates and ontologies it lists (issue 19).

A ``KnowledgeTool`` is a tool the platform performs itself, for the run's user, rather than a
function in the sandbox: describing or querying a table, rendering a template, searching an
ontology. The kinds' own code (``dhub.knowledge``) says which tools a listed resource gives;
the engine only needs their shape, so it is pure and lives here.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

# The agent fields that list knowledge, and the kind of resource each holds.
KNOWLEDGE_FIELDS: dict[str, str] = {"tables": "table", "templates": "template",
                                    "ontologies": "ontology"}  # fmt: skip
TOOL_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")


@dataclass(frozen=True, slots=True)
class KnowledgeTool:
    """A tool a listed resource gives an agent. ``bound`` arguments (the ids the agent
    listed) are merged over the model's, so a model never reaches what the agent did not
    list; ``confirm``: it changes data, so a person confirms each call first (an actor)."""

    name: str  # what the model calls (TOOL_NAME)
    description: str  # what the model is told
    parameters: dict[str, Any]  # JSON Schema of the model's arguments
    operation: str  # what the runtime performs, e.g. "table.query" (dhub.knowledge)
    bound: dict[str, Any] = field(default_factory=dict)
    confirm: bool = False

    def arguments(self, given: dict[str, Any]) -> dict[str, Any]:
        """The operation's arguments: the model's (or a node's), the bound ones over them."""
        return {**given, **self.bound}


def for_code(tools: Iterable[KnowledgeTool]) -> tuple[dict[str, Any], ...]:
    """The knowledge tools as a function's call carries them (``CallFunction.knowledge``,
    plain JSON for the journal): what performs each, or refuses it, when the function's code
    calls it (docs/sandbox.md "Knowledge from code")."""
    return tuple({"name": t.name, "operation": t.operation, "bound": dict(t.bound),
                  "confirm": t.confirm} for t in tools)  # fmt: skip


def from_code(item: dict[str, Any]) -> KnowledgeTool:
    """A tool ``for_code`` gave, again (without what only the model is told)."""
    return KnowledgeTool(
        str(item["name"]), "", {}, str(item["operation"]), dict(item.get("bound") or {}),
        bool(item.get("confirm")),
    )  # fmt: skip
