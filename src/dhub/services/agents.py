"""Agent use cases. Each public method is one transaction; routes stay thin."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson
from sqlalchemy.exc import IntegrityError

from dhub.access import policy
from dhub.access.principal import Principal
from dhub.domain.agent import SERVER_OWNED_FIELDS, AgentSpec
from dhub.domain.errors import Conflict, FieldError, InvalidInput, NotFound
from dhub.domain.ids import new_id, now_ms
from dhub.domain.merge_patch import merge_patch
from dhub.engine.validate import collect_errors, validate_agent_document
from dhub.providers.registry import Providers
from dhub.services import placement, sharing
from dhub.services.agent_lists import AgentLists, AgentView, Page
from dhub.services.knowledge import AUTO_OPTION
from dhub.services.model_checks import effort_errors
from dhub.services.references import check_agent_references
from dhub.store import agents as repo
from dhub.store import audit, tree
from dhub.store import sharing as shares
from dhub.store.db import Conn, Database


@dataclass(frozen=True, slots=True)
class CopyOf:
    """What ``create`` needs to know of the agent it copies (``AgentService.copy``)."""

    record: repo.AgentRecord
    free_name: bool  # no name was asked for: the source's, or the first free variant of it
    markings: list[str]  # the source's effective markings: its own and those above it


COPY_FIELDS = ("name", "folder_id")
_ALL_PAGE = 500  # agents read at once by ``all_runnable``
# A copy may list other knowledge than its source (a built-in that works on a table is copied
# with the caller's table): lists of ids, checked for the caller like any create's.
COPY_LISTS = ("tables", "templates", "ontologies")


def dump_spec(spec: AgentSpec) -> str:
    return spec.model_dump_json()


class AgentService:
    def __init__(
        self, db: Database, providers: Providers | None = None, list_cache_mb: int = 0
    ) -> None:
        self.db = db
        # The server's model catalog: what its models cannot take is refused at save time.
        self.providers = providers
        self._reach = shares.ReachCache()
        self.lists = AgentLists(db, self._reach, list_cache_mb)

    async def create(
        self, principal: Principal, doc: Any, *, copy_of: CopyOf | None = None
    ) -> AgentView:
        """A new agent owned by the caller; ``copy_of``: it copies that agent (``copy``), so
        it may take a free variant of its name and carries its markings."""
        spec = validate_agent_document(doc)
        agent_id, now = new_id("agent"), now_ms()
        async with self.db.write() as conn:
            problems = effort_errors(self.providers, spec)
            problems += await check_agent_references(conn, principal, spec)
            if problems:
                raise InvalidInput(problems)
            to = await placement.resolve(
                conn, principal, "agent", spec.folder_id, spec.collection_id
            )
            spec = placement.placed(spec, to)
            if copy_of is not None and copy_of.free_name:
                name = await _free_name(conn, to.key, spec.name)
                spec = spec.model_copy(update={"name": name})
            await self._check_name_free(conn, principal, spec, None)
            await self._insert(conn, agent_id, spec, dump_spec(spec), principal, now)
            await tree.place(conn, agent_id, to.parent)
            if copy_of is not None:
                await self._copied(conn, principal, agent_id, copy_of)
            found = await repo.get_agent(conn, agent_id, sorted(principal.principal_ids))
        assert found is not None
        return AgentView(found.record, found.owners, "owner", found.above)

    async def copy(self, principal: Principal, agent_id: str, body: Any) -> AgentView:
        """An editable copy of an agent the caller may read (a built-in or any other), owned
        by the caller, at version 1: its current document, saved like any new agent (its
        references checked for the caller), with ``name``, ``folder_id`` and the knowledge
        lists (``tables``, ``templates``, ``ontologies``) from ``body``.
        Without a name it keeps the source's, or the first free of ``<name>-copy``,
        ``<name>-copy-2``, ...; without a folder it goes where a new agent without one goes."""
        name, folder_id, lists = _copy_body(body)
        async with self.db.read() as conn:
            source = await self._load(conn, principal, agent_id, "read")
        record = source.record
        doc = orjson.loads(record.document)
        # The copy's place is the caller's to choose: a folder (its collection follows), else
        # where a new agent goes (the caller's home folder), never the original's by default.
        doc.pop("folder_id", None)
        doc.pop("collection_id", None)
        if folder_id is not None:
            doc["folder_id"] = folder_id
        if name is not None:
            doc["name"] = name
        doc.update(lists)
        copy_of = CopyOf(record, name is None, source.effective_markings)
        return await self.create(principal, doc, copy_of=copy_of)

    async def _copied(
        self, conn: Conn, principal: Principal, agent_id: str, source: CopyOf
    ) -> None:
        """The copy carries the source's effective markings as its own (the caller holds every
        one, having read it), those inherited from its folders too: wherever the copy goes, it
        must not declassify what it copies."""
        if source.markings:
            await shares.set_markings(conn, agent_id, source.markings)
        copied = {"id": source.record.id, "version": source.record.version}
        await audit.record(conn, principal.user_id, "agent.copy", agent_id, copied, source.markings)

    async def _insert(
        self,
        conn: Conn,
        agent_id: str,
        spec: AgentSpec,
        document: str,
        principal: Principal,
        now: int,
    ) -> None:
        try:
            await repo.insert_agent(
                conn,
                {
                    **_indexed(spec),
                    "id": agent_id,
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
        await repo.insert_version(conn, agent_id, 1, document, principal.user_id, now)
        await repo.set_tags(conn, agent_id, spec.tags or [])
        await shares.add_owners(conn, agent_id, [principal.user_id])
        await audit.record(conn, principal.user_id, "agent.create", agent_id, None, 1)

    async def _check_name_free(
        self, conn: Conn, principal: Principal, spec: AgentSpec, agent_id: str | None
    ) -> None:
        holder = await repo.find_by_name(
            conn, repo.folder_key(spec.folder_id, spec.collection_id), spec.name
        )
        if holder is not None and holder != agent_id:
            found = await repo.get_agents(conn, [holder], sorted(principal.principal_ids))
            raise _name_conflict(spec, found.get(holder), principal)

    async def _find(self, conn: Conn, principal: Principal, agent_id: str) -> repo.AgentRow:
        found = await repo.get_agent(conn, agent_id, sorted(principal.principal_ids))
        if found is None:
            raise NotFound(f"No agent with id '{agent_id}'.")
        return found

    async def _load(
        self, conn: Conn, principal: Principal, agent_id: str, action: policy.Action
    ) -> AgentView:
        found = await self._find(conn, principal, agent_id)
        allowed = _require(principal, action, found)
        return AgentView(found.record, found.owners, allowed.scope, found.above)

    async def get(self, principal: Principal, agent_id: str) -> AgentView:
        async with self.db.read() as conn:
            view = await self._load(conn, principal, agent_id, "read")
        return view

    async def page(
        self,
        principal: Principal,
        flt: repo.AgentFilter,
        limit: int,
        cursor: str | None,
        action: policy.Action = "read",
    ) -> Page:
        """A page of the agents the caller may read (agent_lists.py)."""
        return await self.lists.page(principal, flt, limit, cursor, action)

    async def page_rendered(
        self,
        principal: Principal,
        flt: repo.AgentFilter,
        limit: int,
        cursor: str | None,
        render: Callable[[AgentView], bytes],
    ) -> tuple[list[bytes], str | None]:
        """A page of the agents the caller may read, rendered (agent_lists.py)."""
        return await self.lists.page_rendered(principal, flt, limit, cursor, render)

    async def patch(self, principal: Principal, agent_id: str, patch: Any) -> AgentView:
        """A merge patch of the document. ``owners`` (principal ids) replaces the owners, which
        takes an owner or an admin; owners are not part of the document, so changing only them
        keeps the version."""
        if not isinstance(patch, dict):
            raise InvalidInput([FieldError("", "A merge patch must be a JSON object.", "type")])
        doc_patch = {k: v for k, v in patch.items() if k != "owners"}
        async with self.db.write() as conn:
            found = await self._find(conn, principal, agent_id)
            only_owners = "owners" in patch and not doc_patch  # then "share" alone is needed
            scope: policy.ShareScope | None
            scope = _require(principal, "read" if only_owners else "edit", found).scope
            owners, errors = await self._patched_owners(conn, principal, found, patch)
            current = orjson.loads(found.record.document)
            spec, doc_errors = collect_errors(_patched(current, doc_patch))
            if errors or doc_errors or spec is None:
                raise InvalidInput([*doc_errors, *errors])
            spec, moved_to = await placement.moved(
                conn, principal, found, "agent", current, spec, doc_patch
            )
            if _turns_on_unconfirmed(current, spec):
                editing = _require(principal, "edit", found)
                policy.require_owner_choice(editing, agent_id, UNCONFIRMED)
            if dump_spec(spec) != found.record.document:  # a new version: check its references
                problems = effort_errors(self.providers, spec)
                problems += await check_agent_references(conn, principal, spec)
                if problems:
                    raise InvalidInput(problems)
            if owners is not None:
                before = [o["id"] for o in found.owners]
                await sharing.change_owners(conn, principal, agent_id, before, owners)
                found = await self._find(conn, principal, agent_id)
                seen = policy.access(
                    principal, owners, found.grant, (), found.above, builtin=found.record.is_builtin
                )
                scope = seen.scope if seen else None  # None: the caller gave its access away
            record = await self._store_document(conn, principal, found.record, spec)
            if moved_to is not None:
                was = current.get("collection_id")
                await placement.move(conn, principal, agent_id, was, moved_to)
                found = await self._find(conn, principal, agent_id)
        return AgentView(record, found.owners, scope, found.above)

    async def _patched_owners(
        self, conn: Conn, principal: Principal, found: repo.AgentRow, patch: dict[str, Any]
    ) -> tuple[list[str] | None, list[FieldError]]:
        """The new owners when the patch changes them (after asking the policy for "share"),
        and the problems with the patch's ``owners``."""
        if "owners" not in patch:
            return None, []
        owners, errors = await sharing.parse_owners(conn, patch["owners"])
        if not errors and owners == sorted(o["id"] for o in found.owners):
            return None, []  # unchanged: no "share" needed
        _require(principal, "share", found)
        return owners, errors

    async def _store_document(
        self, conn: Conn, principal: Principal, record: repo.AgentRecord, spec: AgentSpec
    ) -> repo.AgentRecord:
        """Store ``spec`` as the next version unless it is the current document."""
        document = dump_spec(spec)
        if document == record.document:
            return record
        await self._check_name_free(conn, principal, spec, record.id)
        now, version = now_ms(), record.version + 1
        try:
            await repo.update_agent(
                conn,
                record.id,
                {**_indexed(spec), "version": version, "document": document, "updated_at": now},
            )
        except IntegrityError as exc:
            raise _name_conflict(spec, None, principal) from exc
        await repo.insert_version(conn, record.id, version, document, principal.user_id, now)
        await repo.set_tags(conn, record.id, spec.tags or [])
        await audit.record(
            conn, principal.user_id, "agent.update", record.id, record.version, version
        )
        return dataclasses.replace(
            record,
            name=spec.name,
            folder_id=spec.folder_id,
            version=version,
            document=document,
            updated_at=now,
        )

    async def delete(self, principal: Principal, agent_id: str) -> None:
        async with self.db.write() as conn:
            record = (await self._load(conn, principal, agent_id, "delete")).record
            await repo.delete_agent(conn, agent_id)
            await audit.record(conn, principal.user_id, "agent.delete", agent_id, record.version)

    async def grants(self, principal: Principal, agent_id: str) -> list[dict[str, Any]]:
        """The agent's grants; anyone who may read the agent may read who it is shared with."""
        async with self.db.read(snapshot=True) as conn:
            await self._load(conn, principal, agent_id, "read")
            rows = await shares.list_grants(conn, agent_id)
        return [sharing.grant_json(g) for g in rows]

    async def grant(
        self, principal: Principal, agent_id: str, body: Any
    ) -> tuple[dict[str, Any], bool]:
        """Grant a scope (replacing the one the principal had); True when the grant is new."""
        async with self.db.write() as conn:
            await self._load(conn, principal, agent_id, "share")
            return await sharing.add_grant(conn, principal, agent_id, body)

    async def ungrant(self, principal: Principal, agent_id: str, principal_id: str) -> None:
        async with self.db.write() as conn:
            await self._load(conn, principal, agent_id, "share")
            await sharing.remove_grant(conn, principal, agent_id, principal_id)

    async def mark(self, principal: Principal, agent_id: str, body: Any) -> AgentView:
        async with self.db.write() as conn:
            view = await self._load(conn, principal, agent_id, "mark")
            record = view.record
            marking_id = sharing.marking_of(body)
            stored = await sharing.mark(conn, principal, agent_id, record.markings, marking_id)
        return dataclasses.replace(view, record=dataclasses.replace(record, markings=stored))

    async def unmark(self, principal: Principal, agent_id: str, marking_id: str) -> AgentView:
        async with self.db.write() as conn:
            view = await self._load(conn, principal, agent_id, "unmark")
            record = view.record
            stored = await sharing.unmark(conn, principal, agent_id, record.markings, marking_id)
        return dataclasses.replace(view, record=dataclasses.replace(record, markings=stored))

    async def versions(self, principal: Principal, agent_id: str) -> list[dict[str, Any]]:
        async with self.db.read(snapshot=True) as conn:
            await self._load(conn, principal, agent_id, "read")
            rows = await repo.list_versions(conn, agent_id)
        return [
            {"version": v.version, "created_at": v.created_at, "created_by": v.created_by}
            for v in rows
        ]

    async def version(self, principal: Principal, agent_id: str, number: int) -> AgentView:
        async with self.db.read(snapshot=True) as conn:
            view = await self._load(conn, principal, agent_id, "read")
            record = view.record
            found = await repo.get_version(conn, agent_id, number)
        if found is None:
            raise NotFound(
                f"Agent '{agent_id}' has no version {number}; it has versions 1 to "
                f"{record.version}."
            )
        snapshot = dataclasses.replace(
            record, document=found.document, version=found.version, updated_at=found.created_at
        )
        return dataclasses.replace(view, record=snapshot)

    async def for_run(
        self, principal: Principal, agent_id: str, version: int | None
    ) -> tuple[repo.AgentRecord, str]:
        """The agent (checked: the caller may run it) and the document of ``version`` (the
        latest when None), as stored."""
        async with self.db.read(snapshot=True) as conn:
            record = (await self._load(conn, principal, agent_id, "run")).record
            if version is None or version == record.version:
                return record, record.document
            found = await repo.get_version(conn, agent_id, version)
        if found is None:
            raise NotFound(
                f"Agent '{agent_id}' has no version {version}; it has versions 1 to "
                f"{record.version}."
            )
        return record, found.document

    async def readable(self, principal: Principal, agent_id: str) -> repo.AgentRecord:
        """The agent, when the caller may read it (runs are seen through their agent)."""
        async with self.db.read() as conn:
            record = (await self._load(conn, principal, agent_id, "read")).record
        return record

    async def read_access(self, principal: Principal, agent_id: str) -> policy.Access:
        """The caller's access to an agent it may read (NotFound otherwise): which of its
        runs the caller sees follows from it (``policy.sees_run``)."""
        async with self.db.read() as conn:
            found = await self._find(conn, principal, agent_id)
        return _require(principal, "read", found)

    async def run_scope(self, principal: Principal) -> tuple[list[str] | None, list[str]]:
        """Whose runs, tasks and conversations a caller may list, through their agents: (the
        agents it reaches, None for admins who reach all; the agents hidden from it by
        markings it lacks, admins included)."""
        visible = policy.visible_agents(principal)
        held = visible.held_markings or ()
        async with self.db.read(snapshot=True) as conn:
            if visible.restricted:
                reach = await self._reach.get(conn, visible.principals, held, visible.builtins)
                return reach.ids, []
            return None, await shares.marked_beyond(conn, held)

    async def all_runnable(self, principal: Principal) -> list[repo.AgentRecord]:
        """Every agent the caller may run, in creation order: what its list shows (the SQL
        filter of ``page``), less what it may only read (a ``viewer`` grant). Each is checked
        again here, markings included, as ``runnable`` would check it."""
        visible = policy.visible_agents(principal)
        held = visible.held_markings or ()
        found: list[repo.AgentRecord] = []
        after: str | None = None
        while True:
            async with self.db.read(snapshot=visible.restricted) as conn:
                reach = None
                if visible.restricted:
                    reach = await self._reach.get(conn, visible.principals, held, visible.builtins)
                rows = await repo.list_agents(
                    conn, repo.AgentFilter(), visible, after, _ALL_PAGE, reach
                )
            for row in rows:
                owner_ids = [o["id"] for o in row.owners]
                markings = orjson.loads(row.record.markings)
                builtin = row.record.is_builtin
                seen = policy.access(
                    principal, owner_ids, row.grant, markings, row.above, builtin=builtin
                )
                if seen is not None and seen.allows("run"):
                    found.append(row.record)
            if len(rows) < _ALL_PAGE:
                return found
            after = rows[-1].record.id

    async def editable(self, principal: Principal, agent_id: str) -> repo.AgentRecord:
        """The agent, when the caller may edit it (its triggers, say)."""
        async with self.db.read() as conn:
            record = (await self._load(conn, principal, agent_id, "edit")).record
        return record

    async def runnable(self, principal: Principal, agent_id: str) -> repo.AgentRecord:
        async with self.db.read() as conn:
            record = (await self._load(conn, principal, agent_id, "run")).record
        return record

    async def validate(self, principal: Principal, doc: Any) -> dict[str, Any]:
        """What a create would say of ``doc`` (its references too), without storing it."""
        spec, errors = collect_errors(doc)
        if spec is not None:
            errors = effort_errors(self.providers, spec)
            async with self.db.read(snapshot=True) as conn:
                errors += await check_agent_references(conn, principal, spec)
        return {"valid": not errors, "errors": [e.as_dict() for e in errors]}


UNCONFIRMED = (
    f"Setting options.{AUTO_OPTION} to 'auto' (the agent's ontology tools change objects "
    "without a person's confirmation)"
)


def _turns_on_unconfirmed(current: dict[str, Any], spec: AgentSpec) -> bool:
    """Whether a change lets the agent change ontology objects with no person's confirmation
    where it did not before: the owners' choice (``policy.require_owner_choice``)."""
    was = (current.get("options") or {}).get(AUTO_OPTION) == "auto"
    return not was and (spec.options or {}).get(AUTO_OPTION) == "auto"


def _require(principal: Principal, action: policy.Action, found: repo.AgentRow) -> policy.Access:
    owner_ids = [o["id"] for o in found.owners]
    markings = orjson.loads(found.record.markings)
    return policy.require(
        principal,
        action,
        found.record.id,
        owner_ids,
        found.grant,
        markings,
        above=found.above,
        builtin=found.record.is_builtin,
    )


def _copy_body(body: Any) -> tuple[str | None, str | None, dict[str, list[str]]]:
    """The ``name``, ``folder_id`` and knowledge lists a copy asks for (None, {}: not asked);
    no body is {}."""
    if body is None:
        return None, None, {}
    if not isinstance(body, dict):
        message = (
            'The body is optional; when given, a JSON object: {"name": ..., "folder_id": ..., '
            '"tables": [...], "templates": [...], "ontologies": [...]}.'
        )
        raise InvalidInput([FieldError("", message, "type")])
    errors = [
        FieldError(f"/{key}", "A copy takes only 'name', 'folder_id', 'tables', 'templates' "
                   f"and 'ontologies': remove '{key}'.", "extra_forbidden")
        for key in body
        if key not in COPY_FIELDS and key not in COPY_LISTS
    ]  # fmt: skip
    for key in COPY_FIELDS:
        if body.get(key) is not None and not isinstance(body[key], str):
            errors.append(
                FieldError(f"/{key}", f"'{key}' is a string (or null to leave it out).", "type")
            )
    for key in COPY_LISTS:
        value = body.get(key)
        if value is not None and not (
            isinstance(value, list) and all(isinstance(i, str) for i in value)
        ):
            message = f"'{key}' is a list of ids (or null to keep the agent's)."
            errors.append(FieldError(f"/{key}", message, "type"))
    if errors:
        raise InvalidInput(errors)
    lists = {key: list(body[key]) for key in COPY_LISTS if body.get(key) is not None}
    return body.get("name"), body.get("folder_id"), lists


_MAX_NAME = 200
_COPY_TRIES = 1000


async def _free_name(conn: Conn, key: str, name: str) -> str:
    """``name`` when free, else the first free of ``<name>-copy``, ``<name>-copy-2``, ... (cut
    to fit the name's length). Taken: held in the folder, or a built-in's name (everyone
    sees the built-ins, so a copy named like one would make that name ambiguous)."""
    candidates = [name] + [
        name[: _MAX_NAME - len(suffix)] + suffix
        for suffix in ("-copy", *(f"-copy-{n}" for n in range(2, _COPY_TRIES + 1)))
    ]
    taken = await repo.names_taken(conn, key, name[: _MAX_NAME - len("-copy-1000")])
    for candidate in candidates:
        if candidate not in taken:
            return candidate
    raise Conflict(
        f"'{name}' and its first {_COPY_TRIES} copy names are taken in that folder: give the "
        'copy a name ({"name": "..."}).'
    )


def _patched(current: dict[str, Any], patch: dict[str, Any]) -> Any:
    """Apply the patch; read-only fields in the patch are kept so validation reports them."""
    merged = merge_patch(current, patch)
    for key, value in patch.items():
        if key == "markings" or key in SERVER_OWNED_FIELDS:
            merged[key] = value
    return merged


def _indexed(spec: AgentSpec) -> dict[str, Any]:
    return {
        "name": spec.name,
        "folder_key": repo.folder_key(spec.folder_id, spec.collection_id),
        "folder_id": spec.folder_id,
        "collection_id": spec.collection_id,
        "alias": spec.alias,
        "description": spec.description,
        "type": spec.type,
        "mode": spec.mode,
        "input_mode": spec.input_mode,
    }


def _name_conflict(spec: AgentSpec, holder: repo.AgentRow | None, who: Principal) -> Conflict:
    return sharing.name_conflict("agent", spec.name, spec.folder_id, holder, who)
