"""Prompt, tool, actor and role use cases, one service for the four kinds. Each public method
is one transaction; routes stay thin. Access is the agents' own: the same policy, owners,
grants and markings (services/sharing.py), with ``kind`` naming the resource.

Also the public home of what agents need from these resources (implemented in
services/references.py): ``check_agent_references`` (create-time checks of an agent's
prompts, tools, actors and roles) and ``resolve_agent`` (an agent ready for the runtime).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import orjson
from sqlalchemy.exc import IntegrityError

from dhub.access import policy
from dhub.access.principal import Principal
from dhub.domain.agent import SERVER_OWNED_FIELDS
from dhub.domain.errors import Conflict, FieldError, InvalidInput, NotFound
from dhub.domain.ids import new_id, now_ms
from dhub.domain.merge_patch import merge_patch
from dhub.domain.resources import (
    CONTAINERS,
    HOME,
    KINDS,
    McpServerSpec,
    OntologySpec,
    ResourceKind,
    ResourceSpec,
    RoleSpec,
    SecretSpec,
)
from dhub.services import placement, secrets, sharing, table_schema
from dhub.services.cursors import decode_cursor, encode_cursor
from dhub.services.ontology_schema_changes import ontology_changes
from dhub.services.references import (
    Reach,
    check_agent_references,
    check_secret_references,
    check_tool_items,
)
from dhub.services.resolution import UnresolvableAgent, resolve_agent
from dhub.services.resource_validation import collect_resource_errors
from dhub.services.secret_vault import SecretVault
from dhub.store import audit, tree
from dhub.store import ontology as ontology_store
from dhub.store import resources as repo
from dhub.store import sharing as shares
from dhub.store.agents import folder_key, set_tags
from dhub.store.db import Conn, Database
from dhub.store.tree import NOTHING, Inherited

__all__ = [
    "ResourcePage",
    "ResourceService",
    "ResourceView",
    "UnresolvableAgent",
    "check_agent_references",
    "resolve_agent",
]


@dataclass(frozen=True, slots=True)
class ResourceView:
    """A stored resource as one caller sees it: the API renders it (api/render.py)."""

    record: repo.ResourceRecord
    owners: list[dict[str, Any]]
    scope: policy.ShareScope | None
    above: Inherited = NOTHING  # inherited from its folders and collection

    @property
    def effective_markings(self) -> list[str]:
        """Its own markings and those of every folder and its collection above it."""
        return sorted({*orjson.loads(self.record.markings), *self.above.markings})


@dataclass(frozen=True)
class ResourcePage:
    data: list[ResourceView]
    next_cursor: str | None


def _kind(category: str) -> ResourceKind:
    return KINDS[category]


class ResourceService:
    def __init__(self, db: Database, vault: SecretVault | None = None) -> None:
        self.db = db
        self.vault = vault  # encrypts secrets' values (services/secrets.py)
        self._reach = shares.ReachCache()

    # -- documents ------------------------------------------------------------------------------

    @staticmethod
    async def _references(conn: Conn, principal: Principal, spec: ResourceSpec) -> list[FieldError]:
        """The problems with a valid document's references (a role's tools, an MCP server's
        secrets: the saver must be able to use each one, docs/secrets.md)."""
        if isinstance(spec, RoleSpec):
            return await check_tool_items(conn, principal, spec.tools, ("tools",))
        if isinstance(spec, McpServerSpec):
            used = spec.model_dump(include={"headers", "env"})
            return await check_secret_references(Reach(conn, principal), used)
        return []

    async def validate(self, principal: Principal, category: str, doc: Any) -> dict[str, Any]:
        spec, errors = collect_resource_errors(_kind(category), doc)
        if spec is not None:
            async with self.db.read(snapshot=True) as conn:
                errors = await self._references(conn, principal, spec)
            if isinstance(spec, SecretSpec):
                errors += secrets.problems_for(principal, spec)
        return {"valid": not errors, "errors": [e.as_dict() for e in errors]}

    async def create(self, principal: Principal, category: str, doc: Any) -> ResourceView:
        spec = self.checked(category, doc)
        async with self.db.write() as conn:
            return await self.create_in(conn, principal, spec)

    @staticmethod
    def checked(category: str, doc: Any) -> ResourceSpec:
        """``doc`` as a document of ``category``, or InvalidInput with every problem."""
        spec, errors = collect_resource_errors(_kind(category), doc)
        if errors or spec is None:
            raise InvalidInput(errors)
        _check_not_home(spec)
        return spec

    async def create_in(self, conn: Conn, principal: Principal, spec: ResourceSpec) -> ResourceView:
        """Store a checked document in the caller's write transaction (a table made by an
        import: the table and its rows in one transaction)."""
        category = spec.category
        resource_id, now = new_id(category), now_ms()
        pending = secrets.Pending()
        if isinstance(spec, SecretSpec):  # the value is stored apart, never in the document
            spec, pending = secrets.on_create(principal, spec, now)
        errors = await self._references(conn, principal, spec)
        if errors:
            raise InvalidInput(errors)
        to = await placement.resolve(conn, principal, category, spec.folder_id, spec.collection_id)
        spec = placement.placed(spec, to)
        await self._check_name_free(conn, principal, spec, None)
        document = spec.model_dump_json()
        try:
            await repo.insert_resource(
                conn,
                {
                    **_indexed(spec),
                    "id": resource_id,
                    "category": category,
                    "version": 1,
                    "document": document,
                    "is_builtin": False,
                    "created_by": principal.user_id,
                    "created_at": now,
                    "updated_at": now,
                },
            )
        except IntegrityError as exc:  # lost a race for the name
            raise _name_conflict(spec, None, principal) from exc
        await repo.insert_version(conn, resource_id, 1, document, principal.user_id, now)
        await table_schema.created(conn, resource_id, spec)
        await secrets.apply(conn, self.vault, resource_id, pending, principal.user_id, now)
        await set_tags(conn, resource_id, spec.tags or [])
        await shares.add_owners(conn, resource_id, [principal.user_id])
        await tree.place(conn, resource_id, to.parent)
        await audit.record(conn, principal.user_id, f"{category}.create", resource_id, None, 1)
        found = await repo.get_resource(conn, resource_id, sorted(principal.principal_ids))
        assert found is not None
        return ResourceView(found.record, found.owners, "owner", found.above)

    async def _check_name_free(
        self, conn: Conn, principal: Principal, spec: ResourceSpec, own_id: str | None
    ) -> None:
        key = folder_key(spec.folder_id, spec.collection_id)
        holder = await repo.find_by_name(conn, spec.category, key, spec.name)
        if holder is not None and holder != own_id:
            found = await repo.get_resources(conn, [holder], sorted(principal.principal_ids))
            raise _name_conflict(spec, found.get(holder), principal)

    # -- access ---------------------------------------------------------------------------------

    async def _find(
        self, conn: Conn, principal: Principal, category: str, resource_id: str
    ) -> repo.ResourceRow:
        found = await repo.get_resource(conn, resource_id, sorted(principal.principal_ids))
        if found is None or found.record.category != category:
            raise NotFound(f"No {category} with id '{resource_id}'.")
        return found

    async def _load(
        self,
        conn: Conn,
        principal: Principal,
        category: str,
        resource_id: str,
        action: policy.Action,
    ) -> ResourceView:
        found = await self._find(conn, principal, category, resource_id)
        allowed = _require(principal, action, found)
        return ResourceView(found.record, found.owners, allowed.scope, found.above)

    async def load(
        self,
        conn: Conn,
        principal: Principal,
        category: str,
        resource_id: str,
        action: policy.Action,
    ) -> ResourceView:
        """The resource if ``principal`` may do ``action`` on it, in the caller's transaction
        (for services built on a kind: a table's rows); NotFound, word for word as for a
        random id, if the caller cannot see it."""
        return await self._load(conn, principal, category, resource_id, action)

    async def get(self, principal: Principal, category: str, resource_id: str) -> ResourceView:
        async with self.db.read() as conn:
            view = await self._load(conn, principal, category, resource_id, "read")
        return view

    async def page(
        self,
        principal: Principal,
        category: str,
        flt: repo.ResourceFilter,
        limit: int,
        cursor: str | None,
    ) -> ResourcePage:
        after = decode_cursor(cursor) if cursor else None
        visible = policy.visible_agents(principal)  # the same rule for every kind
        async with self.db.read(snapshot=visible.restricted) as conn:
            reach = None
            if visible.restricted:
                held = visible.held_markings or ()
                reach = await self._reach.get(conn, visible.principals, held)
            found = await repo.list_resources(conn, category, flt, visible, after, limit + 1, reach)
        data = []
        for row in found[:limit]:  # the SQL filter already left only what the caller may see
            owner_ids = [o["id"] for o in row.owners]
            seen = policy.access(principal, owner_ids, row.grant, (), row.above)
            scope = seen.scope if seen else None
            data.append(ResourceView(row.record, row.owners, scope, row.above))
        next_cursor = encode_cursor(found[limit - 1].record.id) if len(found) > limit else None
        return ResourcePage(data, next_cursor)

    # -- changes --------------------------------------------------------------------------------

    async def patch(
        self, principal: Principal, category: str, resource_id: str, patch: Any
    ) -> ResourceView:
        """A merge patch of the document; ``owners`` replaces the owners (as for agents)."""
        if not isinstance(patch, dict):
            raise InvalidInput([FieldError("", "A merge patch must be a JSON object.", "type")])
        kind = _kind(category)
        doc_patch = {k: v for k, v in patch.items() if k != "owners"}
        async with self.db.write() as conn:
            found = await self._find(conn, principal, category, resource_id)
            only_owners = "owners" in patch and not doc_patch
            scope: policy.ShareScope | None
            scope = _require(principal, "read" if only_owners else "edit", found).scope
            owners, errors = await self._patched_owners(conn, principal, found, patch)
            current = orjson.loads(found.record.document)
            base = secrets.editable(current) if category == "secret" else current
            spec, doc_errors = collect_resource_errors(kind, _patched(base, doc_patch))
            if spec is not None and spec.model_dump_json() != found.record.document:
                doc_errors = await self._references(conn, principal, spec)  # a new version
                if isinstance(spec, OntologySpec) and not doc_errors:
                    doc_errors = await ontology_changes(conn, resource_id, current, spec)
            if errors or doc_errors or spec is None:
                raise InvalidInput([*doc_errors, *errors])
            pending, now = secrets.Pending(), now_ms()
            if isinstance(spec, SecretSpec):  # before any write: from_env is admins' only
                spec, pending = secrets.on_patch(principal, current, spec, now)
            if placement.is_home(found.record):
                _check_home_kept(current, spec)
                moved_to = None
            else:
                _check_not_home(spec)
                spec, moved_to = await placement.moved(
                    conn, principal, found, category, current, spec, doc_patch
                )
            if owners is not None:
                before = [o["id"] for o in found.owners]
                await sharing.change_owners(conn, principal, resource_id, before, owners, category)
                found = await self._find(conn, principal, category, resource_id)
                seen = policy.access(principal, owners, found.grant, (), found.above)
                scope = seen.scope if seen else None
            record = await self._store(conn, principal, found.record, spec)
            await secrets.apply(conn, self.vault, resource_id, pending, principal.user_id, now)
            if moved_to is not None:
                was = current.get("collection_id")
                await placement.move(conn, principal, resource_id, was, moved_to)
                found = await self._find(conn, principal, category, resource_id)
        return ResourceView(record, found.owners, scope, found.above)

    async def _patched_owners(
        self, conn: Conn, principal: Principal, found: repo.ResourceRow, patch: dict[str, Any]
    ) -> tuple[list[str] | None, list[FieldError]]:
        if "owners" not in patch:
            return None, []
        owners, errors = await sharing.parse_owners(conn, patch["owners"])
        if not errors and owners == sorted(o["id"] for o in found.owners):
            return None, []  # unchanged: no "share" needed
        _require(principal, "share", found)
        return owners, errors

    async def _store(
        self,
        conn: Conn,
        principal: Principal,
        record: repo.ResourceRecord,
        spec: ResourceSpec,
    ) -> repo.ResourceRecord:
        """Store ``spec`` as the next version unless it is the current document."""
        document = spec.model_dump_json()
        if document == record.document:
            return record
        await self._check_name_free(conn, principal, spec, record.id)
        now, version = now_ms(), record.version + 1
        values = {**_indexed(spec), "version": version, "document": document, "updated_at": now}
        if placement.is_home(record):
            del values["folder_key"]  # a home folder's own (placement.HOME_KEY)
        try:
            await repo.update_resource(conn, record.id, values)
        except IntegrityError as exc:
            raise _name_conflict(spec, None, principal) from exc
        await table_schema.changed(conn, record.id, record.document, spec)
        await repo.insert_version(conn, record.id, version, document, principal.user_id, now)
        await set_tags(conn, record.id, spec.tags or [])
        await audit.record(
            conn, principal.user_id, f"{record.category}.update", record.id, record.version, version
        )
        return dataclasses.replace(
            record,
            name=spec.name,
            folder_id=spec.folder_id,
            version=version,
            document=document,
            updated_at=now,
        )

    async def delete(self, principal: Principal, category: str, resource_id: str) -> None:
        async with self.db.write() as conn:
            record = (await self._load(conn, principal, category, resource_id, "delete")).record
            if category in CONTAINERS:
                await _check_empty(conn, record)
            await table_schema.deleted(conn, category, resource_id)
            await secrets.deleted(conn, category, resource_id)
            if category == "ontology":
                await ontology_store.delete_all(conn, resource_id)
            await repo.delete_resource(conn, resource_id)
            await audit.record(
                conn, principal.user_id, f"{category}.delete", resource_id, record.version
            )

    # -- versions -------------------------------------------------------------------------------

    async def versions(
        self, principal: Principal, category: str, resource_id: str
    ) -> list[dict[str, Any]]:
        async with self.db.read(snapshot=True) as conn:
            await self._load(conn, principal, category, resource_id, "read")
            rows = await repo.list_versions(conn, resource_id)
        return [
            {"version": v.version, "created_at": v.created_at, "created_by": v.created_by}
            for v in rows
        ]

    async def version(
        self, principal: Principal, category: str, resource_id: str, number: int
    ) -> ResourceView:
        async with self.db.read(snapshot=True) as conn:
            view = await self._load(conn, principal, category, resource_id, "read")
            record = view.record
            found = await repo.get_version(conn, resource_id, number)
        if found is None:
            raise NotFound(
                f"{_kind(category).label} '{resource_id}' has no version {number}; it has "
                f"versions 1 to {record.version}."
            )
        snapshot = dataclasses.replace(
            record, document=found.document, version=found.version, updated_at=found.created_at
        )
        return dataclasses.replace(view, record=snapshot)

    # -- sharing --------------------------------------------------------------------------------

    async def grants(
        self, principal: Principal, category: str, resource_id: str
    ) -> list[dict[str, Any]]:
        async with self.db.read(snapshot=True) as conn:
            await self._load(conn, principal, category, resource_id, "read")
            rows = await shares.list_grants(conn, resource_id)
        return [sharing.grant_json(g) for g in rows]

    async def grant(
        self, principal: Principal, category: str, resource_id: str, body: Any
    ) -> tuple[dict[str, Any], bool]:
        async with self.db.write() as conn:
            await self._load(conn, principal, category, resource_id, "share")
            return await sharing.add_grant(conn, principal, resource_id, body, category)

    async def ungrant(
        self, principal: Principal, category: str, resource_id: str, principal_id: str
    ) -> None:
        async with self.db.write() as conn:
            await self._load(conn, principal, category, resource_id, "share")
            await sharing.remove_grant(conn, principal, resource_id, principal_id, category)

    async def mark(
        self, principal: Principal, category: str, resource_id: str, body: Any
    ) -> ResourceView:
        async with self.db.write() as conn:
            view = await self._load(conn, principal, category, resource_id, "mark")
            record = view.record
            marking_id = sharing.marking_of(body)
            stored = await sharing.mark(
                conn, principal, resource_id, record.markings, marking_id, category
            )
        return dataclasses.replace(view, record=dataclasses.replace(record, markings=stored))

    async def unmark(
        self, principal: Principal, category: str, resource_id: str, marking_id: str
    ) -> ResourceView:
        async with self.db.write() as conn:
            view = await self._load(conn, principal, category, resource_id, "unmark")
            record = view.record
            stored = await sharing.unmark(
                conn, principal, resource_id, record.markings, marking_id, category
            )
        return dataclasses.replace(view, record=dataclasses.replace(record, markings=stored))


def _require(principal: Principal, action: policy.Action, found: repo.ResourceRow) -> policy.Access:
    record = found.record
    owner_ids = [o["id"] for o in found.owners]
    markings = orjson.loads(record.markings)
    return policy.require(
        principal, action, record.id, owner_ids, found.grant, markings, record.category,
        found.above,
    )  # fmt: skip


def _patched(current: dict[str, Any], patch: dict[str, Any]) -> Any:
    """Apply the patch; read-only fields in the patch are kept so validation reports them."""
    merged = merge_patch(current, patch)
    for key, value in patch.items():
        if key == "markings" or key in SERVER_OWNED_FIELDS:
            merged[key] = value
    return merged


def _indexed(spec: ResourceSpec) -> dict[str, Any]:
    return {
        "name": spec.name,
        "folder_key": folder_key(spec.folder_id, spec.collection_id),
        "folder_id": spec.folder_id,
        "collection_id": spec.collection_id,
        "alias": spec.alias,
        "description": spec.description,
        "type": spec.type,
    }


def _check_home_kept(current: dict[str, Any], spec: ResourceSpec) -> None:
    kept = ("name", "folder_id", "collection_id", "type")
    changed = [k for k in kept if getattr(spec, k) != current.get(k)]
    if changed:
        raise InvalidInput(
            [FieldError(f"/{k}", f"A home folder keeps its {k}: leave '{k}' out of the patch "
                        "(its alias, description and tags may change).", "home_folder")
             for k in changed]
        )  # fmt: skip


def _check_not_home(spec: ResourceSpec) -> None:
    if spec.category == "folder" and spec.type == HOME:
        message = (
            f"type '{HOME}' is reserved for users' home folders, which dhub makes: choose "
            "another type or leave it out."
        )
        raise InvalidInput([FieldError("/type", message, "reserved")])


async def _check_empty(conn: Conn, record: repo.ResourceRecord) -> None:
    if placement.is_home(record):
        raise Conflict(
            f"'{record.id}' is a home folder: it goes with its user, and cannot be deleted."
        )
    if await tree.child_count(conn, record.id):
        raise Conflict(
            f"{record.category.capitalize()} '{record.id}' is not empty: move or delete what "
            "is in it first (some of it may be hidden from you; ask its owner)."
        )


def _name_conflict(spec: ResourceSpec, holder: repo.ResourceRow | None, who: Principal) -> Conflict:
    return sharing.name_conflict(spec.category, spec.name, spec.folder_id, holder, who)
