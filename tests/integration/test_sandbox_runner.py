"""The sandbox runner: user Python under bubblewrap, errors as results, the warm pool."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from dhub.domain.function_spec import derive_parameters
from dhub.sandbox.runner import FunctionCall, SandboxRunner
from dhub.sandbox.worker import FunctionResult, Limits
from tests.conftest import sandbox_settings

pytestmark = pytest.mark.asyncio


@pytest.fixture
async def runner() -> AsyncIterator[SandboxRunner]:
    runner = SandboxRunner(sandbox_settings(limits=Limits(output_bytes=100_000)))
    yield runner
    await runner.close()


async def call(
    runner: SandboxRunner, source: str, seconds: float = 10, owner: str = "t", **inputs: Any
) -> FunctionResult:
    return await runner.call(FunctionCall(source, inputs, seconds, owner=owner))


async def test_fixture_code_nodes_run(runner: SandboxRunner) -> None:
    square = "def main(x):\n    return {'sq': x * x}\n"
    assert (await call(runner, square, x=3)).value == {"sq": 9}
    classify = (
        "def main(text: str) -> dict:\n    t = text.lower()\n"
        "    urgent = any(w in t for w in ('outage', 'down'))\n"
        "    return {'category': 'bug' if urgent else 'question', 'urgent': urgent}\n"
    )
    result = await call(runner, classify, text="Total outage since 9am")
    assert result.ok and result.value == {"category": "bug", "urgent": True}


async def test_entry_point_resolution(runner: SandboxRunner) -> None:
    two = "def helper():\n    return 1\n\ndef lookup(order_id):\n    return {'id': order_id}\n"
    named = FunctionCall(two, {"order_id": "A"}, 10, entry="lookup")
    assert (await runner.call(named)).value == {"id": "A"}
    only = "import math\n\ndef area(r):\n    return math.pi * r * r\n"
    assert (await call(runner, only, r=1)).value == pytest.approx(3.14159, 1e-4)
    none = "def a():\n    pass\n\ndef b():\n    pass\n"
    result = await call(runner, none)
    assert result.kind == "exception" and "entry point" in result.message


async def test_user_exception_comes_back_with_its_traceback(runner: SandboxRunner) -> None:
    flaky = "def main(total):\n    raise RuntimeError('upstream unavailable')\n"
    result = await call(runner, flaky, total=1)
    assert result.kind == "exception"
    assert (result.error_type, result.message) == ("RuntimeError", "upstream unavailable")
    assert 'File "<function>", line 2, in main' in result.traceback
    assert "raise RuntimeError('upstream unavailable')" in result.traceback  # the user's line
    assert "child.py" not in result.traceback  # the platform's frames are not the user's


async def test_prints_go_to_stderr_not_into_the_result(runner: SandboxRunner) -> None:
    noisy = (
        "import os\n\ndef main():\n    print('hello')\n"
        '    os.write(1, b\'{"kind": "ok", "value": 6}\\n\')  # a forged answer\n'
        "    return 5\n"
    )
    result = await call(runner, noisy)
    assert result.value == 5 and "hello" in result.stderr


async def test_bad_outputs_and_crashes(runner: SandboxRunner) -> None:
    unjsonable = "def main():\n    return {'s': {1, 2}}\n"
    assert (await call(runner, unjsonable)).kind == "invalid_output"
    huge = "def main():\n    return 'x' * 1_000_000\n"
    too_big = await call(runner, huge)
    assert too_big.kind == "invalid_output" and "over 100000 bytes" in too_big.message
    dies = "import os\n\ndef main():\n    os._exit(3)\n"
    died = await call(runner, dies)
    assert died.kind == "exception" and died.message == "the function's process exited with code 3"
    syntax = "def main(:\n"
    assert (await call(runner, syntax)).error_type == "SyntaxError"


async def test_the_warm_pool_reuses_a_worker_for_one_owner_only(runner: SandboxRunner) -> None:
    counter = "calls = 0\n\ndef main():\n    global calls\n    calls += 1\n    return calls\n"
    first = [(await call(runner, counter, owner="agent.a@1")).value for _ in range(3)]
    assert first == [1, 2, 3]  # the same interpreter served all three
    assert (await call(runner, counter, owner="agent.b@1")).value == 1  # never shared
    await runner.pool.settle()
    assert runner.pool.idle_count() >= 2  # a spare was started for each owner


async def test_a_worker_is_not_reused_after_a_timeout(runner: SandboxRunner) -> None:
    source = (
        "import time\ncalls = 0\n\ndef main(wait):\n    global calls\n    calls += 1\n"
        "    time.sleep(wait)\n    return calls\n"
    )
    assert (await call(runner, source, wait=0)).value == 1
    assert (await call(runner, source, seconds=0.5, wait=5)).kind == "timeout"
    await runner.pool.settle()
    assert (await call(runner, source, wait=0)).value in (1, 2)  # a fresh or pre-started one
    assert (await call(runner, source, wait=0)).value in (2, 3)


async def test_concurrent_calls_of_one_function_run_side_by_side(runner: SandboxRunner) -> None:
    sleepy = "import time\n\ndef main():\n    time.sleep(1)\n    return 1\n"
    started = time.monotonic()
    results = await asyncio.gather(*(call(runner, sleepy) for _ in range(4)))
    assert [r.value for r in results] == [1, 1, 1, 1]
    assert time.monotonic() - started < 3.5  # not one after the other (4 s)


async def test_a_cancelled_call_ends_its_sandbox(runner: SandboxRunner) -> None:
    marker = "27.1828"
    spawner = (
        "import subprocess, time\n\ndef main():\n"
        f"    subprocess.Popen(['sleep', '{marker}'])\n    time.sleep(30)\n"
    )
    task = asyncio.ensure_future(call(runner, spawner))
    for _ in range(100):
        await asyncio.sleep(0.05)
        if _running(["sleep", marker]):
            break
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    for _ in range(40):
        if not _running(["sleep", marker]):
            break
        await asyncio.sleep(0.05)
    assert not _running(["sleep", marker])


def _running(argv: list[str]) -> bool:
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    if f.read().split(b"\0")[:2] == [a.encode() for a in argv]:
                        return True
            except OSError:
                continue
    return False


async def test_arguments_and_results_are_checked_against_the_schemas(
    runner: SandboxRunner,
) -> None:
    refund = "def refund(amount: int, note: str = ''):\n    return {'refunded': amount}\n"
    parameters = derive_parameters(refund, "refund").schema
    bad = await runner.call(FunctionCall(refund, {"amount": "ten"}, 10, parameters=parameters))
    assert bad.kind == "invalid_input" and "inputs.amount" in bad.message
    wants = {"refunded": {"type": "string"}}
    ok_args = FunctionCall(refund, {"amount": 3}, 10, parameters=parameters, outputs=wants)
    wrong = await runner.call(ok_args)
    assert wrong.kind == "invalid_output" and "outputs.refunded" in wrong.message


async def test_decorators_act_across_calls_of_a_warm_worker(runner: SandboxRunner) -> None:
    flaky = (
        "calls = 0\n\ndef main():\n    global calls\n    calls += 1\n"
        "    if calls < 3:\n        raise RuntimeError(f'try {calls}')\n    return calls\n"
    )
    retry = ({"decorator": "retry", "name": "main", "arguments": {"attempts": 3}},)
    result = await runner.call(FunctionCall(flaky, {}, 10, owner="r", decorators=retry))
    assert (result.kind, result.value) == ("ok", 3)
    counter = "calls = 0\n\ndef main(x):\n    global calls\n    calls += 1\n    return calls\n"
    cache = ({"decorator": "cache", "name": "main", "arguments": {"ttl": 600}},)
    values = [
        (await runner.call(FunctionCall(counter, {"x": x}, 10, owner="c", decorators=cache))).value
        for x in (1, 1, 2, 1)
    ]
    assert values == [1, 1, 2, 1]  # the repeats came from the cache, not the function


async def test_calls_beyond_the_concurrency_wait_their_turn() -> None:
    """Two at a time: four calls run in two waves, and a queued call's timeout starts when
    it runs (each has 0.8 s, the last waits 0.5 s first)."""
    runner = SandboxRunner(sandbox_settings(concurrency=2))
    spans = "import time\n\ndef main():\n    t = time.time()\n    time.sleep(0.5)\n" \
            "    return [t, time.time()]\n"  # fmt: skip
    try:
        results = await asyncio.gather(*(call(runner, spans, seconds=0.8) for _ in range(4)))
    finally:
        await runner.close()
    assert all(r.ok for r in results), results
    edges = sorted([(s, 1) for s, _ in (r.value for r in results)]
                   + [(e, -1) for _, e in (r.value for r in results)])  # fmt: skip
    running = peak = 0
    for _, step in edges:
        running += step
        peak = max(peak, running)
    assert peak == 2
