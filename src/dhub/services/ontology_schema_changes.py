"""A new version of an ontology's schema against the objects and links it holds: what may
not change is refused (knowledge/ontology_schema.py ``change_problems``); titles follow a
changed title property. Called by ResourceService.patch inside its transaction."""

from __future__ import annotations

from typing import Any

from dhub.domain.errors import FieldError
from dhub.domain.resources import OntologySpec
from dhub.knowledge.ontology_schema import change_problems
from dhub.knowledge.ontology_values import search_text, title_of
from dhub.store import ontology as store
from dhub.store.db import Conn


async def ontology_changes(
    conn: Conn, ontology_id: str, current: dict[str, Any], new: OntologySpec
) -> list[FieldError]:
    """The problems with replacing ``current`` (the stored document) by ``new``; when there
    are none, the objects' titles are brought up to date with ``new``'s title properties."""
    old = OntologySpec.model_validate(current)
    errors = change_problems(old, new, await store.counts(conn, ontology_id, old))
    if errors:
        return errors
    before = {t.name: t.title_property for t in old.object_types}
    for spec in new.object_types:
        if spec.name not in before or before[spec.name] == spec.title_property:
            continue
        for record in await store.all_of_type(conn, ontology_id, spec.name):
            title = title_of(spec, record.properties, record.key)
            if title != record.title:
                values = {
                    "title": title,
                    "search_text": search_text(title, record.key, record.properties),
                }
                await store.update_object(conn, ontology_id, spec.name, record.key, values)
    return []
