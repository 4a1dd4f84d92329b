"""API tokens: random secrets shown once, stored as SHA-256 digests."""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass

from dhub.access.principal import PUBLIC, Principal
from dhub.domain.errors import Unauthenticated
from dhub.domain.ids import now_ms
from dhub.store.db import Conn, Database
from dhub.store.principals import get_user, groups_of, held_markings
from dhub.store.users import find_token

PREFIX = "dhub_"


def generate_token() -> str:
    return PREFIX + secrets.token_urlsafe(32)


def hash_token(token: str) -> str:
    # Tokens carry 256 random bits, so a fast hash is enough (no password stretching needed).
    return hashlib.sha256(token.encode()).hexdigest()


def bearer_digest(authorization: str | None) -> str:
    """The digest of the token in an ``Authorization: Bearer <token>`` header."""
    if not authorization:
        raise Unauthenticated(
            "This endpoint needs 'Authorization: Bearer <token>'; the first token is in "
            "admin.token in the server's data directory."
        )
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Unauthenticated("The Authorization header must be 'Bearer <token>'.")
    return hash_token(token.strip())


async def resolve(conn: Conn, user_id: str, is_admin: bool) -> Principal:
    """The principal with its groups (through nesting) and the markings it holds."""
    member_of = await groups_of(conn, [user_id, PUBLIC])
    held = await held_markings(conn, [user_id, PUBLIC, *member_of])
    return Principal(user_id, is_admin, frozenset(member_of), frozenset(held))


async def principal_of(conn: Conn, user_id: str) -> Principal:
    """The principal ``user_id`` is now, for acting on their behalf without a request (a run
    resolving its references at start or resume). A user who no longer exists is nobody:
    no groups, no markings, no admin role."""
    user = await get_user(conn, user_id)
    if user is None:
        return Principal(user_id)
    return await resolve(conn, user_id, user.is_admin)


@dataclass(frozen=True, slots=True)
class _Verified:
    principal: Principal
    expires_at: int | None  # the token's own expiry, unix ms
    fresh_until: float  # when this process must look the token up again (monotonic s)


class Authenticator:
    """Verifies bearer tokens against the store.

    A verified token is remembered for ``ttl`` seconds, so a busy client costs one hash per
    request instead of one database read. The price is bounded staleness: a token revoked in
    another process keeps working here for at most ``ttl`` seconds (``forget`` makes it
    immediate in this one). The token's own expiry is checked on every request.
    """

    def __init__(
        self,
        db: Database,
        ttl: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
        max_entries: int = 10_000,
    ) -> None:
        self._db = db
        self._ttl = ttl
        self._clock = clock
        self._max_entries = max_entries
        self._verified: dict[str, _Verified] = {}

    async def authenticate(self, authorization: str | None) -> Principal:
        digest = bearer_digest(authorization)
        cached = self._verified.get(digest)
        if cached is None or cached.fresh_until <= self._clock():
            cached = await self._lookup(digest)
        if cached.expires_at is not None and cached.expires_at <= now_ms():
            self._verified.pop(digest, None)
            raise Unauthenticated("The token has expired.")
        return cached.principal

    async def _lookup(self, digest: str) -> _Verified:
        self._verified.pop(digest, None)
        async with self._db.read(snapshot=True) as conn:
            owner = await find_token(conn, digest)
            if owner is None or not hmac.compare_digest(owner.token_hash, digest):
                raise Unauthenticated("The token is not valid.")
            if owner.revoked_at is not None:
                raise Unauthenticated("The token was revoked.")
            principal = await resolve(conn, owner.user_id, owner.is_admin)
        verified = _Verified(principal, owner.expires_at, self._clock() + self._ttl)
        if len(self._verified) >= self._max_entries:
            self._verified.clear()  # simple bound; entries are cheap to rebuild
        self._verified[digest] = verified
        return verified

    def forget(self, token_hash: str | None = None) -> None:
        # Also after membership or marking changes (forget all): principals carry both.
        """Drop one remembered token (after revoking it), or all of them."""
        if token_hash is None:
            self._verified.clear()
        else:
            self._verified.pop(token_hash, None)
