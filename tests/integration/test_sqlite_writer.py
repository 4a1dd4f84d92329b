"""The SQLite write transaction: it starts with BEGIN IMMEDIATE on the event loop's thread, so
while another process holds the file's write lock it waits without blocking the loop, and
then writes; a write that fails rolls back and leaves the connection usable."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest
from sqlalchemy import text

from dhub.store.db import Database


async def test_a_write_waits_for_another_process_lock_without_blocking_the_loop(
    tmp_path: Path,
) -> None:
    path = tmp_path / "w.db"
    db = Database(f"sqlite:///{path}")
    await db.migrate()
    try:
        other = sqlite3.connect(path, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")  # another process's writer holds the lock
        ticks = 0

        async def tick() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0.005)

        ticker = asyncio.ensure_future(tick())

        async def write() -> None:
            async with db.write() as conn:
                await conn.execute(text("CREATE TABLE waited (x INTEGER)"))

        writing = asyncio.ensure_future(write())
        await asyncio.sleep(0.2)
        assert not writing.done()  # still waiting for the lock
        assert ticks >= 10  # and the loop went on meanwhile
        other.execute("COMMIT")
        await asyncio.wait_for(writing, 10)
        ticker.cancel()
        names = [r[0] for r in other.execute("SELECT name FROM sqlite_master")]
        assert "waited" in names
        other.close()
    finally:
        await db.dispose()


async def test_a_failed_write_rolls_back_and_the_next_one_works(tmp_path: Path) -> None:
    db = Database(f"sqlite:///{tmp_path / 'r.db'}")
    await db.migrate()
    try:
        async with db.write() as conn:
            await conn.execute(text("CREATE TABLE t (x INTEGER PRIMARY KEY)"))

        async def failing() -> None:
            async with db.write() as conn:
                await conn.execute(text("INSERT INTO t VALUES (1)"))
                raise RuntimeError("the caller's own failure")

        with pytest.raises(RuntimeError):
            await failing()
        async with db.write() as conn:
            await conn.execute(text("INSERT INTO t VALUES (2)"))
        async with db.write() as conn:
            rows = (await conn.execute(text("SELECT x FROM t"))).all()
        assert [r[0] for r in rows] == [2]
    finally:
        await db.dispose()


async def test_saved_steps_go_before_other_waiting_writers(tmp_path: Path) -> None:
    """``write(first=True)`` (the group committer's) is served before the writers already
    waiting, but every other turn goes to those (steps cannot starve requests); a waiter
    cancelled in the queue never wedges it."""
    db = Database(f"sqlite:///{tmp_path / 'o.db'}")
    await db.migrate()
    order: list[str] = []
    release = asyncio.Event()

    async def writer(name: str, first: bool = False, hold: bool = False) -> None:
        async with db.write(first=first):
            order.append(name)
            if hold:
                await release.wait()

    try:
        holder = asyncio.ensure_future(writer("holder", hold=True))
        await asyncio.sleep(0.01)
        waiting = [asyncio.ensure_future(writer("api 1"))]
        await asyncio.sleep(0)
        gone = asyncio.ensure_future(writer("cancelled", first=True))
        await asyncio.sleep(0)
        waiting += [asyncio.ensure_future(writer("api 2")),
                    asyncio.ensure_future(writer("step 1", first=True))]  # fmt: skip
        await asyncio.sleep(0)
        waiting.append(asyncio.ensure_future(writer("step 2", first=True)))
        await asyncio.sleep(0.01)
        gone.cancel()
        release.set()
        await asyncio.wait_for(asyncio.gather(holder, *waiting), 10)
        assert order == ["holder", "step 1", "api 1", "step 2", "api 2"]
        async with db.write():  # and the connection is free again
            order.append("after")
    finally:
        await db.dispose()
