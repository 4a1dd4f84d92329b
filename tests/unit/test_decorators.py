"""Function decorators on the server side of the sandbox: retry, timeout, cache, rate limit.

The call itself is an honest fake of the sandbox seam (a script of results), and time is a fake
clock whose sleeps move it forward at once, so every delay is observed exactly.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from dhub.sandbox.decorators import Decorators, Policy
from dhub.sandbox.worker import FunctionResult

OK = FunctionResult("ok", value=1)
BOOM = FunctionResult("exception", error_type="RuntimeError", message="boom")


class Clock:
    def __init__(self) -> None:
        self.time = 0.0
        self.slept: list[float] = []  # the times sleeps ended at

    def now(self) -> float:
        return self.time

    async def sleep_until(self, at: float) -> None:
        self.slept.append(at)
        self.time = max(self.time, at)
        await asyncio.sleep(0)


class Script:
    """The sandbox call: results in order, recording the seconds each call was given."""

    def __init__(self, *results: FunctionResult) -> None:
        self.results = list(results)
        self.calls: list[float] = []

    async def __call__(self, seconds: float) -> FunctionResult:
        self.calls.append(seconds)
        return self.results.pop(0) if len(self.results) > 1 else self.results[0]


def policy(*entries: tuple[str, dict[str, Any]]) -> Policy:
    return Policy.of({"decorator": d, "name": "f", "arguments": a} for d, a in entries)


async def run(
    decorators: Decorators, p: Policy, script: Script, inputs: Any = None, seconds: float = 30
) -> FunctionResult:
    return await decorators.run("fn", p, inputs or {"x": 1}, seconds, script)


@pytest.mark.parametrize(
    ("backoff", "waits"),
    [("fixed", [2.0, 4.0, 6.0]), ("linear", [2.0, 6.0, 12.0]), ("exponential", [2.0, 6.0, 14.0])],
)
async def test_retry_waits_by_its_backoff_then_gives_up(backoff: str, waits: list[float]) -> None:
    clock = Clock()
    script = Script(BOOM)
    retry = policy(("retry", {"attempts": 4, "delay": 2, "backoff": backoff}))
    result = await run(Decorators(clock), retry, script)
    assert result == BOOM and len(script.calls) == 4  # attempts counts every try
    assert clock.slept == waits  # 2, then 2/4/8 more by the backoff


async def test_retry_stops_at_the_first_success_and_skips_bad_input() -> None:
    script = Script(BOOM, FunctionResult("timeout"), OK)
    retry = policy(("retry", {"attempts": 5}))
    assert await run(Decorators(Clock()), retry, script) == OK
    assert len(script.calls) == 3
    bad_input = Script(FunctionResult("invalid_input", message="x"))
    await run(Decorators(Clock()), retry, bad_input)
    assert len(bad_input.calls) == 1  # the same arguments would fail the same way


async def test_timeout_shortens_the_call_but_never_lengthens_it() -> None:
    script = Script(OK)
    await run(Decorators(Clock()), policy(("timeout", {"seconds": 3})), script, seconds=30)
    await run(Decorators(Clock()), policy(("timeout", {"seconds": 60})), script, seconds=30)
    assert script.calls == [3.0, 30.0]


async def test_cache_reuses_a_success_for_the_same_arguments_until_its_ttl() -> None:
    clock = Clock()
    decorators, script = Decorators(clock), Script(OK)
    cached = policy(("cache", {"ttl": 60}))
    for _ in range(3):
        await run(decorators, cached, script, {"b": 2, "a": 1})
    await run(decorators, cached, script, {"a": 1, "b": 2})  # same arguments, other order
    assert len(script.calls) == 1
    await run(decorators, cached, script, {"a": 2})
    assert len(script.calls) == 2  # other arguments
    clock.time = 60.0
    await run(decorators, cached, script, {"a": 1, "b": 2})
    assert len(script.calls) == 3  # expired


async def test_cache_never_keeps_a_failure() -> None:
    decorators, script = Decorators(Clock()), Script(BOOM, OK)
    cached = policy(("cache", {"ttl": 60}))
    assert await run(decorators, cached, script) == BOOM
    assert await run(decorators, cached, script) == OK
    assert await run(decorators, cached, script) == OK
    assert len(script.calls) == 2


async def test_rate_limit_makes_extra_calls_wait_for_a_slot() -> None:
    clock = Clock()
    decorators, script = Decorators(clock), Script(OK)
    limited = policy(("rate_limit", {"calls": 2, "period": 10}))
    starts = []
    for _ in range(5):
        await run(decorators, limited, script)
        starts.append(clock.time)
    assert starts == [0.0, 0.0, 10.0, 10.0, 20.0]


async def test_rate_limit_holds_for_concurrent_callers() -> None:
    clock = Clock()
    decorators, script = Decorators(clock), Script(OK)
    limited = policy(("rate_limit", {"calls": 1, "period": 5}))
    await asyncio.gather(*(run(decorators, limited, script) for _ in range(3)))
    assert clock.slept == [5.0, 10.0]


async def test_rate_limit_applies_to_each_retry() -> None:
    clock = Clock()
    script = Script(BOOM, OK)
    both = policy(("retry", {"attempts": 2}), ("rate_limit", {"calls": 1, "period": 7}))
    assert await run(Decorators(clock), both, script) == OK
    assert clock.time == 7.0


def test_policy_reads_every_decorator() -> None:
    p = policy(
        ("retry", {"attempts": 3, "delay": 1.5, "backoff": "linear"}),
        ("timeout", {"seconds": 9}),
        ("cache", {"ttl": 30}),
        ("rate_limit", {"calls": 10, "period": 60}),
    )
    assert p == Policy(3, 1.5, "linear", 9.0, 30.0, (10, 60.0))
    assert Policy.of([]) == Policy()
