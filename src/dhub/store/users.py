"""Users and API tokens."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import bindparam, func, insert, select, update

from dhub.store.db import Conn
from dhub.store.tables import tokens, users


@dataclass(frozen=True, slots=True)
class TokenOwner:
    user_id: str
    is_admin: bool
    token_hash: str
    expires_at: int | None
    revoked_at: int | None


async def count_users(conn: Conn) -> int:
    return int((await conn.execute(select(func.count()).select_from(users))).scalar())


async def insert_user(conn: Conn, values: dict[str, Any]) -> None:
    await conn.execute(insert(users).values(values))


async def insert_token(conn: Conn, values: dict[str, Any]) -> None:
    await conn.execute(insert(tokens).values(values))


async def token_exists(conn: Conn, token_hash: str) -> bool:
    stmt = select(tokens.c.id).where(tokens.c.token_hash == token_hash)
    return (await conn.execute(stmt)).first() is not None


# Built once: runs on every request, and building a select costs more than running it.
_FIND_TOKEN = (
    select(
        users.c.id, users.c.is_admin, tokens.c.token_hash, tokens.c.expires_at, tokens.c.revoked_at
    )
    .select_from(tokens.join(users, users.c.id == tokens.c.user_id))
    .where(tokens.c.token_hash == bindparam("token_hash"))
)


async def find_token(conn: Conn, token_hash: str) -> TokenOwner | None:
    row = (await conn.execute(_FIND_TOKEN, {"token_hash": token_hash})).first()
    return TokenOwner(*row) if row else None


async def revoke_token(conn: Conn, token_id: str, at: int) -> str | None:
    """Mark the token revoked; its digest (for caches to forget), or None if there is none."""
    row = (await conn.execute(select(tokens.c.token_hash).where(tokens.c.id == token_id))).first()
    if row is None:
        return None
    await conn.execute(update(tokens).where(tokens.c.id == token_id).values(revoked_at=at))
    digest: str = row[0]
    return digest


@dataclass(frozen=True, slots=True)
class TokenRecord:
    id: str
    user_id: str
    name: str
    created_at: int
    expires_at: int | None
    revoked_at: int | None


_TOKEN_COLUMNS = (
    tokens.c.id,
    tokens.c.user_id,
    tokens.c.name,
    tokens.c.created_at,
    tokens.c.expires_at,
    tokens.c.revoked_at,
)


async def list_tokens(conn: Conn, user_id: str | None) -> list[TokenRecord]:
    """Tokens (never their secrets) of one user, or of everyone; newest first."""
    stmt = select(*_TOKEN_COLUMNS).order_by(tokens.c.created_at.desc(), tokens.c.id)
    if user_id is not None:
        stmt = stmt.where(tokens.c.user_id == user_id)
    return [TokenRecord(*r) for r in await conn.execute(stmt)]


async def get_token(conn: Conn, token_id: str) -> TokenRecord | None:
    row = (await conn.execute(select(*_TOKEN_COLUMNS).where(tokens.c.id == token_id))).first()
    return TokenRecord(*row) if row else None
