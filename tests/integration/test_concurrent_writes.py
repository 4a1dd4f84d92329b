"""Concurrent changes to one agent queue rather than fail (row lock on PostgreSQL, one writer on
SQLite): no 500s from delete-then-insert replacements."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from dhub.access.bootstrap import ADMIN_ID, ensure_admin
from dhub.access.principal import Principal
from dhub.services.agents import AgentService
from dhub.store.db import Database
from tests.conftest import FIXTURES, load_json


@pytest.fixture
async def service(database_url: str, tmp_path: Path) -> AsyncIterator[AgentService]:
    db = Database(database_url)
    await db.migrate()
    await ensure_admin(db, tmp_path, "tok")
    try:
        yield AgentService(db)
    finally:
        await db.dispose()


async def test_concurrent_owner_and_marking_changes(service: AgentService) -> None:
    admin = Principal(ADMIN_ID, is_admin=True)
    agent = await service.create(admin, load_json(FIXTURES / "valid" / "workflow_triage.json"))
    owner_sets = [[ADMIN_ID], [ADMIN_ID, "public.all"]] * 6
    await asyncio.gather(
        *(service.patch(admin, agent.record.id, {"owners": owners}) for owners in owner_sets)
    )
    final = await service.get(admin, agent.record.id)
    assert {o["id"] for o in final.owners} in ({ADMIN_ID}, {ADMIN_ID, "public.all"})
