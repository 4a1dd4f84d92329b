"""Users and API tokens."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, insert, select
from sqlalchemy.ext.asyncio import AsyncConnection

from dhub.store.tables import tokens, users


@dataclass(frozen=True, slots=True)
class TokenOwner:
    user_id: str
    is_admin: bool
    token_hash: str
    expires_at: int | None
    revoked_at: int | None


async def count_users(conn: AsyncConnection) -> int:
    return int((await conn.execute(select(func.count()).select_from(users))).scalar_one())


async def insert_user(conn: AsyncConnection, values: dict[str, Any]) -> None:
    await conn.execute(insert(users).values(values))


async def user_exists(conn: AsyncConnection, user_id: str) -> bool:
    return (await conn.execute(select(users.c.id).where(users.c.id == user_id))).first() is not None


async def insert_token(conn: AsyncConnection, values: dict[str, Any]) -> None:
    await conn.execute(insert(tokens).values(values))


async def token_exists(conn: AsyncConnection, token_hash: str) -> bool:
    stmt = select(tokens.c.id).where(tokens.c.token_hash == token_hash)
    return (await conn.execute(stmt)).first() is not None


async def find_token(conn: AsyncConnection, token_hash: str) -> TokenOwner | None:
    stmt = (
        select(
            users.c.id,
            users.c.is_admin,
            tokens.c.token_hash,
            tokens.c.expires_at,
            tokens.c.revoked_at,
        )
        .select_from(tokens.join(users, users.c.id == tokens.c.user_id))
        .where(tokens.c.token_hash == token_hash)
    )
    row = (await conn.execute(stmt)).first()
    return TokenOwner(*row) if row else None
