"""The built-in agents: agent documents shipped in the package (``dhub/builtins/*.yaml``),
installed and upgraded with dhub (docs/api.md, Built-in agents).

At every start (``open_runtime``, after migrating), each built-in is inserted when missing and
stored as a new version when its document changed, so runs of older versions keep working;
one an earlier dhub shipped and this one does not is deleted, as if its owner had.
Built-ins have stable ids (``agent.builtin-<file name>``), no owners, ``is_builtin`` set and
names of their own (``store.agents.BUILTIN_FOLDER_KEY``): they never take or block a name in
anyone's folder. Everyone may read and run them and no one may change them (access/policy.py);
users change a copy (``AgentService.copy``), which this never touches.
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass
from importlib import resources
from typing import Any, Literal

import yaml
from sqlalchemy.exc import IntegrityError

from dhub.domain.agent import AgentSpec
from dhub.domain.ids import now_ms
from dhub.engine.validate import validate_agent_document
from dhub.services.agents import dump_spec
from dhub.store import agents as repo
from dhub.store import audit
from dhub.store import sharing as shares
from dhub.store.db import Conn, Database

log = logging.getLogger("dhub.builtins")

PACKAGE = "dhub.builtins"
ID_PREFIX = "agent.builtin-"
AUTHOR = "dhub"  # created_by of built-ins and their versions: the platform, not a principal

Outcome = Literal["installed", "upgraded", "unchanged", "blocked", "retired"]


@dataclass(frozen=True, slots=True)
class Builtin:
    id: str
    spec: AgentSpec
    document: str  # as every document is stored (dump_spec)


def shipped() -> list[Builtin]:
    """The built-ins of this dhub, by id; a document that does not validate is a bug in dhub,
    so it raises (tests/integration/test_builtins.py loads them all)."""
    return list(_read_shipped())


@functools.cache  # package data: read and validated once per process, not at every start
def _read_shipped() -> tuple[Builtin, ...]:
    found = []
    for entry in sorted(resources.files(PACKAGE).iterdir(), key=lambda e: e.name):
        if not entry.name.endswith(".yaml"):
            continue
        doc = yaml.safe_load(entry.read_text(encoding="utf-8"))
        spec = validate_agent_document(doc)
        found.append(Builtin(ID_PREFIX + entry.name.removesuffix(".yaml"), spec, dump_spec(spec)))
    return tuple(found)


async def install_builtins(db: Database, builtins: list[Builtin] | None = None) -> dict[str, str]:
    """Insert each built-in that is missing and store a new version of each that changed; what
    happened to each, by id. Several processes may start at once: one writes, the others
    find the work done."""
    outcomes: dict[str, str] = {}
    for builtin in shipped() if builtins is None else builtins:
        try:
            outcome = await _install_one(db, builtin)
        except IntegrityError:  # another process inserted it meanwhile: look again
            outcome = await _again(db, builtin)
        outcomes[builtin.id] = outcome
        if outcome != "unchanged":
            log.info("built-in agent %s %s", builtin.id, outcome)
    for agent_id in await _retire_others(db, set(outcomes)):
        outcomes[agent_id] = "retired"
        log.info("built-in agent %s retired: this dhub no longer ships it", agent_id)
    return outcomes


async def _retire_others(db: Database, shipped_ids: set[str]) -> list[str]:
    """Delete the built-ins an earlier dhub shipped and this one does not, as an owner deletes
    an agent: its runs go with it from view, users' copies are their own and stay, and an agent
    naming it as a role gets the one unreachable message."""
    retired = []
    async with db.write() as conn:
        for agent_id in await repo.builtin_ids(conn):
            if agent_id in shipped_ids:
                continue
            found = await repo.get_agent(conn, agent_id, [])
            if found is None:  # another process retired it meanwhile
                continue
            await repo.delete_agent(conn, agent_id)
            await audit.record(conn, AUTHOR, "agent.builtin_retire", agent_id, found.record.version)
            retired.append(agent_id)
    return retired


async def _again(db: Database, builtin: Builtin) -> Outcome:
    """A second try; should its name still be taken (only another built-in may hold one, but
    a database written by hand may differ), the server starts without it, saying why."""
    try:
        return await _install_one(db, builtin)
    except IntegrityError:
        log.error(
            "built-in agent %s (%s) was not installed: its name is taken among the built-ins",
            builtin.id,
            builtin.spec.name,
        )
        return "blocked"


async def _install_one(db: Database, builtin: Builtin) -> Outcome:
    async with db.write() as conn:
        found = await repo.get_agent(conn, builtin.id, [])  # locks its row while it is written
        if found is None:
            await _insert(conn, builtin)
            return "installed"
        if found.record.document == builtin.document:
            return "unchanged"
        await _upgrade(conn, builtin, found.record)
        return "upgraded"


async def _insert(conn: Conn, builtin: Builtin) -> None:
    now = now_ms()
    await repo.insert_agent(
        conn,
        {
            **_indexed(builtin.spec),
            "id": builtin.id,
            "version": 1,
            "document": builtin.document,
            "is_builtin": True,
            "created_by": AUTHOR,
            "created_at": now,
            "updated_at": now,
        },
    )
    await repo.insert_version(conn, builtin.id, 1, builtin.document, AUTHOR, now)
    await repo.set_tags(conn, builtin.id, builtin.spec.tags or [])
    await shares.bump_epoch(conn)  # cached reaches (sharing.ReachCache) now miss it
    await audit.record(conn, AUTHOR, "agent.builtin_install", builtin.id, None, 1)


async def _upgrade(conn: Conn, builtin: Builtin, record: repo.AgentRecord) -> None:
    now, version = now_ms(), record.version + 1
    values = {**_indexed(builtin.spec), "version": version, "document": builtin.document}
    await repo.update_agent(conn, builtin.id, {**values, "updated_at": now})
    await repo.insert_version(conn, builtin.id, version, builtin.document, AUTHOR, now)
    await repo.set_tags(conn, builtin.id, builtin.spec.tags or [])
    await audit.record(conn, AUTHOR, "agent.builtin_upgrade", builtin.id, record.version, version)


def _indexed(spec: AgentSpec) -> dict[str, Any]:
    """The row's indexed columns, as services/agents.py writes them, but for the built-ins'
    own names (``BUILTIN_FOLDER_KEY``): a built-in sits in no folder."""
    return {
        "name": spec.name,
        "folder_key": repo.BUILTIN_FOLDER_KEY,
        "folder_id": None,
        "collection_id": None,
        "alias": spec.alias,
        "description": spec.description,
        "type": spec.type,
        "mode": spec.mode,
        "input_mode": spec.input_mode,
    }
