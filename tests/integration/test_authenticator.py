"""Bearer-token verification against the real store, with a controllable clock."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from dhub.access.tokens import Authenticator, generate_token, hash_token
from dhub.domain.errors import Unauthenticated
from dhub.domain.ids import now_ms
from dhub.store import users
from dhub.store.db import Database


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
async def db(database_url: str) -> AsyncIterator[Database]:
    database = Database(database_url)
    await database.migrate()
    async with database.write() as conn:
        await users.insert_user(
            conn, {"id": "user.ann", "display_name": "Ann", "is_admin": False, "created_at": 1}
        )
    try:
        yield database
    finally:
        await database.dispose()


async def add_token(db: Database, token_id: str, expires_at: int | None = None) -> str:
    token = generate_token()
    async with db.write() as conn:
        await users.insert_token(
            conn,
            {
                "id": token_id,
                "user_id": "user.ann",
                "name": token_id,
                "token_hash": hash_token(token),
                "created_at": now_ms(),
                "expires_at": expires_at,
            },
        )
    return token


async def revoke(db: Database, token_id: str) -> str:
    async with db.write() as conn:
        digest = await users.revoke_token(conn, token_id, now_ms())
    assert digest is not None
    return digest


async def test_a_revoked_token_stops_working_within_the_ttl(db: Database) -> None:
    clock = Clock()
    auth = Authenticator(db, ttl=1.0, clock=clock)
    token = await add_token(db, "token.1")
    principal = await auth.authenticate(f"Bearer {token}")
    assert (principal.user_id, principal.is_admin) == ("user.ann", False)

    await revoke(db, "token.1")  # e.g. by another API process
    assert (await auth.authenticate(f"Bearer {token}")).user_id == "user.ann"  # remembered
    clock.now += 1.0
    with pytest.raises(Unauthenticated, match="revoked"):
        await auth.authenticate(f"Bearer {token}")


async def test_forget_makes_revocation_immediate(db: Database) -> None:
    auth = Authenticator(db, ttl=3600, clock=Clock())
    token = await add_token(db, "token.2")
    await auth.authenticate(f"Bearer {token}")
    auth.forget(await revoke(db, "token.2"))
    with pytest.raises(Unauthenticated, match="revoked"):
        await auth.authenticate(f"Bearer {token}")


async def test_expired_and_unknown_tokens(db: Database) -> None:
    auth = Authenticator(db)
    expired = await add_token(db, "token.3", expires_at=now_ms() - 1)
    with pytest.raises(Unauthenticated, match="expired"):
        await auth.authenticate(f"Bearer {expired}")
    with pytest.raises(Unauthenticated, match="not valid"):
        await auth.authenticate(f"Bearer {generate_token()}")
    for header in (None, "", "Basic abc", "Bearer ", "Bearer"):
        with pytest.raises(Unauthenticated):
            await auth.authenticate(header)


async def test_a_remembered_token_still_expires_on_time(db: Database) -> None:
    auth = Authenticator(db, ttl=3600, clock=Clock())
    token = await add_token(db, "token.4", expires_at=now_ms() + 300)
    await auth.authenticate(f"Bearer {token}")
    await asyncio.sleep(0.35)  # past the token's expiry, well within the ttl
    with pytest.raises(Unauthenticated, match="expired"):
        await auth.authenticate(f"Bearer {token}")
