"""Tables as an agent's knowledge (issue 19, docs/tables.md): the operations the runtime
performs for a run's user (``table.describe``, ``table.query``, ``table.sql``); the tools
that call them are knowledge/tables_tools.py's.

Every operation checks, on every call, that the run's user may read the table now, and
refuses tables outside the agent's list (``table_ids``, bound by the runtime, never the
model's): a table the user cannot read, one the agent does not list and one that does not
exist get the same message. The model names a table by its name or id.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dhub.access.principal import Principal
from dhub.domain.errors import InvalidInput, NotFound
from dhub.knowledge.errors import KnowledgeError
from dhub.knowledge.tables_schema import SqlTable
from dhub.knowledge.tables_tools import MAX_MODEL_ROWS
from dhub.knowledge.tools import Operation
from dhub.services.resources import ResourceService
from dhub.services.tables import TableService, row_json
from dhub.store import table_rows
from dhub.store.db import Database

SAMPLE_ROWS = 5
MODEL_ROWS = 50  # rows a query gives the model unless it asks for another limit
_NOT_QUERY = ("table", "table_ids", "run_id")  # the arguments that are not the query's


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


OPERATIONS: dict[str, Operation] = {
    "table.describe": describe,
    "table.query": query,
    "table.sql": sql,
}
