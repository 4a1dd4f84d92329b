"""List latency for a caller with many groups, grants and markings, against the same list with
access checks disabled, in one run (issue: identity and access).

World: 10,000 agents owned by the admin; a user in 50 groups, with 1,000 of the agents granted
to it or its groups (a mix of viewer/runner/editor), holding 5 markings. 400 of the granted
agents carry markings the user holds, 100 carry one it does not hold (invisible to it), and 1,000
agents nobody granted carry markings too. The user's list pages through everything it may see,
50 at a time; the baseline runs the same pages without access checks (Visibility.everything()).

Both run in this process against the same SQLite file through the store, as the service reads
a page (the checked side includes the access epoch read and the ReachCache lookup), interleaved,
so the machine's noise hits both alike. Prints p50/p99 per page and the ratio.

    .venv/bin/python bench/access_list.py [--agents 10000] [--rounds 200]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from sqlalchemy import delete, insert

from dhub.access import policy
from dhub.access.tokens import resolve
from dhub.store import agents as repo
from dhub.store.db import Database
from dhub.store.sharing import ReachCache
from dhub.store.tables import (
    agents,
    group_members,
    groups,
    marking_members,
    markings,
    resource_ancestors,
    resource_grants,
    resource_markings,
    resource_owners,
    resources,
    users,
)

DOC = '{"name":"x","description":"bench agent","mode":"react","agent":{"instructions":"hi"}}'


def _ids(n: int) -> list[str]:
    return [f"agent.{i:08d}" for i in range(n)]


async def seed(db: Database, n_agents: int, rng: random.Random) -> None:
    ids = _ids(n_agents)
    groups_ = [f"group.g{i:02d}" for i in range(50)]
    held = [f"marking.m{i}" for i in range(5)]
    async with db.write() as conn:
        await conn.execute(
            insert(users),
            [
                {"id": u, "display_name": u, "is_admin": u == "user.admin", "created_at": 1}
                for u in ("user.admin", "user.bench")
            ],
        )
        await conn.execute(
            insert(groups), [{"id": g, "display_name": g, "created_at": 1} for g in groups_]
        )
        await conn.execute(
            insert(group_members),
            [{"group_id": g, "member_id": "user.bench"} for g in groups_],
        )
        await conn.execute(
            insert(markings),
            [
                {"id": m, "name": m, "description": "", "created_by": "user.admin",
                 "created_at": 1}
                for m in [*held, "marking.other"]
            ],
        )  # fmt: skip
        await conn.execute(
            insert(marking_members), [{"marking_id": m, "principal_id": "user.bench"} for m in held]
        )
        await conn.execute(
            insert(agents),
            [
                {"id": a, "name": a, "folder_key": "", "description": "bench agent",
                 "mode": "react", "input_mode": "chat", "version": 1, "document": DOC,
                 "is_builtin": False, "created_by": "user.admin", "created_at": 1,
                 "updated_at": 1}
                for a in ids
            ],
        )  # fmt: skip
        await conn.execute(
            insert(resource_owners), [{"resource_id": a, "principal_id": "user.admin"} for a in ids]
        )
        granted = rng.sample(ids, 1000)
        grantees = ["user.bench", *groups_]
        await conn.execute(
            insert(resource_grants),
            [
                {"resource_id": a, "principal_id": rng.choice(grantees),
                 "scope": rng.choice(("viewer", "runner", "editor"))}
                for a in granted
            ],
        )  # fmt: skip
        marks = [(a, rng.choice(held)) for a in granted[:400]]
        marks += [(a, "marking.other") for a in granted[400:500]]
        ungranted = sorted(set(ids) - set(granted))
        marks += [(a, rng.choice([*held, "marking.other"])) for a in rng.sample(ungranted, 1000)]
        await conn.execute(
            insert(resource_markings), [{"resource_id": a, "marking_id": m} for a, m in marks]
        )


FANOUT, LEVELS = 3, 5  # 3 + 9 + 27 + 81 + 243 folders; the agents in the 243 at the bottom


async def into_tree(db: Database, n_agents: int, rng: random.Random) -> None:
    """The same world with its grants and markings moved up a folder tree (issue 18): the
    agents spread over the bottom folders of a 5-level tree; the user reaches about as many
    agents as in the flat world, through grants on 4 third-level folders (to the user and to
    three of its groups), and markings sit on folders (3 it holds, 1 it does not)."""
    levels: list[list[str]] = []
    rows, ancestors = [], []
    parents: list[str | None] = [None]
    for _ in range(LEVELS):
        level = []
        for parent in parents:
            for _ in range(FANOUT):
                folder = f"folder.{len(rows):08d}"
                level.append(folder)
                rows.append(
                    {"id": folder, "category": "folder", "name": folder,
                     "folder_key": parent or "", "folder_id": parent, "description": "",
                     "version": 1, "document": "{}", "is_builtin": False,
                     "created_by": "user.admin", "created_at": 1, "updated_at": 1}
                )  # fmt: skip
                if parent is not None:
                    ancestors.append((folder, parent, 1))
                    ancestors += [(folder, a, d + 1) for r, a, d in list(ancestors) if r == parent]
        levels.append(level)
        parents = list(level)
    chain = {r: [(a, d) for rr, a, d in ancestors if rr == r] for r in levels[-1]}
    leaves = levels[-1]
    for i, agent in enumerate(_ids(n_agents)):
        leaf = leaves[i % len(leaves)]
        ancestors.append((agent, leaf, 1))
        ancestors += [(agent, a, d + 1) for a, d in chain[leaf]]
    grantees = ["user.bench", "group.g01", "group.g02", "group.g03"]
    granted = rng.sample(levels[2], 4)
    marked = rng.sample(levels[3], 4)
    async with db.write() as conn:
        await conn.execute(delete(resource_grants))
        await conn.execute(delete(resource_markings))
        await conn.execute(insert(resources), rows)
        await conn.execute(
            insert(resource_owners),
            [{"resource_id": r["id"], "principal_id": "user.admin"} for r in rows],
        )
        await conn.execute(
            insert(resource_ancestors),
            [{"resource_id": r, "ancestor_id": a, "depth": d} for r, a, d in ancestors],
        )
        await conn.execute(
            insert(resource_grants),
            [{"resource_id": f, "principal_id": g, "scope": "runner"}
             for f, g in zip(granted, grantees, strict=True)],
        )  # fmt: skip
        held = ["marking.m0", "marking.m1", "marking.m2", "marking.other"]
        await conn.execute(
            insert(resource_markings),
            [{"resource_id": f, "marking_id": m} for f, m in zip(marked, held, strict=True)],
        )  # fmt: skip


async def pages(db: Database, visibility: repo.Visibility, cache: ReachCache) -> list[float]:
    """Time every page of one full listing, as AgentService.page reads it; seconds per page."""
    times, after = [], None
    while True:
        start = time.perf_counter()
        async with db.read(snapshot=visibility.restricted) as conn:
            reach = None
            if visibility.restricted:
                held = visibility.held_markings or ()
                reach = await cache.get(conn, visibility.principals, held, visibility.builtins)
            found = await repo.list_agents(conn, repo.AgentFilter(), visibility, after, 51, reach)
        times.append(time.perf_counter() - start)
        if len(found) <= 50:
            return times
        after = found[49].record.id


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


async def main(n_agents: int, rounds: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        db = Database(f"sqlite:///{Path(tmp) / 'bench.db'}")
        await db.migrate()
        await seed(db, n_agents, random.Random(7))
        async with db.read(snapshot=True) as conn:
            user = await resolve(conn, "user.bench", False)
        checked = policy.visible_agents(user)
        unchecked = repo.Visibility.everything()
        cache = ReachCache()
        for visibility in (checked, unchecked):  # warm the statement caches
            await pages(db, visibility, cache)
        with_checks: list[float] = []
        without: list[float] = []
        first_with: list[float] = []
        first_without: list[float] = []
        for _ in range(rounds):
            a = await pages(db, checked, cache)
            b = await pages(db, unchecked, cache)
            with_checks += a
            without += b
            first_with.append(a[0])
            first_without.append(b[0])
        visible = len(await _all(db, checked))
        await db.dispose()
    result = {
        "agents": n_agents,
        "visible_to_user": visible,
        "pages_per_listing": {"checked": len(a), "unchecked": len(b)},
        "page_ms": {
            "checked": {"p50": pct(with_checks, 0.5), "p99": pct(with_checks, 0.99)},
            "unchecked": {"p50": pct(without, 0.5), "p99": pct(without, 0.99)},
        },
        "first_page_ms": {
            "checked": {"p50": pct(first_with, 0.5), "p99": pct(first_with, 0.99)},
            "unchecked": {"p50": pct(first_without, 0.5), "p99": pct(first_without, 0.99)},
        },
    }
    result["ratio_p50"] = statistics.median(with_checks) / statistics.median(without)
    return result


async def _all(db: Database, visibility: repo.Visibility) -> list[str]:
    out, after = [], None
    while True:
        async with db.read() as conn:
            found = await repo.list_agents(conn, repo.AgentFilter(), visibility, after, 201)
        out += [r.record.id for r in found[:200]]
        if len(found) <= 200:
            return out
        after = found[199].record.id


async def tree_against_flat(n_agents: int, rounds: int) -> dict[str, Any]:
    """The checked listing of the flat world and of the folder-tree world, interleaved round by
    round in this process (so the machine's noise hits both alike)."""
    with tempfile.TemporaryDirectory() as tmp:
        worlds = {}
        for name in ("flat", "tree"):
            db = Database(f"sqlite:///{Path(tmp) / f'{name}.db'}")
            await db.migrate()
            await seed(db, n_agents, random.Random(7))
            if name == "tree":
                await into_tree(db, n_agents, random.Random(7))
            async with db.read(snapshot=True) as conn:
                user = await resolve(conn, "user.bench", False)
            worlds[name] = (db, policy.visible_agents(user), ReachCache())
        times: dict[str, list[float]] = {"flat": [], "tree": []}
        firsts: dict[str, list[float]] = {"flat": [], "tree": []}
        seen = {name: len(await _all(db, v)) for name, (db, v, _) in worlds.items()}
        for db, visibility, cache in worlds.values():
            await pages(db, visibility, cache)  # warm
        for _ in range(rounds):
            for name, (db, visibility, cache) in worlds.items():
                got = await pages(db, visibility, cache)
                times[name] += got
                firsts[name].append(got[0])
        for db, _, _ in worlds.values():
            await db.dispose()
    return {
        "visible_to_user": seen,
        "page_p50_ms": {k: pct(v, 0.5) for k, v in times.items()},
        "first_page_p50_ms": {k: pct(v, 0.5) for k, v in firsts.items()},
    }


def run() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=20, help="full listings per side")
    parser.add_argument(
        "--tree", action="store_true", help="the folder-tree world against the flat one"
    )
    args = parser.parse_args()
    if args.tree:
        both = asyncio.run(tree_against_flat(args.agents, args.rounds))
        page, first = both["page_p50_ms"], both["first_page_p50_ms"]
        seen = both["visible_to_user"]
        print(f"folder tree: the user sees {seen['tree']} (flat: {seen['flat']})")
        print(f"page p50 ms: tree {page['tree']:.3f}, flat {page['flat']:.3f}: "
              f"{page['tree'] / page['flat']:.2f}x (goal <= 1.5x)")  # fmt: skip
        print(f"first page p50 ms: tree {first['tree']:.3f}, flat {first['flat']:.3f}: "
              f"{first['tree'] / first['flat']:.2f}x")  # fmt: skip
        return
    result = asyncio.run(main(args.agents, args.rounds))
    page = result["page_ms"]
    first = result["first_page_ms"]
    print(f"{result['agents']} agents; the user sees {result['visible_to_user']}")
    print("                       p50 ms   p99 ms")
    print(f"page, access checked   {page['checked']['p50']:7.3f}  {page['checked']['p99']:7.3f}")
    print(
        f"page, no checks        {page['unchecked']['p50']:7.3f}  {page['unchecked']['p99']:7.3f}"
    )
    print(f"first page, checked    {first['checked']['p50']:7.3f}  {first['checked']['p99']:7.3f}")
    print(
        f"first page, no checks  {first['unchecked']['p50']:7.3f}  {first['unchecked']['p99']:7.3f}"
    )
    print(f"ratio (p50 per page, checked / unchecked): {result['ratio_p50']:.2f}x (goal <= 1.5x)")


if __name__ == "__main__":
    run()
