"""Tables as an agent's knowledge (issue 19's contract, docs/tables.md): the operations the
runtime performs for a run's user (``table.describe``, ``table.query``, ``table.sql``), and
the tools an agent that lists tables gives its model (``agent_tools``).

Every operation checks, on every call, that the run's user may read the table now, and
refuses tables outside the agent's list (``table_ids``, bound by the runtime, never the
model's): a table the user cannot read, one the agent does not list and one that does not
exist get the same message. The model names a table by its name or id.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from dhub.access.principal import Principal
from dhub.domain.errors import InvalidInput, NotFound
from dhub.knowledge.errors import KnowledgeError
from dhub.knowledge.tables_sql import SqlTable
from dhub.knowledge.tools import KnowledgeTool
from dhub.services.resources import ResourceService
from dhub.services.tables import TableService, row_json
from dhub.store import table_rows
from dhub.store.db import Database

SAMPLE_ROWS = 5
MODEL_ROWS = 50  # rows a query gives the model unless it asks for another limit
MAX_MODEL_ROWS = 200
_MAX_DESCRIPTION = 6000
_NOT_QUERY = ("table", "table_ids", "run_id")  # the arguments that are not the query's


@dataclass(frozen=True, slots=True)
class TableInfo:
    """What the model is told of a table: the tables an agent lists, as its user sees them
    (``readable_tables``)."""

    id: str
    name: str
    description: str
    columns: list[dict[str, Any]]  # {name, type, description}


def _service(db: Database) -> TableService:
    return TableService(db, ResourceService(db))


def _bound(arguments: dict[str, Any]) -> list[str]:
    ids = arguments.get("table_ids")
    if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
        raise KnowledgeError("This agent lists no tables.")
    return ids


def _not_found(name: str, tables: Sequence[SqlTable]) -> KnowledgeError:
    known = ", ".join(f"'{t.name}'" for t in tables) or "none"
    return KnowledgeError(
        f"No table '{name}' among the tables you can read here ({known}): check the name."
    )


async def _pick(tables: TableService, principal: Principal, arguments: dict[str, Any]) -> str:
    """The id of the table the model named (``table``: a name or an id), among the agent's
    tables that the user may read now."""
    named = arguments.get("table")
    readable = await tables.readable(principal, _bound(arguments), hide_unreadable=True)
    if not isinstance(named, str) or not named:
        if len(readable) == 1:
            return readable[0].id
        raise KnowledgeError("Name the table: 'table' is its name or id.")
    by_id = [t for t in readable if t.id == named]
    found = by_id or [t for t in readable if t.name.lower() == named.lower()]
    if len(found) > 1:
        ids = ", ".join(t.id for t in found)
        raise KnowledgeError(f"Several tables are named '{named}': name one by id ({ids}).")
    if not found:
        raise _not_found(named, readable)
    return found[0].id


def _invalid(exc: InvalidInput) -> KnowledgeError:
    lines = [f"{e.loc or '/'}: {e.message}" if e.loc else e.message for e in exc.errors]
    return KnowledgeError("; ".join(lines) if lines else exc.detail)


async def describe(db: Database, principal: Principal, arguments: dict[str, Any]) -> Any:
    """``table.describe``: columns and types, the row count and a few rows."""
    tables = _service(db)
    table_id = await _pick(tables, principal, arguments)
    try:
        async with db.read(snapshot=True) as conn:
            found = await tables.load(conn, principal, table_id, "read")
            table = found.table()
            count = await table_rows.count(conn, table)
            sample = await table_rows.page(conn, table, None, SAMPLE_ROWS)
    except NotFound:  # lost access (or the table) since _pick
        raise KnowledgeError(f"No table '{arguments.get('table')}' that you can read.") from None
    spec = found.spec
    return {
        "id": found.id,
        "name": found.view.record.name,
        "description": spec.description,
        "columns": [
            {"name": c.name, "type": c.type, "nullable": c.nullable, "description": c.description}
            for c in spec.columns
        ],
        "row_count": count,
        "sample_rows": [row_json(spec.columns, row) for row in sample],
    }


async def query(db: Database, principal: Principal, arguments: dict[str, Any]) -> Any:
    """``table.query``: the structured query (knowledge/tables_query.py)."""
    tables = _service(db)
    table_id = await _pick(tables, principal, arguments)
    body = {k: v for k, v in arguments.items() if k not in _NOT_QUERY}
    body.setdefault("limit", MODEL_ROWS)
    if isinstance(body["limit"], int) and body["limit"] > MAX_MODEL_ROWS:
        body["limit"] = MAX_MODEL_ROWS
    try:
        return await tables.query(principal, table_id, body)
    except InvalidInput as exc:
        raise _invalid(exc) from None
    except NotFound:
        raise KnowledgeError(f"No table '{arguments.get('table')}' that you can read.") from None


async def sql(db: Database, principal: Principal, arguments: dict[str, Any]) -> Any:
    """``table.sql``: read-only SQL over the agent's tables that the user may read now."""
    tables = _service(db)
    try:
        return await tables.sql(
            principal,
            arguments.get("sql"),
            _bound(arguments),
            max_rows=MAX_MODEL_ROWS,
            hide_unreadable=True,
        )
    except InvalidInput as exc:
        raise _invalid(exc) from None


OPERATIONS: dict[str, Callable[[Database, Principal, dict[str, Any]], Awaitable[Any]]] = {
    "table.describe": describe,
    "table.query": query,
    "table.sql": sql,
}


async def readable_tables(
    db: Database, principal: Principal, table_ids: Sequence[str]
) -> list[TableInfo]:
    """The tables of ``table_ids`` that ``principal`` may read now (the others left out),
    for ``agent_tools``."""
    tables = _service(db)
    found = await tables.readable(principal, table_ids, hide_unreadable=True)
    infos = []
    async with db.read(snapshot=True) as conn:
        for item in found:
            try:
                loaded = await tables.load(conn, principal, item.id, "read")
            except NotFound:
                continue
            infos.append(
                TableInfo(
                    item.id,
                    item.name,
                    loaded.spec.description,
                    [
                        {"name": c.name, "type": c.type, "description": c.description}
                        for c in loaded.spec.columns
                    ],
                )
            )
    return infos


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


def agent_tools(items: Sequence[TableInfo], dialect: str | None = None) -> list[KnowledgeTool]:
    """The tools a model gets for the tables an agent lists (none without tables)."""
    if not items:
        return []
    catalog = _catalog(items)
    bound = {"table_ids": [item.id for item in items]}
    table_param = {"type": "string", "description": "The table's name (or id)."}
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
                "required": ["table"],
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
                "required": ["table"],
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
