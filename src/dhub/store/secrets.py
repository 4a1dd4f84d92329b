"""Secrets' encrypted values (store/tables.py ``secret_values``): written, read and deleted in
the caller's transaction. The store never sees a plaintext: services/secrets.py encrypts and
decrypts."""

from __future__ import annotations

from sqlalchemy import delete, insert, select, update

from dhub.store.db import Conn
from dhub.store.tables import secret_values as values


async def put(conn: Conn, secret_id: str, ciphertext: str, user_id: str, now: int) -> None:
    """Store (or replace) the secret's value."""
    changed = await conn.execute(
        update(values)
        .where(values.c.secret_id == secret_id)
        .values(ciphertext=ciphertext, updated_by=user_id, updated_at=now)
    )
    if not changed.rowcount:
        await conn.execute(
            insert(values).values(
                secret_id=secret_id, ciphertext=ciphertext, updated_by=user_id, updated_at=now
            )
        )


async def get(conn: Conn, secret_id: str) -> str | None:
    rows = await conn.execute(select(values.c.ciphertext).where(values.c.secret_id == secret_id))
    return next((str(r[0]) for r in rows), None)


async def drop(conn: Conn, secret_id: str) -> None:
    """Delete the value (explicitly: foreign keys may not be enforced)."""
    await conn.execute(delete(values).where(values.c.secret_id == secret_id))
