"""Query parameters of GET /api/v1/agents (and of the prompt, tool, actor and role lists),
parsed by hand.

FastAPI's per-parameter machinery cost more than the database work of a list page
(bench/api_latency.py), so the route reads ``request.query_params`` itself and declares the
parameters in the OpenAPI document with ``LIST_PARAMETERS``. Errors have the same shape as
every other validation error, with ``/query/<name>`` locations.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from starlette.datastructures import QueryParams

from dhub.domain.errors import FieldError, InvalidInput
from dhub.services.types import AgentFilter, ResourceFilter

MAX_PAGE = 200
MAX_TAGS = 20  # each tag is one more condition of the query
DEFAULT_PAGE = 50
_ENUMS = {"mode": ("react", "workflow"), "input_mode": ("chat", "event")}
_TEXT = ("q", "name", "collection_id", "folder_id", "type", "cursor")


@dataclass(frozen=True, slots=True)
class ListQuery:
    filter: AgentFilter
    limit: int
    cursor: str | None


def _param(name: str, schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"name": name, "in": "query", "required": False, "schema": schema,
            "description": description}  # fmt: skip


LIST_PARAMETERS = [
    _param("q", {"type": "string"}, "Substring of name, alias or description (any case)"),
    _param("name", {"type": "string"}, "Exactly this name"),
    _param(
        "tags",
        {"type": "array", "items": {"type": "string"}},
        "Agents having all of these tags (repeat the parameter, or separate with commas)",
    ),
    _param("collection_id", {"type": "string"}, "Only agents in this collection"),
    _param("folder_id", {"type": "string"}, "Only agents in this folder"),
    _param("mode", {"type": "string", "enum": list(_ENUMS["mode"])}, "react or workflow"),
    _param("input_mode", {"type": "string", "enum": list(_ENUMS["input_mode"])}, "chat or event"),
    _param("type", {"type": "string"}, "Only agents of this subtype"),
    _param(
        "is_builtin",
        {"type": "boolean"},
        "true: only the built-in agents (shipped with dhub); false: only the others",
    ),
    _param(
        "limit",
        {"type": "integer", "minimum": 1, "maximum": MAX_PAGE, "default": DEFAULT_PAGE},
        "Page size",
    ),
    _param("cursor", {"type": "string"}, "next_cursor of the previous page"),
]
_BOOLEANS = {"true": True, "false": False}


def parse_list_query(params: QueryParams) -> ListQuery:
    errors: list[FieldError] = []
    text = {name: params.get(name) for name in _TEXT}
    enums: dict[str, str | None] = {}
    for name, allowed in _ENUMS.items():
        value = params.get(name)
        if value is not None and value not in allowed:
            errors.append(
                FieldError(
                    f"/query/{name}",
                    f"'{name}' is one of {', '.join(allowed)}; got {value!r}.",
                    "literal_error",
                )
            )
        enums[name] = value
    limit = _limit(params.get("limit"), errors)
    tags = _tags(params, errors)
    builtin = params.get("is_builtin")
    if builtin is not None and builtin not in _BOOLEANS:
        errors.append(
            FieldError(
                "/query/is_builtin",
                f"'is_builtin' is true or false; got {builtin!r}.",
                "bool_parsing",
            )
        )
    if errors:
        raise InvalidInput(errors)
    flt = AgentFilter(
        q=text["q"] or None,
        name=text["name"],
        tags=tags,
        collection_id=text["collection_id"],
        folder_id=text["folder_id"],
        mode=enums["mode"],
        input_mode=enums["input_mode"],
        type=text["type"],
        is_builtin=None if builtin is None else _BOOLEANS[builtin],
    )
    return ListQuery(flt, limit, text["cursor"] or None)


def _limit(raw: str | None, errors: list[FieldError]) -> int:
    if raw is None:
        return DEFAULT_PAGE
    try:
        limit = int(raw)
    except ValueError:
        limit = 0
    if not 1 <= limit <= MAX_PAGE:
        errors.append(
            FieldError(
                "/query/limit",
                f"'limit' is a whole number from 1 to {MAX_PAGE}; got {raw!r}.",
                "out_of_range",
            )
        )
    return limit


def _tags(params: QueryParams, errors: list[FieldError]) -> tuple[str, ...]:
    tags = tuple(t for raw in params.getlist("tags") for t in raw.split(",") if t)
    if len(tags) > MAX_TAGS:
        errors.append(
            FieldError(
                "/query/tags",
                f"{len(tags)} tags were given; filter by at most {MAX_TAGS}.",
                "too_many",
            )
        )
    return tags


# -- prompts, tools, actors, roles --------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ResourceQuery:
    filter: ResourceFilter
    limit: int
    cursor: str | None


_RESOURCE_TEXT = ("q", "name", "collection_id", "folder_id", "type", "cursor")

RESOURCE_LIST_PARAMETERS = [
    _param("q", {"type": "string"}, "Substring of name, alias or description (any case)"),
    _param("name", {"type": "string"}, "Exactly this name"),
    _param(
        "tags",
        {"type": "array", "items": {"type": "string"}},
        "Resources having all of these tags (repeat the parameter, or separate with commas)",
    ),
    _param("collection_id", {"type": "string"}, "Only resources in this collection"),
    _param("folder_id", {"type": "string"}, "Only resources in this folder"),
    _param("type", {"type": "string"}, "Only resources of this subtype"),
    _param(
        "limit",
        {"type": "integer", "minimum": 1, "maximum": MAX_PAGE, "default": DEFAULT_PAGE},
        "Page size",
    ),
    _param("cursor", {"type": "string"}, "next_cursor of the previous page"),
]


def parse_resource_query(params: QueryParams) -> ResourceQuery:
    """The list query of /prompts, /tools, /actors and /roles: the agents' parameters that
    apply to every resource, plus ``name``."""
    errors: list[FieldError] = []
    text = {name: params.get(name) for name in _RESOURCE_TEXT}
    limit = _limit(params.get("limit"), errors)
    tags = _tags(params, errors)
    if errors:
        raise InvalidInput(errors)
    flt = ResourceFilter(
        q=text["q"] or None,
        name=text["name"],
        tags=tags,
        collection_id=text["collection_id"],
        folder_id=text["folder_id"],
        type=text["type"],
    )
    return ResourceQuery(flt, limit, text["cursor"] or None)


PAGE_PARAMETERS = [p for p in RESOURCE_LIST_PARAMETERS if p["name"] in ("limit", "cursor")]


def parse_page(params: QueryParams) -> tuple[int, str | None]:
    """``limit`` and ``cursor`` of a listing that takes nothing else."""
    errors: list[FieldError] = []
    limit = _limit(params.get("limit"), errors)
    if errors:
        raise InvalidInput(errors)
    return limit, params.get("cursor") or None


IDS_PARAMETERS = [
    _param(
        "id",
        {"type": "array", "items": {"type": "string"}, "maxItems": MAX_PAGE},
        "Ids (repeat the parameter, or separate with commas)",
    )
]


def parse_ids(params: QueryParams) -> list[str]:
    """``id``, repeated or comma-separated: at most a page's worth."""
    ids = [i for raw in params.getlist("id") for i in raw.split(",") if i]
    if len(ids) > MAX_PAGE:
        message = f"{len(ids)} ids were given; ask for at most {MAX_PAGE} at a time."
        raise InvalidInput([FieldError("/query/id", message, "too_many")])
    return ids
