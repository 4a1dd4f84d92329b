"""The sandbox and the event loop it runs on: nothing of a sandbox is left when the loop ends."""

from __future__ import annotations

import asyncio
import gc
import sys

import uvloop

from dhub.sandbox.runner import FunctionCall, SandboxRunner
from tests.conftest import sandbox_settings


def test_nothing_of_a_sandbox_outlives_its_event_loop() -> None:
    """A server's loop closes right after the runner does (uvicorn's shutdown): a pipe to a
    sandbox still open then is reported unclosed, and breaks the next loop that closes."""
    noisy = (
        "import sys, threading, time\n\ndef chatter():\n    while True:\n"
        "        sys.stderr.write('x' * 4096)\n        time.sleep(0.001)\n\n"
        "def main():\n    threading.Thread(target=chatter, daemon=True).start()\n"
        "    return 1\n"
    )
    left: list[str] = []
    previous = sys.unraisablehook
    sys.unraisablehook = lambda u: left.append(f"{u.exc_type.__name__}: {u.exc_value} {u.object}")
    try:
        for _ in range(3):
            with asyncio.Runner(loop_factory=uvloop.new_event_loop) as loop:

                async def serve_and_stop() -> None:
                    runner = SandboxRunner(sandbox_settings())
                    calls = (runner.call(FunctionCall(noisy, {}, 10)) for _ in range(4))
                    results = await asyncio.gather(*calls)
                    assert all(result.value == 1 for result in results)
                    await runner.close()

                loop.run(serve_and_stop())
            gc.collect()
    finally:
        sys.unraisablehook = previous
    assert left == []
