"""The knowledge operations behind the ontology tools (knowledge/ontology_tools.py), each
performed for a run's user (``principal``): the same service, policy and checks as the API
(read for search, get and follow; edit for changes), access checked again at every call.
An id the agent does not list (``ontology_ids``, bound) is refused whatever the user may read;
one the user cannot read gets the one ``unreachable`` message. What the caller got wrong is a
``KnowledgeError`` (the tool's error the model reads)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from dhub.access.principal import Principal
from dhub.domain.errors import Conflict, Forbidden, InvalidInput, NotFound
from dhub.domain.resources import unreachable
from dhub.knowledge.errors import KnowledgeError
from dhub.knowledge.ontology_tools import agent_tools
from dhub.knowledge.tools import KnowledgeKind, Operation
from dhub.services.ontologies import OntologyService
from dhub.store.db import Database

DEFAULT_LIMIT = 20
MAX_LIMIT = 50


def _target(arguments: dict[str, Any]) -> str:
    listed = arguments.get("ontology_ids")
    if not isinstance(listed, list) or not all(isinstance(i, str) for i in listed) or not listed:
        raise KnowledgeError("This agent lists no ontologies.")
    given = arguments.get("ontology")
    if given is None or given == "":
        if len(listed) == 1:
            only: str = listed[0]
            return only
        raise KnowledgeError(
            f"Name the ontology: 'ontology' is one of {', '.join(listed)} (the ones this agent "
            "lists)."
        )
    if not isinstance(given, str) or given not in listed:
        shown = given[:80] if isinstance(given, str) else "that"
        raise KnowledgeError(
            f"'{shown}' is not an ontology this agent lists: use one of {', '.join(listed)}."
        )
    return given


@asynccontextmanager
async def _refusals(ontology_id: str) -> AsyncIterator[None]:
    """The service's refusals as messages for the model."""
    try:
        yield
    except NotFound as exc:
        if exc.detail == f"No ontology with id '{ontology_id}'.":
            raise KnowledgeError(unreachable("ontology", ontology_id)) from None
        raise KnowledgeError(exc.detail) from None
    except InvalidInput as exc:
        problems = "; ".join(f"{e.loc or '/'}: {e.message}" for e in exc.errors[:10])
        raise KnowledgeError(problems or exc.detail) from None
    except (Forbidden, Conflict) as exc:
        raise KnowledgeError(exc.detail) from None


def _compact(found: dict[str, Any]) -> dict[str, Any]:
    return {k: found[k] for k in ("type", "key", "title", "properties")}


def _page(found: dict[str, Any]) -> dict[str, Any]:
    return {"objects": [_compact(o) for o in found["data"]], "next_cursor": found["next_cursor"]}


def _limit(arguments: dict[str, Any]) -> int:
    limit = arguments.get("limit", DEFAULT_LIMIT)
    if limit is None:
        return DEFAULT_LIMIT
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise KnowledgeError(f"'limit' is a whole number from 1 to {MAX_LIMIT}.")
    return limit


def _text(arguments: dict[str, Any], name: str) -> str:
    value = arguments.get(name)
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise KnowledgeError(f"'{name}' is required: a string.")
    return str(value)


async def search(db: Database, principal: Principal, arguments: dict[str, Any]) -> Any:
    ontology_id = _target(arguments)
    query = {
        k: arguments[k] for k in ("type", "filters", "q", "cursor") if arguments.get(k) is not None
    }
    query["limit"] = _limit(arguments)
    async with _refusals(ontology_id):
        return _page(await OntologyService(db).search(principal, ontology_id, query))


async def get(db: Database, principal: Principal, arguments: dict[str, Any]) -> Any:
    ontology_id = _target(arguments)
    type_name, key = _text(arguments, "type"), _text(arguments, "key")
    async with _refusals(ontology_id):
        return _compact(
            await OntologyService(db).get_object(principal, ontology_id, type_name, key)
        )


async def follow(db: Database, principal: Principal, arguments: dict[str, Any]) -> Any:
    ontology_id = _target(arguments)
    type_name, key = _text(arguments, "type"), _text(arguments, "key")
    link, limit = _text(arguments, "link"), _limit(arguments)
    cursor = arguments.get("cursor")
    async with _refusals(ontology_id):
        found = await OntologyService(db).follow(
            principal,
            ontology_id,
            type_name,
            key,
            link,
            limit=limit,
            cursor=cursor if isinstance(cursor, str) and cursor else None,
        )
    return _page(found)


async def create_object(db: Database, principal: Principal, arguments: dict[str, Any]) -> Any:
    ontology_id = _target(arguments)
    body = {"type": arguments.get("type"), "properties": arguments.get("properties")}
    async with _refusals(ontology_id):
        return _compact(await OntologyService(db).create_object(principal, ontology_id, body))


async def update_object(db: Database, principal: Principal, arguments: dict[str, Any]) -> Any:
    ontology_id = _target(arguments)
    type_name, key = _text(arguments, "type"), _text(arguments, "key")
    body = {"properties": arguments.get("properties") or {}}
    async with _refusals(ontology_id):
        return _compact(
            await OntologyService(db).update_object(principal, ontology_id, type_name, key, body)
        )


async def delete_object(db: Database, principal: Principal, arguments: dict[str, Any]) -> Any:
    ontology_id = _target(arguments)
    type_name, key = _text(arguments, "type"), _text(arguments, "key")
    async with _refusals(ontology_id):
        await OntologyService(db).delete_object(principal, ontology_id, type_name, key)
    return {"deleted": {"type": type_name, "key": key}}


async def link(db: Database, principal: Principal, arguments: dict[str, Any]) -> Any:
    ontology_id = _target(arguments)
    body = {k: arguments.get(k) for k in ("link_type", "from", "to")}
    async with _refusals(ontology_id):
        made, created = await OntologyService(db).link(principal, ontology_id, body)
    return {"linked": made, "new": created}


async def unlink(db: Database, principal: Principal, arguments: dict[str, Any]) -> Any:
    ontology_id = _target(arguments)
    link_type = _text(arguments, "link_type")
    from_key, to_key = _text(arguments, "from"), _text(arguments, "to")
    async with _refusals(ontology_id):
        await OntologyService(db).unlink(principal, ontology_id, link_type, from_key, to_key)
    return {"unlinked": {"link_type": link_type, "from": from_key, "to": to_key}}


OPERATIONS: dict[str, Operation] = {
    f"ontology.{fn.__name__}": fn
    for fn in (search, get, follow, create_object, update_object, delete_object, link, unlink)
}

KIND = KnowledgeKind("ontology", agent_tools, OPERATIONS)
