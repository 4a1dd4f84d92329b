"""The tools a table gives an agent that lists it (issue 19, docs/tables.md): describe a table,
query it, read it with SQL. ``agent_tools`` builds them from the stored tables (the model is
told their names, ids and columns); services/table_tools.py performs each call (checking the
run's user's access at every call).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dhub.domain.knowledge import KnowledgeTool
from dhub.domain.resources import TableSpec

if TYPE_CHECKING:
    from dhub.store.resources import ResourceRecord

MAX_MODEL_ROWS = 200  # rows a tool call gives the model at most (services/table_tools.py)
_MAX_DESCRIPTION = 6000


@dataclass(frozen=True, slots=True)
class TableInfo:
    """What the model is told of a table: the tables an agent lists, as its user sees them
    (``readable_tables``)."""

    id: str
    name: str
    description: str
    columns: list[dict[str, Any]]  # {name, type, description}


def info_of(record: ResourceRecord) -> TableInfo:
    spec = TableSpec.model_validate_json(record.document, strict=False)
    columns = [{"name": c.name, "type": c.type, "description": c.description} for c in spec.columns]
    return TableInfo(record.id, record.name, spec.description, columns)


def _catalog(items: Sequence[TableInfo]) -> str:
    lines = []
    for item in items:
        cols = ", ".join(f"{c['name']} ({c['type']})" for c in item.columns) or "no columns"
        about = f" — {item.description}" if item.description else ""
        lines.append(f"- '{item.name}' (id {item.id}){about}: {cols}")
    text = "\n".join(lines)
    return text if len(text) <= _MAX_DESCRIPTION else text[: _MAX_DESCRIPTION - 3] + "..."


_CONDITION = (
    'A condition is {"column": name, "op": one of eq, ne, lt, le, gt, ge, in (value is a '
    'list), contains (text, any case), is_null (value true/false), "value": ...}, or '
    '{"and": [conditions]}, {"or": [conditions]}, {"not": condition}.'
)


def agent_tools(records: Sequence[ResourceRecord]) -> list[KnowledgeTool]:
    """The tools a model gets for the tables an agent lists (none without tables), from the
    tables as its user may read them (services/references.py ``listed_knowledge``)."""
    return tools_for([info_of(r) for r in records if r.category == "table"])


def tools_for(items: Sequence[TableInfo], dialect: str | None = None) -> list[KnowledgeTool]:
    """The tools for these tables; ``dialect`` (sqlite, postgres) named to the model."""
    if not items:
        return []
    catalog = _catalog(items)
    bound = {"table_ids": [item.id for item in items]}
    table_param = {
        "type": "string",
        "description": "The table's name (or id); may be left out when there is one table.",
    }
    database = {"sqlite": "SQLite", "postgres": "PostgreSQL", "postgresql": "PostgreSQL"}
    flavour = f" ({database[dialect]} syntax)" if dialect in database else ""
    return [
        KnowledgeTool(
            name="describe_table",
            description=(
                "Describe a table: its columns and types, how many rows it has, and the first "
                f"few rows. Tables:\n{catalog}"
            ),
            parameters={
                "type": "object",
                "properties": {"table": table_param},
                "additionalProperties": False,
            },
            operation="table.describe",
            bound=bound,
        ),
        KnowledgeTool(
            name="query_table",
            description=(
                "Query one table: filter, select columns, group_by with aggregates (count, "
                "sum, avg, min, max), sort, limit (default 50, at most 200) and cursor (the "
                f"next_cursor of a previous page). {_CONDITION} Tables:\n{catalog}"
            ),
            parameters={
                "type": "object",
                "properties": {
                    "table": table_param,
                    "filter": {"type": "object", "description": _CONDITION},
                    "select": {"type": "array", "items": {"type": "string"}},
                    "group_by": {"type": "array", "items": {"type": "string"}},
                    "aggregates": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {
                                "op": {
                                    "type": "string",
                                    "enum": ["count", "sum", "avg", "min", "max"],
                                },
                                "column": {
                                    "type": "string",
                                    "description": "Not needed for count.",
                                },
                                "as": {"type": "string", "description": "The result's name."},
                            },
                            "required": ["op"],
                        },
                    },
                    "sort": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {
                                "column": {"type": "string"},
                                "desc": {"type": "boolean"},
                            },
                            "required": ["column"],
                        },
                    },
                    "limit": {"type": "integer", "minimum": 1, "maximum": MAX_MODEL_ROWS},
                    "cursor": {"type": "string"},
                },
                "additionalProperties": False,
            },
            operation="table.query",
            bound=bound,
        ),
        KnowledgeTool(
            name="sql_query",
            description=(
                f"Run one read-only SQL SELECT{flavour} over these tables, named by their "
                'names (quote names that are not plain identifiers, e.g. "Sales 2024"). '
                f"At most {MAX_MODEL_ROWS} rows come back (truncated says if there were "
                f"more). Tables:\n{catalog}"
            ),
            parameters={
                "type": "object",
                "properties": {"sql": {"type": "string", "description": "One SELECT statement."}},
                "required": ["sql"],
                "additionalProperties": False,
            },
            operation="table.sql",
            bound=bound,
        ),
    ]
