"""The sandbox and the event loop it runs on: nothing of a sandbox is left when the loop ends."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import signal
import sys
from pathlib import Path

import pytest
import uvloop

from dhub.sandbox.errors import SandboxUnavailable
from dhub.sandbox.network import SETUP_SECONDS, launch_with_outbound_network
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


# Stands in for bubblewrap killed while it set the sandbox up: its first process, in a
# session of its own (as bubblewrap makes it), outlives it holding the pipes, and the info
# pipe closes before any info (the network setup then fails).
_SURVIVING_LAUNCHER = """\
import os, sys, time
pid = os.fork()
if pid == 0:
    os.setsid()
    os.closerange(3, 4096)
    time.sleep(120)
    os._exit(0)
open(sys.argv[-1], "w").write(str(pid))
os.closerange(3, 4096)
time.sleep(120)
"""


def test_a_network_launch_that_fails_never_waits_on_what_outlived_bubblewrap(
    tmp_path: Path,
) -> None:
    """The CI hang of 2026-12-02: the failed launch waited for bubblewrap's pipes to close,
    which the surviving process held, so the server's shutdown never ended."""
    launcher = tmp_path / "bwrap"
    launcher.write_text(f"#!{sys.executable}\n{_SURVIVING_LAUNCHER}")
    launcher.chmod(0o755)
    pid_file = tmp_path / "survivor.pid"

    async def launch() -> None:
        pipe = asyncio.subprocess.PIPE
        async with asyncio.timeout(SETUP_SECONDS + 5):
            with pytest.raises(SandboxUnavailable):
                await launch_with_outbound_network(
                    [str(launcher), "--unshare-net", str(pid_file)],
                    stdin=pipe, stdout=pipe, stderr=pipe, start_new_session=True,
                )  # fmt: skip

    try:
        asyncio.run(launch())
    finally:
        if pid_file.exists():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid_file.read_text()), signal.SIGKILL)
