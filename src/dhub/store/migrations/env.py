"""Alembic environment: dhub always passes the connection in (see dhub.store.migrate)."""

from __future__ import annotations

from alembic import context

from dhub.store.tables import metadata

connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError(
        "Run dhub's migrations through dhub (they run on server start-up), not the alembic CLI."
    )
context.configure(connection=connection, target_metadata=metadata, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
