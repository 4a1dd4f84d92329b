"""/api/v1 users, groups, markings, tokens, me and audit: thin routes over PrincipalService."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response

from dhub.api.deps import Ctx, json_body
from dhub.api.responses import ERROR_RESPONSES, JSON
from dhub.domain.bounds import INT32_MAX
from dhub.domain.errors import FieldError, InvalidInput

router = APIRouter(responses=ERROR_RESPONSES)

_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "content": {"application/json": {"schema": {"type": "object"}}},
    }
}


def _list(items: list[dict[str, Any]]) -> JSON:
    return JSON({"data": items})


# -- me and users ------------------------------------------------------------------------


@router.get("/me", tags=["users"])
async def me(ctx: Ctx) -> Response:
    """Who am I: the user, its groups (through nesting) and the markings it holds."""
    return JSON(await ctx.svc.principals.me(ctx.who))


@router.post("/users", status_code=201, tags=["users"], openapi_extra=_BODY)
async def create_user(request: Request, ctx: Ctx) -> Response:
    body = await json_body(request)
    return JSON(await ctx.svc.principals.create_user(ctx.who, body), status_code=201)


@router.get("/users", tags=["users"])
async def list_users(ctx: Ctx) -> Response:
    return _list(await ctx.svc.principals.list_users(ctx.who))


@router.get("/users/{user_id}", tags=["users"])
async def get_user(user_id: str, ctx: Ctx) -> Response:
    return JSON(await ctx.svc.principals.get_user(ctx.who, user_id))


@router.patch("/users/{user_id}", tags=["users"], openapi_extra=_BODY)
async def update_user(user_id: str, request: Request, ctx: Ctx) -> Response:
    body = await json_body(request)
    return JSON(await ctx.svc.principals.update_user(ctx.who, user_id, body))


@router.delete("/users/{user_id}", status_code=204, tags=["users"], response_class=Response)
async def delete_user(user_id: str, ctx: Ctx) -> Response:
    await ctx.svc.principals.delete_user(ctx.who, user_id)
    return Response(status_code=204)


@router.post("/users/{user_id}/tokens", status_code=201, tags=["tokens"], openapi_extra=_BODY)
async def issue_user_token(user_id: str, request: Request, ctx: Ctx) -> Response:
    """An admin issues a token for a user (e.g. the user's first one). Shown once."""
    body = await json_body(request)
    token = await ctx.svc.principals.create_token(ctx.who, body, user_id)
    return JSON(token, status_code=201)


# -- groups ------------------------------------------------------------------------------


@router.post("/groups", status_code=201, tags=["groups"], openapi_extra=_BODY)
async def create_group(request: Request, ctx: Ctx) -> Response:
    body = await json_body(request)
    return JSON(await ctx.svc.principals.create_group(ctx.who, body), status_code=201)


@router.get("/groups", tags=["groups"])
async def list_groups(ctx: Ctx) -> Response:
    return _list(await ctx.svc.principals.list_groups(ctx.who))


@router.get("/groups/{group_id}", tags=["groups"])
async def get_group(group_id: str, ctx: Ctx) -> Response:
    return JSON(await ctx.svc.principals.get_group(ctx.who, group_id))


@router.patch("/groups/{group_id}", tags=["groups"], openapi_extra=_BODY)
async def update_group(group_id: str, request: Request, ctx: Ctx) -> Response:
    body = await json_body(request)
    return JSON(await ctx.svc.principals.update_group(ctx.who, group_id, body))


@router.delete("/groups/{group_id}", status_code=204, tags=["groups"], response_class=Response)
async def delete_group(group_id: str, ctx: Ctx) -> Response:
    await ctx.svc.principals.delete_group(ctx.who, group_id)
    return Response(status_code=204)


@router.post("/groups/{group_id}/members", tags=["groups"], openapi_extra=_BODY)
async def add_group_member(group_id: str, request: Request, ctx: Ctx) -> Response:
    body = await json_body(request)
    return JSON(await ctx.svc.principals.add_member(ctx.who, group_id, body))


@router.delete(
    "/groups/{group_id}/members/{principal_id}",
    status_code=204,
    tags=["groups"],
    response_class=Response,
)
async def remove_group_member(group_id: str, principal_id: str, ctx: Ctx) -> Response:
    await ctx.svc.principals.remove_member(ctx.who, group_id, principal_id)
    return Response(status_code=204)


# -- markings ----------------------------------------------------------------------------


@router.post("/markings", status_code=201, tags=["markings"], openapi_extra=_BODY)
async def create_marking(request: Request, ctx: Ctx) -> Response:
    body = await json_body(request)
    return JSON(await ctx.svc.principals.create_marking(ctx.who, body), status_code=201)


@router.get("/markings", tags=["markings"])
async def list_markings(ctx: Ctx) -> Response:
    return _list(await ctx.svc.principals.list_markings(ctx.who))


@router.get("/markings/{marking_id}", tags=["markings"])
async def get_marking(marking_id: str, ctx: Ctx) -> Response:
    return JSON(await ctx.svc.principals.get_marking(ctx.who, marking_id))


@router.post("/markings/{marking_id}/members", tags=["markings"], openapi_extra=_BODY)
async def add_marking_member(marking_id: str, request: Request, ctx: Ctx) -> Response:
    body = await json_body(request)
    return JSON(await ctx.svc.principals.add_marking_member(ctx.who, marking_id, body))


@router.delete(
    "/markings/{marking_id}/members/{principal_id}",
    status_code=204,
    tags=["markings"],
    response_class=Response,
)
async def remove_marking_member(marking_id: str, principal_id: str, ctx: Ctx) -> Response:
    await ctx.svc.principals.remove_marking_member(ctx.who, marking_id, principal_id)
    return Response(status_code=204)


# -- tokens ------------------------------------------------------------------------------


@router.post("/tokens", status_code=201, tags=["tokens"], openapi_extra=_BODY)
async def create_token(request: Request, ctx: Ctx) -> Response:
    """A new token for the caller. The secret is in this response only."""
    body = await json_body(request)
    return JSON(await ctx.svc.principals.create_token(ctx.who, body), status_code=201)


@router.get("/tokens", tags=["tokens"])
async def list_tokens(ctx: Ctx, user_id: str | None = None) -> Response:
    """The caller's tokens (admins: any user's, with ``user_id``), never their secrets."""
    return _list(await ctx.svc.principals.list_tokens(ctx.who, user_id))


@router.delete("/tokens/{token_id}", status_code=204, tags=["tokens"], response_class=Response)
async def revoke_token(token_id: str, ctx: Ctx) -> Response:
    await ctx.svc.principals.revoke_token(ctx.who, token_id)
    return Response(status_code=204)


# -- audit -------------------------------------------------------------------------------


@router.get("/audit", tags=["audit"])
async def audit_log(
    ctx: Ctx,
    actor_id: str | None = None,
    target_id: str | None = None,
    action: str | None = None,
    limit: int = 50,
    cursor: str | None = None,
) -> Response:
    """Who did what, newest first (admins only)."""
    if not 1 <= limit <= 200:
        raise InvalidInput(
            [FieldError("/query/limit", "'limit' is a whole number from 1 to 200.", "out_of_range")]
        )
    # An audit id (a 32-bit column): anything else is not a cursor this API gave out.
    if cursor is not None and not (
        cursor.isascii() and cursor.isdigit() and len(cursor) <= 10 and int(cursor) <= INT32_MAX
    ):
        raise InvalidInput(
            [
                FieldError(
                    "/query/cursor", "Pass next_cursor of the previous page.", "invalid_cursor"
                )
            ]
        )
    filters = {"actor_id": actor_id, "target_id": target_id, "action": action}
    page = await ctx.svc.principals.audit_entries(
        ctx.who, filters, int(cursor) if cursor else None, limit
    )
    return JSON(page)
