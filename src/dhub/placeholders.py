"""Placeholders that name a resource where its id goes: ``${table:sales}``. Shared by the
SDK (``Client.with_ids``, the CLI's ``agents apply -f``) and the server's example loader; a
leaf module with no dependencies, so that neither side pulls the other in."""

from __future__ import annotations

import re
from typing import Any

# What each kind of resource is called in ids (``folder.<ulid>``) and URLs (``/folders``).
CATEGORIES = (
    "agent", "prompt", "tool", "actor", "role", "folder", "collection", "template", "table",
    "ontology", "mcp_server", "secret",
)  # fmt: skip

# A document may name a resource where its id goes as ``${table:sales}`` (the whole string):
# ``dhub agents create/apply/validate`` and the example loader put the id in before sending.
PLACEHOLDER = re.compile(r"\$\{(" + "|".join(CATEGORIES) + r"):([^{}]+)\}")


def placeholders(doc: Any) -> set[tuple[str, str]]:
    """The ``(category, name)`` of every placeholder in a document."""
    if isinstance(doc, str):
        found = PLACEHOLDER.fullmatch(doc)
        return {(found.group(1), found.group(2))} if found else set()
    values = doc.values() if isinstance(doc, dict) else doc if isinstance(doc, list) else ()
    return set().union(*(placeholders(v) for v in values))


def fill_placeholders(doc: Any, ids: dict[tuple[str, str], str]) -> Any:
    """The document with each placeholder replaced by the id ``ids`` holds for it; one it
    lacks is left as it is (the server then says the reference is unknown)."""
    if isinstance(doc, str):
        found = PLACEHOLDER.fullmatch(doc)
        return ids.get((found.group(1), found.group(2)), doc) if found else doc
    if isinstance(doc, dict):
        return {k: fill_placeholders(v, ids) for k, v in doc.items()}
    if isinstance(doc, list):
        return [fill_placeholders(v, ids) for v in doc]
    return doc
