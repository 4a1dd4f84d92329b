"""The warm pool sizes itself to the calls in flight, within its memory budget (pool.py).

Real workers, in unsafe mode (fast to start, and a function can leave a trace on the host): each
interpreter appends its function process's pid to a file as it loads the source, so the tests
count every interpreter started, in the foreground or the background.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from dhub.sandbox.runner import FunctionCall, SandboxRunner, SandboxSettings
from dhub.sandbox.worker import FunctionResult
from tests.conftest import sandbox_settings

pytestmark = pytest.mark.asyncio


def counted(starts: Path, wait: float) -> str:
    """A function that sleeps ``wait`` s per call, and leaves its pid in ``starts`` on load."""
    return (
        f"import os, time\nwith open({str(starts)!r}, 'a') as f:\n"
        "    f.write(f'{os.getpid()}\\n')\n\n"
        f"def main():\n    time.sleep({wait!r})\n    return os.getpid()\n"
    )


def started(starts: Path) -> list[int]:
    return [int(line) for line in starts.read_text().split()] if starts.exists() else []


def settings(**overrides: Any) -> SandboxSettings:
    return replace(sandbox_settings(isolation="unsafe"), **overrides)


@contextlib.asynccontextmanager
async def running(config: SandboxSettings) -> AsyncIterator[SandboxRunner]:
    runner = SandboxRunner(config)
    try:
        yield runner
    finally:
        await runner.close()


async def lane(runner: SandboxRunner, source: str, owner: str, calls: int) -> list[FunctionResult]:
    """Calls of one function one after the other, as a run's steps make them."""
    return [await runner.call(FunctionCall(source, {}, 10, owner=owner)) for _ in range(calls)]


async def test_a_steady_stream_of_n_calls_reuses_about_n_interpreters(tmp_path: Path) -> None:
    starts = tmp_path / "starts"
    source = counted(starts, 0.05)
    async with running(settings()) as runner:
        lanes = await asyncio.gather(*(lane(runner, source, "agent.a@1", 8) for _ in range(6)))
        await runner.pool.settle()
    results = [result for each in lanes for result in each]
    assert [r.kind for r in results] == ["ok"] * 48
    # 48 calls, 6 at a time: about 6 interpreters, not one per call (the fixed pool of 2 idle
    # ones started about 30 here). Calls about as long as a start may wait for a busy one.
    assert 4 <= len(started(starts)) <= 9, started(starts)
    assert len({r.value for r in results}) <= 9


async def test_calls_shorter_than_a_start_wait_for_a_busy_worker(tmp_path: Path) -> None:
    # 40 runs in step calling one 5 ms function: once its calls are known to be short, a burst
    # queues for the interpreters there are (each freed in milliseconds) instead of starting
    # one per call, which under a memory budget meant ending other functions' to make room.
    starts = tmp_path / "starts"
    source = counted(starts, 0.005)
    async with running(settings()) as runner:
        assert all(r.ok for r in await lane(runner, source, "agent.a@1", 3))  # timed
        before = len(started(starts))
        burst = await asyncio.gather(*(lane(runner, source, "agent.a@1", 1) for _ in range(40)))
        await runner.pool.settle()
    assert all(each[0].ok for each in burst), burst
    assert len(started(starts)) - before <= 12, started(starts)


async def test_the_pool_never_exceeds_its_memory_budget(tmp_path: Path) -> None:
    starts = tmp_path / "starts"
    source = counted(starts, 0.03)
    async with running(settings()) as runner:  # what one worker of this function holds
        await lane(runner, source, "probe", 1)
        await runner.pool.settle()
        size = runner.pool.memory().used // runner.pool.memory().workers
    budget = int(size * 3.5)
    assert budget < 100 << 20  # a few workers; 20 calls in flight want far more
    peak_seen = 0
    alive: list[int] = []

    async def watch() -> None:
        nonlocal peak_seen
        while True:
            peak_seen = max(peak_seen, runner.pool.memory().used)
            alive.append(sum(1 for pid in started(starts) if _running(pid)))
            await asyncio.sleep(0.002)

    async with running(settings(pool_bytes=budget)) as runner:
        watcher = asyncio.ensure_future(watch())
        owners = [f"agent.{name}@1" for name in "abcd"]
        lanes = await asyncio.gather(
            *(lane(runner, source, owner, 4) for owner in owners for _ in range(5))
        )
        await runner.pool.settle()
        watcher.cancel()
        memory = runner.pool.memory()
    assert all(r.ok for each in lanes for r in each), lanes
    assert memory.budget == budget
    assert 0 < memory.peak <= budget and peak_seen <= budget
    # The interpreters really running at once: as many as fit (one more may be dying, killed
    # a moment ago, when the next one's start is quicker than its end).
    assert max(alive) <= budget // size + 1, max(alive)
    assert len(started(starts)) > 3  # the four functions took turns in the budget


async def test_idle_workers_beyond_demand_age_out(tmp_path: Path) -> None:
    starts = tmp_path / "starts"
    source = counted(starts, 0.1)
    async with running(settings(demand_seconds=0.5)) as runner:
        await asyncio.gather(*(lane(runner, source, "agent.a@1", 1) for _ in range(6)))
        await runner.pool.settle()
        assert runner.pool.idle_count() >= 6  # kept for the next burst
        await _until(lambda: runner.pool.idle_count() <= 1, seconds=5)
        await runner.pool.settle()
        memory = runner.pool.memory()
        assert memory.workers == runner.pool.idle_count() <= 1
        # ... and the one kept still serves the next call at once.
        assert (await lane(runner, source, "agent.a@1", 1))[0].ok
    assert sum(1 for pid in started(starts) if _running(pid)) == 0


async def test_count_caps_still_bound_the_pool(tmp_path: Path) -> None:
    starts = tmp_path / "starts"
    source = counted(starts, 0.05)
    async with running(settings(idle_per_key=2, idle_total=3)) as runner:
        await asyncio.gather(*(lane(runner, source, "agent.a@1", 2) for _ in range(5)))
        await asyncio.gather(*(lane(runner, source, "agent.b@1", 2) for _ in range(5)))
        await runner.pool.settle()
        assert runner.pool.idle_count() <= 3


async def _until(condition: Callable[[], bool], seconds: float) -> None:
    for _ in range(int(seconds / 0.05)):
        if condition():
            return
        await asyncio.sleep(0.05)
    raise AssertionError("not within the time")


def _running(pid: int) -> bool:
    """A function's process (not another one that got its pid since), alive and no zombie."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            if b"child.py" not in f.read():
                return False
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] not in (b"Z", b"X")
    except OSError:
        return False


async def test_unsafe_mode_ends_what_a_call_left_even_in_a_session_of_its_own(
    tmp_path: Path,
) -> None:
    # Without a PID namespace the supervisor finds the call's processes among its descendants
    # (it is their subreaper): a grandchild that left the process group and was orphaned is
    # found too, and ended, and the worker is not reused.
    marker = tmp_path / "escaped"
    source = (
        "import os, subprocess\n\ndef main():\n"
        "    if os.fork() == 0:\n        os.setsid()\n"
        f"        subprocess.Popen(['sleep', '31.4159'], stdout=open({str(marker)!r}, 'w'))\n"
        "        os._exit(0)\n"
        "    os.wait()\n    return os.getpid()\n"
    )
    async with running(settings()) as runner:
        first = await lane(runner, source, "agent.a@1", 1)
        second = await lane(runner, source, "agent.a@1", 1)
        assert first[0].ok and second[0].ok, (first, second)
        assert first[0].value != second[0].value  # the first worker was not kept
        assert marker.exists()
        assert not _sleeping("31.4159")


def _sleeping(marker: str) -> bool:
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                if f.read().split(b"\0")[:2] == [b"sleep", marker.encode()]:
                    return _running_any(int(entry))
        except OSError:
            continue
    return False


def _running_any(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] not in (b"Z", b"X")
    except OSError:
        return False


async def test_long_calls_of_a_new_function_run_at_once(tmp_path: Path) -> None:
    # Another function's calls are short; this one's are not known yet: its first calls get
    # interpreters of their own (one start after the other) instead of queueing for the one
    # that is busy for a second and a half. Each call marks its start and its end.
    marks = tmp_path / "marks"
    slow = (
        "import time\n\ndef main(n):\n"
        f"    open({str(marks)!r} + '.start', 'a').write(f'{{n}}\\n')\n"
        "    time.sleep(1.5)\n"
        f"    open({str(marks)!r} + '.end', 'a').write(f'{{n}}\\n')\n"
    )
    async with running(settings()) as runner:
        assert all(r.ok for r in await lane(runner, counted(tmp_path / "s", 0.001), "b", 5))
        calls = [FunctionCall(slow, {"n": n}, 10, owner="agent.slow@1") for n in range(6)]
        going = [asyncio.ensure_future(runner.call(call)) for call in calls]
        await _until(lambda: len(started(marks.with_suffix(".end"))) > 0, seconds=10)
        begun = len(started(marks.with_suffix(".start")))
        results = await asyncio.gather(*going)
    assert all(r.ok for r in results), results
    assert begun == 6  # every call had started before the first one ended
