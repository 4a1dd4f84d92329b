"""Admission (runtime/admission.py): at most ``limit`` runs at once, the rest in arrival order
within a user and in turns between users; a cancelled place is given up, a hurried one goes
at once. Driven step by step on the event loop (no clock involved)."""

from __future__ import annotations

import asyncio
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dhub.runtime.admission import Admission, default_limit


class Runs:
    """Runs that enter in a given order and leave when told; ``order`` is who went in when."""

    def __init__(self, admission: Admission) -> None:
        self.admission = admission
        self.order: list[str] = []
        self.inside: set[str] = set()
        self.most = 0
        self.leave: dict[str, asyncio.Event] = {}
        self.tasks: dict[str, asyncio.Task[None]] = {}

    def submit(self, name: str, who: str) -> None:
        self.leave[name] = asyncio.Event()
        ticket = self.admission.ticket(who)
        self.tasks[name] = asyncio.create_task(self._run(name, ticket))

    async def _run(self, name: str, ticket: asyncio.Future[None] | None) -> None:
        await self.admission.wait(ticket)
        self.order.append(name)
        self.inside.add(name)
        self.most = max(self.most, len(self.inside))
        try:
            await self.leave[name].wait()
        finally:
            self.inside.discard(name)
            self.admission.release()

    async def finish(self, name: str) -> None:
        self.leave[name].set()
        await self.tasks[name]
        await settle()


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


@pytest.mark.asyncio
async def test_runs_beyond_the_limit_wait_in_turns_between_users() -> None:
    runs = Runs(Admission(2))
    for name in ("a1", "a2", "a3", "a4", "a5"):
        runs.submit(name, "alice")  # a burst of one user's
    for name in ("b1", "b2"):
        runs.submit(name, "bob")
    runs.submit("c1", "carol")
    await settle()
    assert runs.order == ["a1", "a2"] and runs.admission.waiting == 6
    for name in ("a1", "a2", "a3", "b1", "c1", "a4", "b2", "a5"):
        await runs.finish(name)
    # Alice's burst does not hold Bob and Carol back: one run per user per turn.
    assert runs.order == ["a1", "a2", "a3", "b1", "c1", "a4", "b2", "a5"]
    assert runs.most == 2 and runs.admission.active == 0 and runs.admission.waiting == 0


@pytest.mark.asyncio
async def test_a_run_cancelled_while_it_waits_gives_its_place_up() -> None:
    runs = Runs(Admission(1))
    for name in ("a1", "a2", "a3"):
        runs.submit(name, "alice")
    await settle()
    runs.tasks["a2"].cancel()
    await settle()
    assert runs.admission.waiting == 1
    await runs.finish("a1")
    await runs.finish("a3")
    assert runs.order == ["a1", "a3"] and runs.admission.active == 0


@pytest.mark.asyncio
async def test_a_hurried_run_goes_at_once_over_the_limit() -> None:
    admission = Admission(1)
    runs = Runs(admission)
    runs.submit("a1", "alice")
    runs.submit("a2", "alice")
    runs.submit("b1", "bob")
    await settle()
    ticket = admission._queues["bob"][0]  # its place, as the executor keeps it
    admission.hurry(ticket)  # bob's run is being cancelled: it does not wait
    await settle()
    assert runs.order == ["a1", "b1"] and runs.most == 2
    await runs.finish("b1")
    assert runs.order == ["a1", "b1"]  # a1 still holds the one place
    await runs.finish("a1")
    await runs.finish("a2")
    assert runs.order == ["a1", "b1", "a2"] and admission.active == 0


@settings(max_examples=60, deadline=None)
@given(
    limit=st.integers(1, 4),
    users=st.lists(st.sampled_from("abcd"), min_size=1, max_size=24),
    seed=st.integers(0, 1000),
)
def test_never_over_the_limit_and_each_users_runs_in_order(
    limit: int, users: list[str], seed: int
) -> None:
    async def go() -> None:
        runs = Runs(Admission(limit))
        names = [f"{who}{i}" for i, who in enumerate(users)]
        for name, who in zip(names, users, strict=True):
            runs.submit(name, who)
        await settle()
        rng = random.Random(seed)
        while runs.inside:
            await runs.finish(rng.choice(sorted(runs.inside)))
        assert sorted(runs.order) == sorted(names) and runs.most <= limit
        for who in set(users):
            mine = [n for n in runs.order if n[0] == who]
            assert mine == [n for n in names if n[0] == who]  # first come, first served

    asyncio.run(go())


def test_the_default_limit_follows_cores_and_memory() -> None:
    assert default_limit(cores=2, memory_bytes=8 << 30) == 64
    assert default_limit(cores=64, memory_bytes=2 << 30) == 128  # memory bounds it
    assert default_limit(cores=1, memory_bytes=64 << 20) == 8  # never fewer than 8
    with pytest.raises(ValueError, match="at least 1"):
        Admission(0)
