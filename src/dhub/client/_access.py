"""The identity and sharing half of ``Client``: users, groups, markings, tokens, the audit
log, and who may use an agent, a folder, a collection or any other resource. Each method is
one call to the endpoint of the same name."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from dhub.client._models import (
    Agent,
    AuditEntry,
    AuditPage,
    Grant,
    Group,
    Marking,
    ShareScope,
    Token,
    User,
)
from dhub.client._paths import follow, query, segment

if TYPE_CHECKING:
    import httpx

Expiry = int | datetime | None
"""When a token stops working: unix milliseconds or an aware datetime; None: never."""


class AccessMixin:
    """Mixed into ``Client``, which supplies the transport."""

    if TYPE_CHECKING:

        def _object(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]: ...

        def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response: ...

        def _resource_path(self, resource: str) -> str: ...

    # -- me and users ------------------------------------------------------------------------

    def me(self) -> User:
        """The caller: its user record plus the ``groups`` (through nesting) and ``markings``
        it holds."""
        return self._object("GET", "/me")

    def create_user(
        self,
        name: str,
        display_name: str,
        *,
        email: str | None = None,
        is_admin: bool = False,
    ) -> User:
        """Create ``user.<name>`` (admins only). It has no token until ``issue_token``."""
        body: dict[str, Any] = {"name": name, "display_name": display_name}
        if email is not None:
            body["email"] = email
        if is_admin:
            body["is_admin"] = True
        return self._object("POST", "/users", json=body)

    def list_users(self) -> list[User]:
        return _data(self._object("GET", "/users"))

    def get_user(self, user_id: str) -> User:
        return self._object("GET", f"/users/{segment(user_id)}")

    def update_user(self, user_id: str, changes: Mapping[str, Any]) -> User:
        """Change ``display_name``, ``email``, ``avatar_url``, ``avatar_config`` or (admins)
        ``is_admin``; only the keys given change."""
        return self._object("PATCH", f"/users/{segment(user_id)}", json=dict(changes))

    def delete_user(self, user_id: str) -> None:
        self._request("DELETE", f"/users/{segment(user_id)}")

    def issue_token(self, user_id: str, name: str, *, expires_at: Expiry = None) -> Token:
        """A new API token for another user (admins only). Its secret is ``["token"]`` of the
        result and is never shown again."""
        return self._object(
            "POST", f"/users/{segment(user_id)}/tokens", json=_token_body(name, expires_at)
        )

    # -- groups ------------------------------------------------------------------------------

    def create_group(self, name: str, display_name: str) -> Group:
        """Create ``group.<name>`` (admins only)."""
        return self._object("POST", "/groups", json={"name": name, "display_name": display_name})

    def list_groups(self) -> list[Group]:
        return _data(self._object("GET", "/groups"))

    def get_group(self, group_id: str) -> Group:
        """The group with its direct ``members`` (user and group ids)."""
        return self._object("GET", f"/groups/{segment(group_id)}")

    def update_group(self, group_id: str, display_name: str) -> Group:
        return self._object(
            "PATCH", f"/groups/{segment(group_id)}", json={"display_name": display_name}
        )

    def delete_group(self, group_id: str) -> None:
        self._request("DELETE", f"/groups/{segment(group_id)}")

    def add_member(self, group_id: str, principal_id: str) -> Group:
        """Add a user, a group (nesting) or ``public.all`` to the group; returns the group."""
        return self._object(
            "POST", f"/groups/{segment(group_id)}/members", json={"principal_id": principal_id}
        )

    def remove_member(self, group_id: str, principal_id: str) -> None:
        self._request("DELETE", f"/groups/{segment(group_id)}/members/{segment(principal_id)}")

    # -- markings ----------------------------------------------------------------------------

    def create_marking(self, name: str, description: str | None = None) -> Marking:
        """Create ``marking.<name>`` (admins only)."""
        body: dict[str, Any] = {"name": name}
        if description is not None:
            body["description"] = description
        return self._object("POST", "/markings", json=body)

    def list_markings(self) -> list[Marking]:
        """Every marking (admins), else the ones the caller holds."""
        return _data(self._object("GET", "/markings"))

    def get_marking(self, marking_id: str) -> Marking:
        return self._object("GET", f"/markings/{segment(marking_id)}")

    def add_marking_member(self, marking_id: str, principal_id: str) -> Marking:
        return self._object(
            "POST",
            f"/markings/{segment(marking_id)}/members",
            json={"principal_id": principal_id},
        )

    def remove_marking_member(self, marking_id: str, principal_id: str) -> None:
        self._request("DELETE", f"/markings/{segment(marking_id)}/members/{segment(principal_id)}")

    # -- tokens ------------------------------------------------------------------------------

    def create_token(self, name: str, *, expires_at: Expiry = None) -> Token:
        """A new token for the caller. Its secret is ``["token"]`` of the result, shown once."""
        return self._object("POST", "/tokens", json=_token_body(name, expires_at))

    def list_tokens(self, user_id: str | None = None) -> list[Token]:
        """The caller's tokens, or (admins) ``user_id``'s; never their secrets."""
        return _data(self._object("GET", "/tokens", params=query(user_id=user_id)))

    def revoke_token(self, token_id: str) -> None:
        self._request("DELETE", f"/tokens/{segment(token_id)}")

    # -- audit -------------------------------------------------------------------------------

    def audit(
        self,
        *,
        actor_id: str | None = None,
        target_id: str | None = None,
        action: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> AuditPage:
        """One page of the audit log, newest first (admins only)."""
        params = query(
            actor_id=actor_id, target_id=target_id, action=action, limit=limit, cursor=cursor
        )
        body = self._object("GET", "/audit", params=params)
        return AuditPage(data=_data(body), next_cursor=body.get("next_cursor"))

    def iter_audit(
        self,
        *,
        actor_id: str | None = None,
        target_id: str | None = None,
        action: str | None = None,
        page_size: int | None = None,
    ) -> Iterator[AuditEntry]:
        """Every matching audit entry, newest first, fetching pages lazily."""
        return follow(
            lambda cursor: self.audit(
                actor_id=actor_id, target_id=target_id, action=action, limit=page_size,
                cursor=cursor,
            )
        )  # fmt: skip

    # -- sharing -----------------------------------------------------------------------------
    # ``agent`` is the agent's id or its name (``Client.resolve_agent`` says how names resolve),
    # or the id of any other resource: a folder's or a collection's grants, owners and markings
    # reach everything inside it (docs/folders.md); ``resolve_folder(name)["id"]`` is the id
    # of a folder known by its name.

    def list_grants(self, agent: str) -> list[Grant]:
        """Who the agent is shared with: ``principal_id`` and ``scope`` each."""
        return _data(self._object("GET", f"{self._resource_path(agent)}/grants"))

    def grant(self, agent: str, principal_id: str, scope: ShareScope) -> Grant:
        """Share the agent with a user, group or ``public.all`` (replacing an earlier scope);
        returns the grant (``principal_id``, ``type``, ``display_name``, ``scope``)."""
        return self._object(
            "POST",
            f"{self._resource_path(agent)}/grants",
            json={"principal_id": principal_id, "scope": scope},
        )

    def revoke_grant(self, agent: str, principal_id: str) -> None:
        self._request("DELETE", f"{self._resource_path(agent)}/grants/{segment(principal_id)}")

    def set_owners(self, agent: str, owners: Sequence[str]) -> Agent:
        """Make exactly these users and groups the agent's owners."""
        return self._object(
            "PATCH",
            self._resource_path(agent),
            json={"owners": list(owners)},
            headers={"Content-Type": "application/merge-patch+json"},
        )

    def mark_agent(self, agent: str, marking_id: str) -> Agent:
        """Add a marking (only holders of every marking on an agent may see it); returns the
        agent."""
        return self._object(
            "POST", f"{self._resource_path(agent)}/markings", json={"marking_id": marking_id}
        )

    def unmark_agent(self, agent: str, marking_id: str) -> Agent:
        """Remove a marking; returns the agent."""
        return self._object(
            "DELETE", f"{self._resource_path(agent)}/markings/{segment(marking_id)}"
        )

    def mark(self, resource: str, marking_id: str) -> dict[str, Any]:
        """Add a marking to any resource (its id, or an agent's name): only holders of every
        marking on it, or on a folder or collection it is in, may see it. Returns it."""
        return self.mark_agent(resource, marking_id)

    def unmark(self, resource: str, marking_id: str) -> dict[str, Any]:
        """Remove a marking from any resource; returns it."""
        return self.unmark_agent(resource, marking_id)


def _data(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The items of a ``{"data": [...]}`` list response."""
    return list(body.get("data") or [])


def _token_body(name: str, expires_at: Expiry) -> dict[str, Any]:
    body: dict[str, Any] = {"name": name}
    if isinstance(expires_at, datetime):
        body["expires_at"] = int(expires_at.timestamp() * 1000)
    elif expires_at is not None:
        body["expires_at"] = int(expires_at)
    return body
