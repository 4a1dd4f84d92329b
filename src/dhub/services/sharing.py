"""Sharing an agent (or a prompt, tool, actor or role): its owners, grants and markings.
Functions here run inside the caller's transaction, after the service has asked the access
policy; they check the input against the principals that exist and write the audit log with
the change. ``kind`` (the resource's category) names the audit actions (``agent.grant``,
``prompt.grant``, ...) and the resource in messages."""

from __future__ import annotations

from typing import Any

import orjson
from sqlalchemy.exc import IntegrityError

from dhub.access import policy
from dhub.access.principal import PUBLIC, Principal
from dhub.domain.errors import Conflict, FieldError, Forbidden, InvalidInput, NotFound
from dhub.domain.pointers import join
from dhub.store import agents as repo
from dhub.store import audit
from dhub.store import sharing as shares
from dhub.store.db import Conn
from dhub.store.principals import get_marking, principal_exists
from dhub.store.resources import ResourceRow

SCOPES = tuple(repo.SCOPE_RANK)  # viewer, runner, editor


def name_conflict(
    kind: str,
    name: str,
    folder_id: str | None,
    holder: repo.AgentRow | ResourceRow | None,
    principal: Principal,
) -> Conflict:
    """409 for a name already used in the folder. The holder is named only to a caller who
    may read it: for anyone else it does not exist, so neither does its id (DESIGN.md 2)."""
    where = f"folder '{folder_id}'" if folder_id else "the top level (no folder)"
    if holder is not None and _readable(principal, holder):
        return Conflict(
            f"The name '{name}' is already used in {where} by {kind} '{holder.record.id}': "
            f"choose another name or update that {kind}."
        )
    return Conflict(f"The name '{name}' is already taken in {where}: choose another name.")


def _readable(principal: Principal, row: repo.AgentRow | ResourceRow) -> bool:
    owners = [o["id"] for o in row.owners]
    markings = orjson.loads(row.record.markings)
    builtin = row.record.is_builtin
    found = policy.access(principal, owners, row.grant, markings, row.above, builtin=builtin)
    return found is not None


def _unknown(loc: str, principal_id: str) -> FieldError:
    return FieldError(
        loc,
        f"No principal '{principal_id}': use the id of an existing user ('user.<name>'), "
        f"group ('group.<name>') or '{PUBLIC}'.",
        "unknown_principal",
    )


async def parse_owners(conn: Conn, value: Any) -> tuple[list[str], list[FieldError]]:
    """The owner ids of a PATCH body's ``owners`` (sorted, without duplicates), and every
    problem with it."""
    if not isinstance(value, list):
        message = '\'owners\' must be a list of principal ids, e.g. ["user.alice", "group.ops"].'
        return [], [FieldError("/owners", message, "type")]
    if not value:
        message = "At least one owner must remain: list the principals who should own it."
        return [], [FieldError("/owners", message, "last_owner")]
    errors = []
    for i, item in enumerate(value):
        loc = join("owners", i)
        if not isinstance(item, str):
            message = (
                "An owner is a principal id string ('user.<name>', 'group.<name>', 'public.all')."
            )
            errors.append(FieldError(loc, message, "type"))
        elif not await principal_exists(conn, item):
            errors.append(_unknown(loc, item))
    return sorted({o for o in value if isinstance(o, str)}), errors


async def change_owners(
    conn: Conn,
    actor: Principal,
    agent_id: str,
    before: list[str],
    after: list[str],
    kind: str = "agent",
) -> None:
    await shares.replace_owners(conn, agent_id, after)
    await audit.record(conn, actor.user_id, f"{kind}.owners", agent_id, sorted(before), after)


def _body(body: Any, fields: dict[str, str]) -> tuple[dict[str, str], list[FieldError]]:
    """The string ``fields`` of a JSON object body; ``fields`` maps each name to an example."""
    if not isinstance(body, dict):
        return {}, [FieldError("", "The request body must be a JSON object.", "type")]
    values, errors = {}, []
    for name, example in fields.items():
        value = body.get(name)
        if isinstance(value, str) and value:
            values[name] = value
        else:
            what = "is missing" if name not in body else "must be a non-empty string"
            errors.append(FieldError(join(name), f"'{name}' {what}, e.g. '{example}'.", "type"))
    errors.extend(
        FieldError(join(key), f"Unknown field '{key}'.", "extra_forbidden")
        for key in body
        if key not in fields
    )
    return values, errors


async def add_grant(
    conn: Conn, actor: Principal, agent_id: str, body: Any, kind: str = "agent"
) -> tuple[dict[str, Any], bool]:
    """Grant ``body['scope']`` to ``body['principal_id']``, replacing the scope it had; returns
    the grant and whether it is new."""
    values, errors = _body(body, {"principal_id": "user.alice", "scope": "viewer"})
    scope, principal_id = values.get("scope"), values.get("principal_id")
    if scope is not None and scope not in SCOPES:
        message = f"'scope' must be one of {', '.join(SCOPES)} (owners are set through PATCH)."
        errors.append(FieldError("/scope", message, "enum"))
    if principal_id is not None and not await principal_exists(conn, principal_id):
        errors.append(_unknown("/principal_id", principal_id))
    if errors or scope is None or principal_id is None:
        raise InvalidInput(errors)
    before = await shares.get_grant(conn, agent_id, principal_id)
    if before != scope:
        try:
            await shares.set_grant(conn, agent_id, principal_id, scope)
        except IntegrityError as exc:  # PostgreSQL: a concurrent grant to the same principal
            raise Conflict(
                f"'{principal_id}' was granted a scope on '{agent_id}' at the same time: retry."
            ) from exc
        await audit.record(
            conn,
            actor.user_id,
            f"{kind}.grant",
            agent_id,
            {"principal_id": principal_id, "scope": before} if before else None,
            {"principal_id": principal_id, "scope": scope},
        )
    grants = await shares.list_grants(conn, agent_id)
    grant = next(g for g in grants if g.principal_id == principal_id)
    return grant_json(grant), before is None


async def remove_grant(
    conn: Conn, actor: Principal, agent_id: str, principal_id: str, kind: str = "agent"
) -> None:
    before = await shares.get_grant(conn, agent_id, principal_id)
    if before is None:
        raise NotFound(f"{kind.capitalize()} '{agent_id}' has no grant to '{principal_id}'.")
    await shares.delete_grant(conn, agent_id, principal_id)
    await audit.record(
        conn,
        actor.user_id,
        f"{kind}.ungrant",
        agent_id,
        {"principal_id": principal_id, "scope": before},
        None,
    )


def grant_json(grant: shares.GrantRecord) -> dict[str, Any]:
    return {
        "principal_id": grant.principal_id,
        "type": repo.principal_type(grant.principal_id),
        "display_name": grant.display_name or repo.display_fallback(grant.principal_id),
        "scope": grant.scope,
    }


def marking_of(body: Any) -> str:
    values, errors = _body(body, {"marking_id": "marking.secret"})
    if errors:
        raise InvalidInput(errors)
    return values["marking_id"]


async def mark(
    conn: Conn,
    actor: Principal,
    agent_id: str,
    markings_json: str,
    marking_id: str,
    kind: str = "agent",
) -> str:
    """Add the marking (the caller must hold it); returns the resource's markings as JSON."""
    # Held first: a 403 that says nothing of whether a marking the caller lacks exists.
    _require_held(actor, agent_id, marking_id, "add")
    if await get_marking(conn, marking_id) is None:  # held, but since deleted
        raise InvalidInput(
            [
                FieldError(
                    "/marking_id",
                    f"No marking '{marking_id}': GET /api/v1/markings lists them.",
                    "unknown_marking",
                )
            ]
        )
    before = orjson.loads(markings_json)
    if marking_id in before:
        return markings_json
    stored = await shares.set_markings(conn, agent_id, [*before, marking_id])
    after = orjson.loads(stored)
    await audit.record(conn, actor.user_id, f"{kind}.mark", agent_id, before, after)
    return stored


async def unmark(
    conn: Conn,
    actor: Principal,
    agent_id: str,
    markings_json: str,
    marking_id: str,
    kind: str = "agent",
) -> str:
    """Remove the marking (the caller must hold it); returns the resource's markings as JSON."""
    before = orjson.loads(markings_json)
    if marking_id not in before:
        raise NotFound(f"{kind.capitalize()} '{agent_id}' has no marking '{marking_id}'.")
    _require_held(actor, agent_id, marking_id, "remove")
    stored = await shares.set_markings(conn, agent_id, [m for m in before if m != marking_id])
    after = orjson.loads(stored)
    await audit.record(conn, actor.user_id, f"{kind}.unmark", agent_id, before, after)
    return stored


def _require_held(actor: Principal, agent_id: str, marking_id: str, verb: str) -> None:
    if marking_id not in actor.markings:
        raise Forbidden(
            f"Only an owner who holds the marking '{marking_id}' may {verb} it on "
            f"'{agent_id}'; you hold no marking '{marking_id}' (GET /api/v1/me lists yours)."
        )
