"""The access policy's rule for built-in agents (access/policy.py), for any caller: read and
run for everyone, nothing else for anyone (admins, owners and grants notwithstanding), a
refusal that says to copy, and runs seen by their users and admins only."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dhub.access import policy
from dhub.access.principal import Principal
from dhub.domain.errors import Forbidden

ACTIONS: tuple[policy.Action, ...] = ("read", "run", "edit", "delete", "share", "mark", "unmark")
principals = st.builds(
    Principal,
    user_id=st.sampled_from(["user.a", "user.b", "user.admin"]),
    is_admin=st.booleans(),
    groups=st.frozensets(st.sampled_from(["group.ops", "group.all"])),
    markings=st.frozensets(st.sampled_from(["marking.x", "marking.y"])),
)
# Whatever rows a built-in might carry (it has none): they change nothing.
owner_lists = st.lists(st.sampled_from(["user.a", "group.ops", "public.all"]), max_size=2)
grants = st.sampled_from([None, "viewer", "runner", "editor"])


@given(who=principals, owners=owner_lists, grant=grants, action=st.sampled_from(ACTIONS))
def test_everyone_reads_and_runs_a_builtin_and_no_one_changes_it(
    who: Principal, owners: list[str], grant: str | None, action: policy.Action
) -> None:
    found = policy.access(who, owners, grant, (), builtin=True)
    assert found is not None and found.scope == "grant" and found.builtin
    assert found.allows(action) is (action in ("read", "run"))
    if action in ("read", "run"):
        assert policy.require(who, action, "agent.builtin-x", owners, grant, (), builtin=True)
        return
    with pytest.raises(Forbidden) as refused:
        policy.require(who, action, "agent.builtin-x", owners, grant, (), builtin=True)
    assert "built-in" in str(refused.value)
    assert "POST /api/v1/agents/agent.builtin-x/copy" in str(refused.value)


@given(who=principals, run_user=st.sampled_from(["user.a", "user.b", "user.admin"]))
def test_a_builtin_run_is_seen_by_its_user_and_admins(who: Principal, run_user: str) -> None:
    found = policy.access(who, [], None, (), builtin=True)
    assert found is not None
    assert policy.sees_run(who, found, run_user) is (who.is_admin or run_user == who.user_id)
    # Any other agent's runs: whoever reads it sees them all, as before.
    other = policy.access(who, ["public.all"], None, ())
    assert other is not None and policy.sees_run(who, other, run_user)


def test_markings_still_hide_before_anything_else() -> None:
    lacking = Principal("user.a", is_admin=True)
    assert policy.access(lacking, [], None, ["marking.x"], builtin=True) is None
