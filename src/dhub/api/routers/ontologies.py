"""An ontology's objects and links (/api/v1/ontologies/{id}/objects, /links, /import,
/import-table); the ontology itself has the endpoints every resource has
(routers/resources.py). Thin: the service checks access (read to look, edit to change)
before anything else."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response
from pydantic import BaseModel

from dhub.api.deps import Ctx, json_body
from dhub.api.query import PAGE_PARAMETERS, parse_page
from dhub.api.responses import ERROR_RESPONSES, JSON, ErrorBody
from dhub.domain.bounds import MAX_BODY_BYTES
from dhub.domain.errors import FieldError, InvalidInput, TooLarge
from dhub.knowledge.ontology_values import parse_filter_param
from dhub.services.ontology_import import import_items, items_of, lines_of
from dhub.services.ontology_table_import import import_table

router = APIRouter(
    prefix="/ontologies/{resource_id}",
    tags=["ontologies"],
    responses={
        **ERROR_RESPONSES,
        403: {"model": ErrorBody, "description": "Visible, but the caller lacks the scope needed"},
    },
)


class OntologyObject(BaseModel):
    type: str
    key: str
    title: str
    properties: dict[str, Any]
    created_by: str
    created_at: int
    updated_at: int


class ObjectPage(BaseModel):
    data: list[OntologyObject]
    next_cursor: str | None


class ImportResult(BaseModel):
    objects: dict[str, int]
    links: dict[str, int]


def _json_body(schema: dict[str, Any]) -> dict[str, Any]:
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": schema}}}}


_OBJECT_BODY = _json_body(
    {
        "type": "object",
        "properties": {"type": {"type": "string"}, "properties": {"type": "object"}},
        "required": ["type", "properties"],
    }
)
_PATCH_BODY = _json_body(
    {
        "type": "object",
        "properties": {"properties": {"type": "object", "description": "Merged; null removes."}},
    }
)
_FILTER = {
    "type": "object",
    "properties": {
        "property": {"type": "string"},
        "op": {"type": "string", "enum": ["eq", "ne", "lt", "lte", "gt", "gte", "in", "contains"]},
        "value": {},
    },
    "required": ["property", "value"],
}
_SEARCH_BODY = _json_body(
    {
        "type": "object",
        "properties": {
            "type": {"type": "string"},
            "filters": {"type": "array", "items": _FILTER},
            "q": {"type": "string", "description": "Words that must all appear in the text."},
            "limit": {"type": "integer", "minimum": 1, "maximum": 200},
            "cursor": {"type": "string"},
        },
    }
)
_LINK_BODY = _json_body(
    {
        "type": "object",
        "properties": {
            "link_type": {"type": "string"},
            "from": {"type": "string"},
            "to": {"type": "string"},
        },
        "required": ["link_type", "from", "to"],
    }
)
_IMPORT_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {
                "schema": {
                    "type": "object",
                    "properties": {
                        "objects": {"type": "array", "items": {"type": "object"}},
                        "links": {"type": "array", "items": {"type": "object"}},
                    },
                }
            },
            "application/jsonl": {"schema": {"type": "string"}},
        },
    }
}
_IMPORT_TABLE_BODY = _json_body(
    {
        "type": "object",
        "properties": {
            "table": {"type": "string", "description": "The id of a table you can read."},
            "objects": {
                "type": "object",
                "description": "One object of the type per row. Properties left out of the "
                "mapping take the column of the same name; null leaves one out.",
                "properties": {
                    "type": {"type": "string"},
                    "properties": {
                        "type": "object",
                        "additionalProperties": {"type": ["string", "null"]},
                    },
                },
                "required": ["type"],
            },
            "links": {
                "type": "object",
                "description": "One link per row, between the keys in two columns.",
                "properties": {
                    "link_type": {"type": "string"},
                    "from": {"type": "string", "description": "A column's name."},
                    "to": {"type": "string", "description": "A column's name."},
                },
                "required": ["link_type", "from", "to"],
            },
        },
        "required": ["table"],
    }
)
_LIST_PARAMETERS = [
    {
        "name": "type",
        "in": "query",
        "required": False,
        "schema": {"type": "string"},
        "description": "Only objects of this type (needed for filters).",
    },
    {
        "name": "q",
        "in": "query",
        "required": False,
        "schema": {"type": "string"},
        "description": "Words that must all appear in the title, key or a string value.",
    },
    {
        "name": "filter",
        "in": "query",
        "required": False,
        "schema": {"type": "array", "items": {"type": "string"}},
        "description": "property:op:value (op: eq, ne, lt, lte, gt, gte, in, contains; 'in' "
        "takes values separated by ','), repeated for more.",
    },
    *PAGE_PARAMETERS,
]
_FOLLOW_PARAMETERS = [
    {
        "name": "reverse",
        "in": "query",
        "required": False,
        "schema": {"type": "boolean"},
        "description": "Follow the link type from its 'to' end (as its inverse name does).",
    },
    *PAGE_PARAMETERS,
]


@router.get(
    "/objects",
    response_model=ObjectPage,
    name="list_ontology_objects",
    summary="Search an ontology's objects (type, filters, text), a page at a time",
    openapi_extra={"parameters": _LIST_PARAMETERS},
)
async def list_objects(resource_id: str, request: Request, ctx: Ctx) -> Response:
    params = request.query_params
    limit, cursor = parse_page(params)
    query: dict[str, Any] = {"limit": limit, "cursor": cursor, "q": params.get("q")}
    if params.get("type") is not None:
        query["type"] = params["type"]
    filters = [parse_filter_param(f) for f in params.getlist("filter")]
    if filters:
        query["filters"] = filters
    query = {k: v for k, v in query.items() if v is not None}
    return JSON(await ctx.svc.ontologies.search(ctx.who, resource_id, query, from_text=True))


@router.post(
    "/objects/search",
    response_model=ObjectPage,
    openapi_extra=_SEARCH_BODY,
    name="search_ontology_objects",
    summary="Search an ontology's objects with typed filters",
)
async def search_objects(resource_id: str, request: Request, ctx: Ctx) -> Response:
    body = await json_body(request)
    return JSON(await ctx.svc.ontologies.search(ctx.who, resource_id, body))


@router.post(
    "/objects",
    status_code=201,
    response_model=OntologyObject,
    openapi_extra=_OBJECT_BODY,
    name="create_ontology_object",
    responses={409: {"description": "An object of the type has that key"}},
    summary="Create an object",
)
async def create_object(resource_id: str, request: Request, ctx: Ctx) -> Response:
    body = await json_body(request)
    made = await ctx.svc.ontologies.create_object(ctx.who, resource_id, body)
    return JSON(made, status_code=201)


@router.get(
    "/objects/{type}/{key}",
    response_model=OntologyObject,
    name="get_ontology_object",
    summary="Get an object by its type and key",
)
async def get_object(resource_id: str, type: str, key: str, ctx: Ctx) -> Response:
    return JSON(await ctx.svc.ontologies.get_object(ctx.who, resource_id, type, key))


@router.patch(
    "/objects/{type}/{key}",
    response_model=OntologyObject,
    openapi_extra=_PATCH_BODY,
    name="update_ontology_object",
    summary="Change an object's properties (merge; null removes)",
)
async def update_object(
    resource_id: str, type: str, key: str, request: Request, ctx: Ctx
) -> Response:
    body = await json_body(request)
    return JSON(await ctx.svc.ontologies.update_object(ctx.who, resource_id, type, key, body))


@router.delete(
    "/objects/{type}/{key}",
    status_code=204,
    response_class=Response,
    name="delete_ontology_object",
    summary="Delete an object and its links",
)
async def delete_object(resource_id: str, type: str, key: str, ctx: Ctx) -> Response:
    await ctx.svc.ontologies.delete_object(ctx.who, resource_id, type, key)
    return Response(status_code=204)


@router.get(
    "/objects/{type}/{key}/links/{link_type}",
    response_model=ObjectPage,
    name="follow_ontology_links",
    openapi_extra={"parameters": _FOLLOW_PARAMETERS},
    summary="The objects an object is linked to by a link type (or its inverse)",
)
async def follow(
    resource_id: str, type: str, key: str, link_type: str, request: Request, ctx: Ctx
) -> Response:
    limit, cursor = parse_page(request.query_params)
    reverse = request.query_params.get("reverse", "false")
    if reverse not in ("true", "false"):
        raise InvalidInput([FieldError("/query/reverse", "'reverse' is true or false.", "type")])
    found = await ctx.svc.ontologies.follow(
        ctx.who,
        resource_id,
        type,
        key,
        link_type,
        reverse=reverse == "true",
        limit=limit,
        cursor=cursor,
    )
    return JSON(found)


@router.post(
    "/links",
    status_code=201,
    openapi_extra=_LINK_BODY,
    name="create_ontology_link",
    responses={
        200: {"description": "The link was there already"},
        409: {"description": "The link type's cardinality forbids it"},
    },
    summary="Link two objects",
)
async def create_link(resource_id: str, request: Request, ctx: Ctx) -> Response:
    body = await json_body(request)
    made, created = await ctx.svc.ontologies.link(ctx.who, resource_id, body)
    return JSON(made, status_code=201 if created else 200)


@router.delete(
    "/links/{link_type}/{from_key}/{to_key}",
    status_code=204,
    response_class=Response,
    name="delete_ontology_link",
    summary="Remove a link",
)
async def delete_link(
    resource_id: str, link_type: str, from_key: str, to_key: str, ctx: Ctx
) -> Response:
    await ctx.svc.ontologies.unlink(ctx.who, resource_id, link_type, from_key, to_key)
    return Response(status_code=204)


_JSONL = ("application/jsonl", "application/x-ndjson", "application/x-jsonlines")


@router.post(
    "/import",
    response_model=ImportResult,
    openapi_extra=_IMPORT_BODY,
    name="import_ontology_data",
    summary="Import objects and links (JSON or JSON Lines), all or nothing",
)
async def import_data(resource_id: str, request: Request, ctx: Ctx) -> Response:
    media = (request.headers.get("content-type") or "").split(";")[0].strip().lower()
    if media in _JSONL:
        items = lines_of(await _raw_body(request))
    else:
        items = items_of(await json_body(request))
    return JSON(await import_items(ctx.svc.db, ctx.who, resource_id, items))


@router.post(
    "/import-table",
    response_model=ImportResult,
    openapi_extra=_IMPORT_TABLE_BODY,
    name="import_ontology_data_from_table",
    summary="Import objects and links from the rows of a table, all or nothing",
)
async def import_from_table(resource_id: str, request: Request, ctx: Ctx) -> Response:
    body = await json_body(request)
    return JSON(await import_table(ctx.svc.tables, ctx.who, resource_id, body))


async def _raw_body(request: Request) -> bytes:
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise TooLarge(
                f"The request body is over {MAX_BODY_BYTES // (1024 * 1024)} MiB: import in parts."
            )
        chunks.append(chunk)
    return b"".join(chunks)
