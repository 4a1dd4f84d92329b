"""GET /api/v1/usage: the tokens and cost of the runs a caller may read, summed (by model too).

The runs are those GET /api/v1/runs lists with the same filters (``RunService.page``): with
``agent_id``, the runs of that agent the caller sees (an agent it may not read is not found,
like a random id); without, the runs the caller started (admins: every run), of agents it may
still read. ``user_id`` narrows either to one user's runs: a user who sees only their own runs
asking for another's gets the totals of no run, as for a user that does not exist.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dhub.access import policy
from dhub.access.principal import Principal
from dhub.engine import usage
from dhub.services.runs import RunService
from dhub.store import runs as store


@dataclass(frozen=True, slots=True)
class UsageQuery:
    agent_id: str | None = None
    user_id: str | None = None
    since_ms: int | None = None  # runs created at or after
    until_ms: int | None = None  # runs created before


async def report(runs: RunService, who: Principal, query: UsageQuery) -> dict[str, Any]:
    """``{"runs", "calls", token counts, "cost_usd", "by_model"}`` over the runs in scope:
    the shape of a run's ``usage`` (engine/usage.py), summed."""
    visible: list[str] | None = None
    hidden: list[str] = []
    everyones = who.is_admin
    if query.agent_id is not None:
        seen = await runs.agents.read_access(who, query.agent_id)
        everyones = policy.sees_others_runs(seen)
    else:
        visible, hidden = await runs.agents.run_scope(who)
    total: dict[str, Any] = {"runs": 0, "calls": 0, "cost_usd": 0.0, "by_model": {}}
    user_id = query.user_id
    if not everyones:
        if user_id is not None and user_id != who.user_id:
            return total  # only its own runs: another user's are none it can see
        user_id = who.user_id
    flt = store.RunFilter(agent_id=query.agent_id, user_id=user_id)
    async with runs.db.read() as conn:
        found = await store.run_usages(conn, flt, visible, hidden, query.since_ms, query.until_ms)
    for run_usage in found:
        total["runs"] += 1
        usage.merge(total, run_usage)
    return total
