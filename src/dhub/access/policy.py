"""The one access policy. Routes and services ask it; lists filter in SQL by what it decides.

This is the foundation's minimum (owners and admins); grants, groups and markings extend it in
the access-model issue without changing its callers.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from dhub.access.principal import Principal
from dhub.domain.errors import NotFound
from dhub.store.agents import Visibility

Action = Literal["read", "run", "edit", "delete", "share"]
ShareScope = Literal["owner", "grant", "admin"]


def share_scope(principal: Principal, owners: Sequence[str]) -> ShareScope | None:
    if not principal.principal_ids.isdisjoint(owners):
        return "owner"
    if principal.is_admin:
        return "admin"
    return None


def require(
    principal: Principal, action: Action, resource_id: str, owners: Sequence[str]
) -> ShareScope:
    """The caller's scope on the resource, or NotFound when it may not see it at all."""
    scope = share_scope(principal, owners)
    if scope is None:
        raise NotFound(f"No agent with id '{resource_id}'.")
    return scope


def visible_agents(principal: Principal) -> Visibility:
    """Which agents the caller may read; lists filter with it in SQL."""
    return Visibility(
        owned_by=None if principal.is_admin else tuple(sorted(principal.principal_ids))
    )
