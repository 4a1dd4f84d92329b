"""The tools an agent that lists ontologies gets (pure: names, descriptions, JSON Schemas).

One set of tools covers every ontology the agent lists; their ids are bound
(``ontology_ids``), and the model names one with ``ontology`` when the agent lists several.
Reading tools (search, get, follow) run at once; changing tools (create, update, delete,
link, unlink) are actors: a person confirms each call unless the agent's owner set
``options.ontology_confirmation: auto`` (services/ontology_ops.py performs them).
The descriptions list each ontology's object types, properties and link types.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dhub.domain.knowledge import KnowledgeTool
from dhub.domain.resources import OntologySpec
from dhub.knowledge.ontology_values import OPS

MAX_DESCRIBED = 8000  # characters of schema told the model
READS = ("search", "get", "follow")
CHANGES = ("create_object", "update_object", "delete_object", "link", "unlink")
TOOL_NAMES = {
    "search": "ontology_search",
    "get": "ontology_get",
    "follow": "ontology_follow",
    "create_object": "ontology_create_object",
    "update_object": "ontology_update_object",
    "delete_object": "ontology_delete_object",
    "link": "ontology_link",
    "unlink": "ontology_unlink",
}

_KEY = {"type": ["string", "integer"], "description": "The object's primary key value."}
_LIMIT = {"type": "integer", "minimum": 1, "maximum": 50, "description": "Default 20."}
_CURSOR = {"type": "string", "description": "next_cursor of the previous page."}


def describe(spec: OntologySpec, ontology_id: str) -> str:
    """An ontology's schema as the model is told it."""
    lines = [f"Ontology '{spec.name}' (id {ontology_id}): {spec.description}".rstrip(": ")]
    for t in spec.object_types:
        props = ", ".join(
            f"{p.name} {p.type}{' required' if p.required else ''}"
            + (f" ({p.description})" if p.description else "")
            for p in t.properties
        )
        title = f"; title {t.title_property}" if t.title_property else ""
        about = f" — {t.description}" if t.description else ""
        lines.append(f"- object type {t.name}{about}: key {t.primary_key}{title}; {props}")
    for lt in spec.link_types:
        inverse = f"; backwards: {lt.inverse}" if lt.inverse else ""
        about = f" — {lt.description}" if lt.description else ""
        lines.append(
            f"- link {lt.name}: {lt.from_type} -> {lt.to_type} ({lt.cardinality}{inverse}){about}"
        )
    return "\n".join(lines)


def _schemas(several: bool) -> dict[str, dict[str, Any]]:
    ontology: dict[str, Any] = {
        "type": "string",
        "description": "The id of the ontology to use"
        + (" (required: the agent has several)." if several else " (optional)."),
    }
    base: dict[str, Any] = {
        "ontology": ontology,
        "type": {"type": "string", "description": "An object type."},
    }
    needed = ["ontology"] if several else []
    filters = {
        "type": "array",
        "items": {
            "type": "object",
            "properties": {
                "property": {"type": "string"},
                "op": {"type": "string", "enum": list(OPS), "description": "Default eq."},
                "value": {"description": "Of the property's type; a list for 'in'."},
            },
            "required": ["property", "value"],
        },
        "description": "Conditions on the type's properties (needs 'type').",
    }
    props = {"type": "object", "description": "Property values by name."}
    link = {"type": "string", "description": "A link type's name."}

    def obj(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
        return {"type": "object", "properties": properties, "required": needed + required}

    return {
        "search": obj(
            {
                **base,
                "filters": filters,
                "q": {
                    "type": "string",
                    "description": "Words that must all appear "
                    "in an object's title, key or text properties.",
                },
                "limit": _LIMIT,
                "cursor": _CURSOR,
            },
            [],
        ),
        "get": obj({**base, "key": _KEY}, ["type", "key"]),
        "follow": obj(
            {
                **base,
                "key": _KEY,
                "link": {
                    "type": "string",
                    "description": "A link type's name, or its backwards name.",
                },
                "limit": _LIMIT,
                "cursor": _CURSOR,
            },
            ["type", "key", "link"],
        ),
        "create_object": obj({**base, "properties": props}, ["type", "properties"]),
        "update_object": obj(
            {
                **base,
                "key": _KEY,
                "properties": {**props, "description": "The values to change; null removes one."},
            },
            ["type", "key", "properties"],
        ),
        "delete_object": obj({**base, "key": _KEY}, ["type", "key"]),
        "link": obj(
            {"ontology": ontology, "link_type": link, "from": _KEY, "to": _KEY},
            ["link_type", "from", "to"],
        ),
        "unlink": obj(
            {"ontology": ontology, "link_type": link, "from": _KEY, "to": _KEY},
            ["link_type", "from", "to"],
        ),
    }


_WHAT = {
    "search": "Search objects by type, property filters and text, a page at a time.",
    "get": "Get one object by its type and key.",
    "follow": "The objects an object is linked to by a link type (or its backwards name).",
    "create_object": "Create an object (a person may have to confirm).",
    "update_object": "Change some of an object's properties (a person may have to confirm).",
    "delete_object": "Delete an object and its links (a person may have to confirm).",
    "link": "Link two objects by a link type (a person may have to confirm).",
    "unlink": "Remove a link between two objects (a person may have to confirm).",
}


def agent_tools(
    records: Sequence[Any], *, auto: bool = False, changes: bool = True
) -> list[KnowledgeTool]:
    """The tools the listed ontologies (their stored records: ``id``, ``document``) give an
    agent. ``auto``: changing tools run without a person's confirmation (the agent's owner
    chose so); ``changes``: whether the changing tools are offered at all."""
    if not records:
        return []
    specs = [(r.id, OntologySpec.model_validate_json(r.document)) for r in records]
    schema = "\n".join(describe(spec, ontology_id) for ontology_id, spec in specs)
    if len(schema) > MAX_DESCRIBED:
        schema = schema[: MAX_DESCRIBED - 3] + "..."
    bound = {"ontology_ids": [ontology_id for ontology_id, _ in specs]}
    parameters = _schemas(len(specs) > 1)
    tools = []
    for op in (*READS, *(CHANGES if changes else ())):
        description = f"{_WHAT[op]}\n{schema}"
        tools.append(
            KnowledgeTool(
                TOOL_NAMES[op],
                description,
                parameters[op],
                f"ontology.{op}",
                dict(bound),
                confirm=op in CHANGES and not auto,
            )
        )
    return tools
