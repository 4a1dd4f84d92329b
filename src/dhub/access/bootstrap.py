"""First start of a data directory: the admin user and its token."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from dhub.access.tokens import generate_token, hash_token
from dhub.domain.ids import new_id, now_ms
from dhub.store.db import Database
from dhub.store.users import count_users, insert_token, insert_user, token_exists

ADMIN_ID = "user.admin"


@dataclass(frozen=True)
class Bootstrap:
    fresh: bool  # the database had no users: a new installation
    generated_token: str | None  # to print once; None when DHUB_ADMIN_TOKEN gave the token


async def ensure_admin(db: Database, data_dir: Path, admin_token: str | None) -> Bootstrap:
    """Create ``user.admin`` on an empty database, with a generated token unless
    DHUB_ADMIN_TOKEN gives one (registered on any start, so rotating the variable works)."""
    async with db.write() as conn:
        fresh = await count_users(conn) == 0
        if fresh:
            await insert_user(
                conn,
                {
                    "id": ADMIN_ID,
                    "display_name": "Administrator",
                    "is_admin": True,
                    "created_at": now_ms(),
                },
            )
        generated = None
        token = admin_token
        if token is None and fresh:
            token = generated = generate_token()
        if token is not None and not await token_exists(conn, hash_token(token)):
            await insert_token(
                conn,
                {
                    "id": new_id("token"),
                    "user_id": ADMIN_ID,
                    "name": "admin (bootstrap)",
                    "token_hash": hash_token(token),
                    "created_at": now_ms(),
                },
            )
    if generated is not None:
        write_secret(data_dir / "admin.token", generated)
    return Bootstrap(fresh=fresh, generated_token=generated)


def write_secret(path: Path, secret: str) -> None:
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(secret + "\n")
    os.chmod(path, 0o600)
