"""The store's records and filters that routes handle, and its verdict on which errors mean
the database takes no connections, named here: the API reaches the store only through services
(issue 24; an import-linter contract in pyproject.toml holds it)."""

from __future__ import annotations

from dhub.store.agents import AgentFilter
from dhub.store.db import Database
from dhub.store.resources import ResourceFilter
from dhub.store.runs import CommandRecord, EventRecord, RunRecord
from dhub.store.triggers import TriggerEvent
from dhub.store.unavailable import DATABASE_ERRORS
from dhub.store.unavailable import unavailable as database_unavailable

__all__ = [
    "DATABASE_ERRORS",
    "AgentFilter",
    "CommandRecord",
    "Database",
    "EventRecord",
    "ResourceFilter",
    "RunRecord",
    "TriggerEvent",
    "database_unavailable",
]
