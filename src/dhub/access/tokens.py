"""API tokens: random secrets shown once, stored as SHA-256 digests."""

from __future__ import annotations

import hashlib
import hmac
import secrets

from dhub.access.principal import Principal
from dhub.domain.errors import Unauthenticated
from dhub.domain.ids import now_ms
from dhub.store.db import Database
from dhub.store.users import find_token

PREFIX = "dhub_"


def generate_token() -> str:
    return PREFIX + secrets.token_urlsafe(32)


def hash_token(token: str) -> str:
    # Tokens carry 256 random bits, so a fast hash is enough (no password stretching needed).
    return hashlib.sha256(token.encode()).hexdigest()


async def authenticate(db: Database, authorization: str | None) -> Principal:
    """The principal for an ``Authorization: Bearer <token>`` header, or Unauthenticated."""
    if not authorization:
        raise Unauthenticated("Missing 'Authorization: Bearer <token>' header.")
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Unauthenticated("The Authorization header must be 'Bearer <token>'.")
    digest = hash_token(token.strip())
    async with db.read() as conn:
        owner = await find_token(conn, digest)
    if owner is None or not hmac.compare_digest(owner.token_hash, digest):
        raise Unauthenticated("The token is not valid.")
    if owner.revoked_at is not None:
        raise Unauthenticated("The token was revoked.")
    if owner.expires_at is not None and owner.expires_at <= now_ms():
        raise Unauthenticated("The token has expired.")
    return Principal(user_id=owner.user_id, is_admin=owner.is_admin)
