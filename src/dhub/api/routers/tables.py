"""A table's data (docs/tables.md): rows, imports, queries and read-only SQL. The table
resource itself (its columns, sharing, versions) has the endpoints every kind has
(routers/resources.py)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Request, Response

from dhub.api.deps import Ctx, json_body
from dhub.api.query import PAGE_PARAMETERS, parse_page
from dhub.api.responses import ERROR_RESPONSES, JSON
from dhub.services.tables import row_ids_of

router = APIRouter(prefix="/tables", tags=["tables"], responses=ERROR_RESPONSES)
RowId = Annotated[int, Path(ge=1, le=2**63 - 1)]


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
