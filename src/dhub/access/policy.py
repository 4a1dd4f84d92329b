"""The one access policy (DESIGN.md section 2). Services ask it before every read, list, update,
delete, share, mark, unmark and run; lists filter in SQL by the Visibility it returns.

- A caller must hold every marking on a resource to see it at all, admins included; anyone else
  gets 404, exactly as for a resource that does not exist.
- Owners (users, groups, ``public.all``) may do everything; grants give ``viewer`` (read),
  ``runner`` (read, run) or ``editor`` (read, run, edit); admins may do what owners do, except
  add or remove markings, which takes an owner who holds the marking.
- Visible but not permitted is 403, naming the scope the action needs.
- Built-in agents (``builtin``: shipped with dhub, ``is_builtin``) are everyone's to read and
  run, like a ``runner`` grant to every signed-in user, and no one's to change: every other
  action is refused, admins included, with a message saying to copy the agent instead. Their
  runs are each their own user's (and admins'): no one else sees them (``sees_run``).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Literal

from dhub.access.principal import Principal
from dhub.domain.errors import Forbidden, NotFound
from dhub.store.agents import SCOPE_RANK, Visibility
from dhub.store.tree import NOTHING, Inherited

Action = Literal["read", "run", "edit", "delete", "share", "mark", "unmark"]
ShareScope = Literal["owner", "grant", "admin"]

# The smallest grant that allows each action; None: owners (and, but for markings, admins).
_NEEDS: dict[Action, str | None] = {
    "read": "viewer",
    "run": "runner",
    "edit": "editor",
    "delete": None,
    "share": None,
    "mark": None,
    "unmark": None,
}
_OWNER_ONLY: frozenset[Action] = frozenset({"mark", "unmark"})
_BUILTIN_ALLOWS: frozenset[Action] = frozenset({"read", "run"})
_BUILTIN_GRANT = "runner"  # what every signed-in user holds on a built-in


@dataclass(frozen=True, slots=True)
class Access:
    """What one caller may do with one resource."""

    scope: ShareScope
    owner: bool
    grant: str | None
    admin: bool
    builtin: bool = False

    def allows(self, action: Action) -> bool:
        if self.builtin:
            return action in _BUILTIN_ALLOWS
        if self.owner:
            return True
        if self.admin and action not in _OWNER_ONLY:
            return True
        needed = _NEEDS[action]
        return (
            needed is not None
            and self.grant is not None
            and (SCOPE_RANK[self.grant] >= SCOPE_RANK[needed])
        )


def access(
    principal: Principal,
    owners: Collection[str],
    grant: str | None,
    markings: Collection[str],
    above: Inherited = NOTHING,
    *,
    builtin: bool = False,
) -> Access | None:
    """The caller's access, or None when the resource is invisible to it. ``above`` is what
    the caller inherits from the folders and collection the resource sits in (DESIGN.md 2.2):
    owning one of them is owning what is inside, a grant on one is a grant on what is inside,
    and a marking on one is a marking on everything inside. ``builtin``: the resource ships
    with dhub (``is_builtin``)."""
    if not principal.markings.issuperset(markings) or not principal.markings.issuperset(
        above.markings
    ):
        return None
    if builtin:  # no owners, and a runner grant to everyone, admins included
        return Access("grant", False, _BUILTIN_GRANT, principal.is_admin, builtin=True)
    owner = above.owned or not principal.principal_ids.isdisjoint(owners)
    grant = above.best_grant(grant)
    if not (owner or grant or principal.is_admin):
        return None
    scope: ShareScope = "owner" if owner else "grant" if grant else "admin"
    return Access(scope, owner, grant, principal.is_admin)


def require(
    principal: Principal,
    action: Action,
    resource_id: str,
    owners: Collection[str],
    grant: str | None,
    markings: Collection[str],
    kind: str = "agent",
    above: Inherited = NOTHING,
    *,
    builtin: bool = False,
) -> Access:
    """The caller's access if it allows ``action``; NotFound if the resource is invisible to the
    caller, Forbidden (naming what is needed) if it is visible but not permitted. ``kind``
    names the resource in the NotFound message."""
    found = access(principal, owners, grant, markings, above, builtin=builtin)
    if found is None:
        raise NotFound(f"No {kind} with id '{resource_id}'.")
    if not found.allows(action):
        raise Forbidden(_refusal(action, resource_id, found, kind))
    return found


def require_owner_choice(found: Access, resource_id: str, what: str) -> None:
    """Some settings are the owners' choice (or an admin's), though editors change the rest
    of the document: ``what`` names the setting and why. An editor who could set it would
    decide for every user who runs the resource (e.g. changes made without a person's
    confirmation)."""
    if not found.allows("share"):
        have = f"the '{found.grant}' scope" if found.grant else f"'{found.scope}' access"
        raise Forbidden(f"{what} on '{resource_id}' needs an owner (or an admin); you have {have}.")


def sees_others_runs(found: Access) -> bool:
    """Whether a caller with ``found`` access to a resource sees the runs other users start
    of it. Anyone who may read a resource does, except on a built-in: it is everyone's, so
    what one user runs through it (their inputs and outputs) is theirs alone, and admins'."""
    return not found.builtin or found.admin


def sees_run(principal: Principal, found: Access, run_user_id: str) -> bool:
    """Whether a caller with ``found`` access to a resource sees a run of it started by
    ``run_user_id`` (``sees_others_runs``)."""
    return sees_others_runs(found) or run_user_id == principal.user_id


def _refusal(action: Action, resource_id: str, found: Access, kind: str = "agent") -> str:
    if found.builtin:
        return (
            f"'{action}' on '{resource_id}' is refused: it is a built-in {kind}, read-only for "
            f"everyone (admins included). Copy it (POST /api/v1/{kind}s/{resource_id}/copy, "
            f"or `dhub {kind}s copy {resource_id}`) and change your copy."
        )
    needed = _NEEDS[action]
    if action in _OWNER_ONLY:
        what = "an owner who holds the marking"
    elif needed is None:
        what = "an owner (or an admin)"
    else:
        what = f"the '{needed}' scope or more (or ownership)"
    have = f"the '{found.grant}' scope" if found.grant else f"'{found.scope}' access"
    return f"'{action}' on '{resource_id}' needs {what}; you have {have}."


def visible_agents(principal: Principal) -> Visibility:
    """Which agents the caller may read; lists filter with it in SQL."""
    return Visibility(
        principals=tuple(sorted(principal.principal_ids)),
        restricted=not principal.is_admin,
        held_markings=tuple(sorted(principal.markings)),
        builtins=True,  # everyone reads the built-ins
    )
