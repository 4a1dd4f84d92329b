"""A table's data (docs/tables.md): rows, imports, queries and read-only SQL. The table
resource itself (its columns, sharing, versions) has the endpoints every kind has
(routers/resources.py)."""

from __future__ import annotations

import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, Request, Response
from fastapi import Path as PathParam

from dhub.api.deps import Ctx, json_body
from dhub.api.query import PAGE_PARAMETERS, parse_page
from dhub.api.render import resource_json
from dhub.api.responses import ERROR_RESPONSES, JSON
from dhub.domain.errors import FieldError, InvalidInput, TooLarge
from dhub.knowledge.tables_import import FORMATS, Format, Source
from dhub.services.tables import DEFAULT_SQL_ROWS, MAX_SQL_ROWS, row_ids_of

router = APIRouter(prefix="/tables", tags=["tables"], responses=ERROR_RESPONSES)
RowId = Annotated[int, PathParam(ge=1, le=2**63 - 1)]


def _body(schema: dict[str, Any]) -> dict[str, Any]:
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": schema}}}}


_ROWS_BODY = _body(
    {
        "type": "object",
        "properties": {"rows": {"type": "array", "items": {"type": "object"}}},
        "required": ["rows"],
    }
)
_ROW_IDS_BODY = _body(
    {
        "type": "object",
        "properties": {"row_ids": {"type": "array", "items": {"type": "integer"}}},
        "required": ["row_ids"],
    }
)


@router.get(
    "/{table_id}/rows",
    openapi_extra={"parameters": PAGE_PARAMETERS},
    name="list_table_rows",
    summary="A table's rows, by row id, one page at a time",
)
async def rows(table_id: str, request: Request, ctx: Ctx) -> Response:
    limit, cursor = parse_page(request.query_params)
    return JSON(await ctx.svc.tables.rows(ctx.who, table_id, limit, cursor))


@router.post(
    "/{table_id}/rows",
    status_code=201,
    openapi_extra=_ROWS_BODY,
    name="append_table_rows",
    summary="Append rows (values checked against the column types)",
)
async def append(table_id: str, request: Request, ctx: Ctx) -> Response:
    body = await json_body(request)
    return JSON(await ctx.svc.tables.append(ctx.who, table_id, body), status_code=201)


@router.patch(
    "/{table_id}/rows/{row_id}",
    openapi_extra=_body({"type": "object"}),
    name="update_table_row",
    summary="Change some columns of one row",
)
async def update_row(table_id: str, row_id: RowId, request: Request, ctx: Ctx) -> Response:
    body = await json_body(request)
    return JSON(await ctx.svc.tables.update_row(ctx.who, table_id, row_id, body))


@router.delete(
    "/{table_id}/rows/{row_id}",
    status_code=204,
    response_class=Response,
    name="delete_table_row",
    summary="Delete one row",
)
async def delete_row(table_id: str, row_id: RowId, ctx: Ctx) -> Response:
    await ctx.svc.tables.delete_rows(ctx.who, table_id, [row_id])
    return Response(status_code=204)


@router.post(
    "/{table_id}/rows/delete",
    openapi_extra=_ROW_IDS_BODY,
    name="delete_table_rows",
    summary="Delete rows by id; how many were deleted",
)
async def delete_rows(table_id: str, request: Request, ctx: Ctx) -> Response:
    ids = row_ids_of(await json_body(request))
    return JSON({"deleted": await ctx.svc.tables.delete_rows(ctx.who, table_id, ids)})


@router.post(
    "/{table_id}/query",
    openapi_extra=_body({"type": "object"}),
    name="query_table",
    summary="Filter, select, group and aggregate, sort and page a table's rows",
)
async def query(table_id: str, request: Request, ctx: Ctx) -> Response:
    body = await json_body(request)
    return JSON(await ctx.svc.tables.query(ctx.who, table_id, body))


_SQL_BODY = _body(
    {
        "type": "object",
        "properties": {
            "sql": {"type": "string", "description": "One SELECT (UNION and WITH are fine)."},
            "tables": {
                "type": "array",
                "items": {"type": "string"},
                "description": "The ids of the tables it may read (by their names).",
            },
            "limit": {"type": "integer", "minimum": 1, "maximum": MAX_SQL_ROWS},
        },
        "required": ["sql", "tables"],
    }
)


@router.post(
    "/sql",
    openapi_extra=_SQL_BODY,
    name="table_sql",
    summary="Read-only SQL over the tables named in the body (checked, row and time limits)",
)
async def sql(request: Request, ctx: Ctx) -> Response:
    body = await json_body(request)
    if not isinstance(body, dict):
        raise InvalidInput([FieldError("", 'Send {"sql": ..., "tables": [ids]}.', "type")])
    tables = body.get("tables")
    limit = body.get("limit", DEFAULT_SQL_ROWS)
    errors = []
    if (
        not isinstance(tables, list)
        or not tables
        or len(tables) > 50
        or not all(isinstance(t, str) for t in tables)
    ):
        message = 'List the ids of the tables the query reads (1 to 50): tables: ["table.…"].'
        errors.append(FieldError("/tables", message, "type"))
    if type(limit) is not int or not 1 <= limit <= MAX_SQL_ROWS:
        errors.append(FieldError("/limit", f"Give an integer from 1 to {MAX_SQL_ROWS}.", "range"))
    if errors:
        raise InvalidInput(errors)
    assert isinstance(tables, list)
    return JSON(await ctx.svc.tables.sql(ctx.who, body.get("sql"), tables, limit))


# -- imports ------------------------------------------------------------------------------------

MAX_IMPORT_BYTES = 512 * 1024 * 1024
_CONTENT_TYPES: dict[str, Format] = {
    "text/csv": "csv",
    "application/csv": "csv",
    "application/x-ndjson": "jsonl",
    "application/jsonl": "jsonl",
    "application/x-jsonlines": "jsonl",
    "application/vnd.apache.parquet": "parquet",
    "application/x-parquet": "parquet",
}
_FILE_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "description": "The file itself (not a multipart form).",
        "content": {
            "text/csv": {"schema": {"type": "string"}},
            "application/x-ndjson": {"schema": {"type": "string"}},
            "application/vnd.apache.parquet": {"schema": {"type": "string", "format": "binary"}},
        },
    }
}
_FORMAT_PARAMETER = {
    "name": "format",
    "in": "query",
    "required": False,
    "schema": {"type": "string", "enum": list(FORMATS)},
    "description": "csv, jsonl or parquet; without it, the Content-Type says.",
}


def _format(request: Request) -> Format:
    named = request.query_params.get("format")
    content_type = (request.headers.get("content-type") or "").split(";")[0].strip().lower()
    found = named if named is not None else _CONTENT_TYPES.get(content_type)
    if found not in FORMATS:
        message = (
            "Say what the file is: ?format=csv, jsonl or parquet (or a Content-Type of "
            "text/csv, application/x-ndjson or application/vnd.apache.parquet)."
        )
        raise InvalidInput([FieldError("/query/format", message, "format")])
    return found


@asynccontextmanager
async def _spooled(request: Request, file_format: Format) -> AsyncIterator[Source]:
    """The request body in a temporary file (deleted afterwards), refused past the limit
    while it streams in."""
    handle = tempfile.NamedTemporaryFile(prefix="dhub-import-", delete=False)  # noqa: SIM115
    path = Path(handle.name)
    try:
        size = 0
        with handle:
            async for chunk in request.stream():
                size += len(chunk)
                if size > MAX_IMPORT_BYTES:
                    raise TooLarge(
                        f"The file is over {MAX_IMPORT_BYTES // (1024 * 1024)} MiB: split it and "
                        "import the parts into the table one after another "
                        "(POST /api/v1/tables/{id}/import)."
                    )
                handle.write(chunk)
        yield Source(path, file_format)
    finally:
        path.unlink(missing_ok=True)  # noqa: ASYNC240 (one unlink of a local file)


@router.post(
    "/import",
    status_code=201,
    openapi_extra={
        **_FILE_BODY,
        "parameters": [
            {"name": "name", "in": "query", "required": True, "schema": {"type": "string"}},
            _FORMAT_PARAMETER,
            *(
                {"name": n, "in": "query", "required": False, "schema": {"type": "string"}}
                for n in ("description", "folder_id", "collection_id", "alias")
            ),
        ],
    },
    name="import_table",
    summary="Create a table from a CSV, JSON Lines or Parquet file (column types inferred)",
)
async def import_new(request: Request, ctx: Ctx) -> Response:
    params = request.query_params
    doc: dict[str, Any] = {"name": params.get("name"), "description": params.get("description", "")}
    for name in ("folder_id", "collection_id", "alias"):
        if params.get(name):
            doc[name] = params[name]
    if not doc["name"]:
        message = "Name the new table: ?name=sales"
        raise InvalidInput([FieldError("/query/name", message, "required")])
    async with _spooled(request, _format(request)) as source:
        view, count = await ctx.svc.tables.imports.create(ctx.who, source, doc)
    body = b'{"table":' + resource_json(view) + b',"inserted":' + str(count).encode() + b"}"
    location = f"/api/v1/tables/{view.record.id}"
    return Response(body, 201, headers={"Location": location}, media_type="application/json")


@router.post(
    "/{table_id}/import",
    openapi_extra={**_FILE_BODY, "parameters": [_FORMAT_PARAMETER]},
    name="import_table_rows",
    summary="Append a file's rows to a table (columns matched by name)",
)
async def import_into(table_id: str, request: Request, ctx: Ctx) -> Response:
    async with _spooled(request, _format(request)) as source:
        count = await ctx.svc.tables.imports.append(ctx.who, table_id, source)
    return JSON({"inserted": count})
