"""Spares: sandboxes started ahead of need, their supervisor waiting for a function (pool.py).

Unsafe mode shows which process serves a call (a function's parent is its supervisor, a child
of this test's process); bubblewrap mode shows that a spare carries nothing of anyone's.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from typing import Any

import pytest

from dhub.sandbox.runner import FunctionCall, SandboxRunner, SandboxSettings
from tests.conftest import sandbox_settings

pytestmark = pytest.mark.asyncio

PARENT = "import os\n\ndef main():\n    return os.getppid()\n"


def unsafe(**overrides: Any) -> SandboxSettings:
    return replace(sandbox_settings(isolation="unsafe"), **overrides)


@contextlib.asynccontextmanager
async def running(config: SandboxSettings) -> AsyncIterator[SandboxRunner]:
    runner = SandboxRunner(config)
    try:
        yield runner
    finally:
        await runner.close()


async def parent_of(runner: SandboxRunner, owner: str, source: str = PARENT) -> int:
    """The supervisor serving a first call of ``owner``'s function (its process's parent)."""
    result = await runner.call(FunctionCall(source, {}, 10, owner=owner))
    assert result.ok, result
    return int(result.value)


def children(of: int | str = "self") -> set[int]:
    """The live children of a process (this one: in unsafe mode, every sandbox's supervisor)."""
    found: set[int] = set()
    with contextlib.suppress(OSError):
        for task in os.listdir(f"/proc/{of}/task"):
            with open(f"/proc/{of}/task/{task}/children") as f:
                found |= {int(pid) for pid in f.read().split()}
    return {pid for pid in found if _alive(pid)}


def spares() -> set[int]:
    """Supervisors waiting for a function: those without a function's process."""
    return {pid for pid in children() if not children(pid)}


async def test_a_new_functions_first_call_takes_the_spare_started_before_it() -> None:
    async with running(unsafe()) as runner:
        await parent_of(runner, "agent.a@1")
        await runner.pool.settle()
        assert runner.pool.spare_count() == 1
        [waiting] = spares()
        second = await parent_of(runner, "agent.b@1", PARENT + "# another function\n")
        assert second == waiting  # started before the call was made
        await runner.pool.settle()
        assert runner.pool.spare_count() == 1  # and another is ready for the next
        assert len(spares() - {waiting}) == 1


async def test_first_calls_at_once_never_share_a_sandbox() -> None:
    async with running(unsafe()) as runner:
        await parent_of(runner, "agent.warmup@1")
        await runner.pool.settle()
        owners = [f"agent.{n}@1" for n in range(8)]
        parents = await asyncio.gather(*(parent_of(runner, owner) for owner in owners))
    assert len(set(parents)) == len(owners)


async def test_a_spare_killed_while_it_waits_is_replaced_by_a_start_of_its_own() -> None:
    async with running(unsafe()) as runner:
        await parent_of(runner, "agent.a@1")
        await runner.pool.settle()
        [spare] = spares()
        os.kill(spare, signal.SIGKILL)
        await _until(lambda: not _alive(spare), seconds=5)
        second = await runner.call(FunctionCall(PARENT, {}, 10, owner="agent.b@1"))
        assert second.ok, second
        assert second.value != spare


async def test_spares_go_when_no_start_asks_for_them() -> None:
    async with running(unsafe(demand_seconds=0.3)) as runner:
        await parent_of(runner, "agent.a@1")
        await runner.pool.settle()
        assert runner.pool.spare_count() == 1
        await _until(lambda: runner.pool.spare_count() == 0, seconds=5)
        await runner.pool.settle()
        assert spares() == set()


async def test_spares_count_in_the_memory_budget() -> None:
    async with running(unsafe()) as runner:
        await parent_of(runner, "agent.a@1")
        await runner.pool.settle()
        memory = runner.pool.memory()
        assert runner.pool.spare_count() == 1
        one = memory.used // memory.workers
    # A budget with room for one worker only: no spare is started beside it.
    async with running(unsafe(pool_bytes=int(one * 1.5))) as runner:
        await parent_of(runner, "agent.a@1")
        await runner.pool.settle()
        assert runner.pool.spare_count() == 0
        assert runner.pool.memory().used <= int(one * 1.5)


async def test_no_spares_without_a_warm_pool() -> None:
    async with running(unsafe(warm=False)) as runner:
        await parent_of(runner, "agent.a@1")
        await runner.pool.settle()
        assert runner.pool.spare_count() == 0
        assert children() == set()


async def test_under_bubblewrap_a_spare_holds_nothing_of_earlier_calls() -> None:
    # One user's function leaves files in every writable place and a child process behind; a
    # spare's function of another user (its first call) sees none of it.
    leave = (
        "import os, subprocess\n\ndef main():\n"
        "    for place in ('/tmp', '/work', '/dev/shm'):\n"
        "        open(os.path.join(place, 'secret'), 'w').write('a')\n"
        "    subprocess.Popen(['sleep', '60'])\n"
        "    return sorted(os.listdir('/tmp'))\n"
    )
    look = (
        "import os\n\ndef main():\n"
        "    seen = [p for p in ('/tmp', '/work', '/dev/shm') if os.listdir(p)]\n"
        "    pids = [p for p in os.listdir('/proc') if p.isdigit()]\n"
        "    return {'seen': seen, 'processes': len(pids)}\n"
    )
    async with running(sandbox_settings()) as runner:
        left = await runner.call(FunctionCall(leave, {}, 20, owner="user.a/agent.a@1"))
        assert left.ok and left.value == ["secret"], left
        await runner.pool.settle()
        assert runner.pool.spare_count() == 1
        seen = await runner.call(FunctionCall(look, {}, 20, owner="user.b/agent.b@1"))
    assert seen.ok, seen
    assert seen.value == {"seen": [], "processes": 2}  # its supervisor and itself


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] not in (b"Z", b"X")
    except OSError:
        return False


async def _until(condition: Callable[[], bool], seconds: float) -> None:
    for _ in range(int(seconds / 0.05)):
        if condition():
            return
        await asyncio.sleep(0.05)
    raise AssertionError("not within the time")
