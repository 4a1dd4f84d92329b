"""Users, groups, markings, tokens and the audit log: the identity side of the access model.

Mutations are admin-only (except a user's own tokens and profile) and every one is audited in
its own transaction. Changes to memberships make every cached principal stale, so they ask
the Authenticator to forget what it verified.
"""

from __future__ import annotations

import re
from dataclasses import asdict
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, EmailStr, Field, ValidationError

from dhub.access.principal import Principal
from dhub.access.tokens import Authenticator, generate_token, hash_token
from dhub.domain.bounds import ProfileJson, Url
from dhub.domain.errors import Conflict, FieldError, Forbidden, InvalidInput, NotFound
from dhub.domain.ids import new_id, now_ms
from dhub.domain.pointers import from_validation_error
from dhub.services import placement
from dhub.store import audit
from dhub.store import principals as repo
from dhub.store import sharing as shares
from dhub.store import users as user_repo
from dhub.store.db import Conn, Database

_SLUG = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class NewUser(_Body):
    name: str
    display_name: str = Field(min_length=1, max_length=200)
    email: EmailStr | None = None
    avatar_url: Url | None = None
    avatar_config: ProfileJson | None = None
    is_admin: bool = False


class UserChanges(_Body):
    display_name: str | None = Field(default=None, min_length=1, max_length=200)
    email: EmailStr | None = None
    avatar_url: Url | None = None
    avatar_config: ProfileJson | None = None
    is_admin: bool | None = None


class NewGroup(_Body):
    name: str
    display_name: str = Field(min_length=1, max_length=200)


class GroupChanges(_Body):
    display_name: str = Field(min_length=1, max_length=200)


class NewMarking(_Body):
    name: str
    description: str = Field(default="", max_length=2000)


class Member(_Body):
    principal_id: str


class NewToken(_Body):
    name: str = Field(min_length=1, max_length=200)
    expires_at: int | None = Field(default=None, description="Unix ms; none: never expires")


_B = TypeVar("_B", bound=_Body)


def parse(model: type[_B], body: Any) -> _B:
    try:
        return model.model_validate(body)
    except ValidationError as exc:
        raise InvalidInput(from_validation_error(exc, body)) from exc


def _slug(name: str, prefix: str) -> str:
    if not _SLUG.match(name):
        raise InvalidInput(
            [
                FieldError(
                    "/name",
                    f"'{name}' is not a valid name: use 1-63 lowercase letters, digits, '-' or "
                    f"'_', starting with a letter or digit (the id becomes '{prefix}.<name>').",
                    "invalid_name",
                )
            ]
        )
    return f"{prefix}.{name}"


async def _release_resources(conn: Conn, principal_id: str) -> None:
    """Drop a principal that is being deleted from owners and grants; refuse when it is the
    last owner of something, which would leave that resource reachable by admins only."""
    orphans = await shares.solely_owned_by(conn, principal_id)
    if orphans:
        raise Conflict(
            f"'{principal_id}' is the only owner of {', '.join(orphans)}"
            f"{' and more' if len(orphans) == 5 else ''}: give those another owner first "
            '(PATCH {"owners": [...]}), or delete them.'
        )
    await shares.forget_principal(conn, principal_id)


def require_admin(who: Principal) -> None:
    if not who.is_admin:
        raise Forbidden("This needs an admin.")


class PrincipalService:
    def __init__(self, db: Database, auth: Authenticator) -> None:
        self.db = db
        self.auth = auth

    # -- users ----------------------------------------------------------------------------

    async def create_user(self, who: Principal, body: Any) -> dict[str, Any]:
        require_admin(who)
        new = parse(NewUser, body)
        user_id = _slug(new.name, "user")
        values = {**new.model_dump(exclude={"name"}), "id": user_id, "created_at": now_ms()}
        async with self.db.write() as conn:
            if await repo.get_user(conn, user_id) is not None:
                raise Conflict(f"The user '{user_id}' already exists.")
            await user_repo.insert_user(conn, values)
            await audit.record(conn, who.user_id, "user.create", user_id, after=values)
            await placement.home_of(conn, user_id)  # a new user starts with a home folder
            created = await repo.get_user(conn, user_id)
        assert created is not None
        return asdict(created)

    async def list_users(self, who: Principal) -> list[dict[str, Any]]:
        async with self.db.read() as conn:
            return [asdict(u) for u in await repo.list_users(conn)]

    async def get_user(self, who: Principal, user_id: str) -> dict[str, Any]:
        async with self.db.read() as conn:
            return asdict(await self._user(conn, user_id))

    async def update_user(self, who: Principal, user_id: str, body: Any) -> dict[str, Any]:
        changes = parse(UserChanges, body).model_dump(exclude_unset=True)
        required = [k for k in ("display_name", "is_admin") if k in changes and changes[k] is None]
        if required:
            raise InvalidInput(
                [
                    FieldError(f"/{k}", f"'{k}' cannot be null: give a value.", "null")
                    for k in required
                ]
            )
        if not who.is_admin and (user_id != who.user_id or "is_admin" in changes):
            raise Forbidden("Only an admin may change another user, or who is an admin.")
        async with self.db.write() as conn:
            before = await self._user(conn, user_id)
            if changes:
                await repo.update_user(conn, user_id, changes)
                await audit.record(
                    conn, who.user_id, "user.update", user_id, asdict(before), changes
                )
            after = await self._user(conn, user_id)
        self.auth.forget()  # is_admin may have changed
        return asdict(after)

    async def delete_user(self, who: Principal, user_id: str) -> None:
        require_admin(who)
        if user_id == who.user_id:
            raise Conflict("You cannot delete yourself; ask another admin.")
        async with self.db.write() as conn:
            await self._user(conn, user_id)
            await placement.drop_home(conn, user_id)
            await _release_resources(conn, user_id)
            await repo.delete_user(conn, user_id)
            await audit.record(conn, who.user_id, "user.delete", user_id)
        self.auth.forget()

    async def _user(self, conn: Conn, user_id: str) -> repo.UserRecord:
        found = await repo.get_user(conn, user_id)
        if found is None:
            raise NotFound(f"No user with id '{user_id}'.")
        return found

    async def me(self, who: Principal) -> dict[str, Any]:
        async with self.db.read() as conn:
            user = await self._user(conn, who.user_id)
        return {
            **asdict(user),
            "groups": sorted(who.groups),
            "markings": sorted(who.markings),
        }

    # -- groups ---------------------------------------------------------------------------

    async def create_group(self, who: Principal, body: Any) -> dict[str, Any]:
        require_admin(who)
        new = parse(NewGroup, body)
        group_id = _slug(new.name, "group")
        values = {"id": group_id, "display_name": new.display_name, "created_at": now_ms()}
        async with self.db.write() as conn:
            if await repo.get_group(conn, group_id) is not None:
                raise Conflict(f"The group '{group_id}' already exists.")
            await repo.insert_group(conn, values)
            await audit.record(conn, who.user_id, "group.create", group_id, after=values)
        return {**values, "members": []}

    async def list_groups(self, who: Principal) -> list[dict[str, Any]]:
        async with self.db.read() as conn:
            return [asdict(g) for g in await repo.list_groups(conn)]

    async def get_group(self, who: Principal, group_id: str) -> dict[str, Any]:
        async with self.db.read(snapshot=True) as conn:
            group = await self._group(conn, group_id)
            members = await repo.members_of(conn, group_id)
        return {**asdict(group), "members": members}

    async def update_group(self, who: Principal, group_id: str, body: Any) -> dict[str, Any]:
        require_admin(who)
        changes = parse(GroupChanges, body)
        async with self.db.write() as conn:
            before = await self._group(conn, group_id)
            await repo.update_group(conn, group_id, {"display_name": changes.display_name})
            await audit.record(
                conn, who.user_id, "group.update", group_id, asdict(before), changes.model_dump()
            )
        return await self.get_group(who, group_id)

    async def delete_group(self, who: Principal, group_id: str) -> None:
        require_admin(who)
        async with self.db.write() as conn:
            await self._group(conn, group_id)
            await _release_resources(conn, group_id)
            await repo.delete_group(conn, group_id)
            await audit.record(conn, who.user_id, "group.delete", group_id)
        self.auth.forget()

    async def add_member(self, who: Principal, group_id: str, body: Any) -> dict[str, Any]:
        require_admin(who)
        member = parse(Member, body).principal_id
        async with self.db.write() as conn:
            await self._group(conn, group_id)
            await self._principal_exists(conn, member)
            if member == group_id or member in await repo.groups_of(conn, [group_id]):
                raise Conflict(
                    f"Adding '{member}' to '{group_id}' would make a cycle: '{group_id}' is "
                    f"already a member of '{member}' (directly or through other groups)."
                )
            if await repo.add_member(conn, group_id, member):
                await audit.record(conn, who.user_id, "group.member.add", group_id, after=member)
        self.auth.forget()
        return await self.get_group(who, group_id)

    async def remove_member(self, who: Principal, group_id: str, member: str) -> None:
        require_admin(who)
        async with self.db.write() as conn:
            await self._group(conn, group_id)
            if not await repo.remove_member(conn, group_id, member):
                raise NotFound(f"'{member}' is not a member of '{group_id}'.")
            await audit.record(conn, who.user_id, "group.member.remove", group_id, before=member)
        self.auth.forget()

    async def _group(self, conn: Conn, group_id: str) -> repo.GroupRecord:
        found = await repo.get_group(conn, group_id)
        if found is None:
            raise NotFound(f"No group with id '{group_id}'.")
        return found

    async def _principal_exists(self, conn: Conn, principal_id: str) -> None:
        if not await repo.principal_exists(conn, principal_id):
            raise InvalidInput(
                [
                    FieldError(
                        "/principal_id",
                        f"No user or group has the id '{principal_id}': use 'user.<name>', "
                        "'group.<name>' or 'public.all'.",
                        "unknown_principal",
                    )
                ]
            )

    # -- markings -------------------------------------------------------------------------

    async def create_marking(self, who: Principal, body: Any) -> dict[str, Any]:
        require_admin(who)
        new = parse(NewMarking, body)
        marking_id = _slug(new.name, "marking")
        values = {
            "id": marking_id,
            "name": new.name,
            "description": new.description,
            "created_by": who.user_id,
            "created_at": now_ms(),
        }
        async with self.db.write() as conn:
            if await repo.get_marking(conn, marking_id) is not None:
                raise Conflict(f"The marking '{marking_id}' already exists.")
            await repo.insert_marking(conn, values)
            await audit.record(conn, who.user_id, "marking.create", marking_id, after=values)
        return {**values, "members": []}

    async def list_markings(self, who: Principal) -> list[dict[str, Any]]:
        async with self.db.read() as conn:
            found = await repo.list_markings(conn)
        # Admins see every marking; others the ones they hold (names can be sensitive).
        return [asdict(m) for m in found if who.is_admin or m.id in who.markings]

    async def get_marking(self, who: Principal, marking_id: str) -> dict[str, Any]:
        async with self.db.read(snapshot=True) as conn:
            marking = await repo.get_marking(conn, marking_id)
            if marking is None or not (who.is_admin or marking_id in who.markings):
                raise NotFound(f"No marking with id '{marking_id}'.")
            members = await repo.marking_members_of(conn, marking_id)
        return {**asdict(marking), "members": members}

    async def add_marking_member(
        self, who: Principal, marking_id: str, body: Any
    ) -> dict[str, Any]:
        require_admin(who)
        member = parse(Member, body).principal_id
        async with self.db.write() as conn:
            if await repo.get_marking(conn, marking_id) is None:
                raise NotFound(f"No marking with id '{marking_id}'.")
            await self._principal_exists(conn, member)
            if await repo.add_marking_member(conn, marking_id, member):
                await audit.record(
                    conn, who.user_id, "marking.member.add", marking_id, after=member
                )
        self.auth.forget()
        return await self.get_marking(who, marking_id)

    async def remove_marking_member(self, who: Principal, marking_id: str, member: str) -> None:
        require_admin(who)
        async with self.db.write() as conn:
            if not await repo.remove_marking_member(conn, marking_id, member):
                raise NotFound(f"'{member}' does not hold the marking '{marking_id}'.")
            await audit.record(
                conn, who.user_id, "marking.member.remove", marking_id, before=member
            )
        self.auth.forget()

    # -- tokens ---------------------------------------------------------------------------

    async def create_token(
        self, who: Principal, body: Any, user_id: str | None = None
    ) -> dict[str, Any]:
        """A new token for the caller, or (admins) for ``user_id``. The secret is returned
        here only; the server keeps its digest."""
        owner = user_id or who.user_id
        if owner != who.user_id:
            require_admin(who)
        new = parse(NewToken, body)
        if new.expires_at is not None and new.expires_at <= now_ms():
            raise InvalidInput(
                [FieldError("/expires_at", "'expires_at' is in the past.", "out_of_range")]
            )
        secret = generate_token()
        values: dict[str, Any] = {
            "id": new_id("token"),
            "user_id": owner,
            "name": new.name,
            "token_hash": hash_token(secret),
            "created_at": now_ms(),
            "expires_at": new.expires_at,
        }
        async with self.db.write() as conn:
            await self._user(conn, owner)
            await user_repo.insert_token(conn, values)
            await audit.record(
                conn, who.user_id, "token.create", values["id"], after={"user_id": owner}
            )
        shown = {k: v for k, v in values.items() if k != "token_hash"}
        return {**shown, "revoked_at": None, "token": secret}

    async def list_tokens(self, who: Principal, user_id: str | None) -> list[dict[str, Any]]:
        if user_id is not None and user_id != who.user_id:
            require_admin(who)
        async with self.db.read() as conn:
            found = await user_repo.list_tokens(conn, user_id or who.user_id)
        return [asdict(t) for t in found]

    async def revoke_token(self, who: Principal, token_id: str) -> None:
        async with self.db.write() as conn:
            token = await user_repo.get_token(conn, token_id)
            if token is None or not (who.is_admin or token.user_id == who.user_id):
                raise NotFound(f"No token with id '{token_id}'.")
            digest = await user_repo.revoke_token(conn, token_id, now_ms())
            await audit.record(conn, who.user_id, "token.revoke", token_id)
        self.auth.forget(digest)

    # -- audit ----------------------------------------------------------------------------

    async def audit_entries(
        self, who: Principal, filters: dict[str, str | None], cursor: int | None, limit: int
    ) -> dict[str, Any]:
        require_admin(who)
        async with self.db.read() as conn:
            found = await audit.entries(
                conn,
                actor_id=filters.get("actor_id"),
                target_id=filters.get("target_id"),
                action=filters.get("action"),
                before_id=cursor,
                limit=limit + 1,
                held=who.markings,
            )
        page = found[:limit]
        next_cursor = str(page[-1].id) if len(found) > limit else None
        return {"data": [asdict(e) for e in page], "next_cursor": next_cursor}
