"""The plain function runner: user Python in a child interpreter, errors as results."""

from __future__ import annotations

import os
import time

import pytest

from dhub.runtime.functions import SubprocessFunctionRunner

pytestmark = pytest.mark.asyncio


@pytest.fixture
def runner() -> SubprocessFunctionRunner:
    return SubprocessFunctionRunner(max_output=100_000)


async def test_fixture_code_nodes_run(runner: SubprocessFunctionRunner) -> None:
    square = "def main(x):\n    return {'sq': x * x}\n"
    assert (await runner.call(square, {"x": 3}, 10)).value == {"sq": 9}
    classify = (
        "def main(text: str) -> dict:\n    t = text.lower()\n"
        "    urgent = any(w in t for w in ('outage', 'down'))\n"
        "    return {'category': 'bug' if urgent else 'question', 'urgent': urgent}\n"
    )
    result = await runner.call(classify, {"text": "Total outage since 9am"}, 10)
    assert result.ok and result.value == {"category": "bug", "urgent": True}


async def test_entry_point_resolution(runner: SubprocessFunctionRunner) -> None:
    two = "def helper():\n    return 1\n\ndef lookup(order_id):\n    return {'id': order_id}\n"
    assert (await runner.call(two, {"order_id": "A"}, 10, entry="lookup")).value == {"id": "A"}
    only = "import math\n\ndef area(r):\n    return math.pi * r * r\n"
    assert (await runner.call(only, {"r": 1}, 10)).value == pytest.approx(3.14159, 1e-4)
    none = "def a():\n    pass\n\ndef b():\n    pass\n"
    result = await runner.call(none, {}, 10)
    assert result.kind == "exception" and "entry point" in result.message


async def test_user_exception_comes_back_with_its_traceback(
    runner: SubprocessFunctionRunner,
) -> None:
    flaky = "def main(total):\n    raise RuntimeError('upstream unavailable')\n"
    result = await runner.call(flaky, {"total": 1}, 10)
    assert result.kind == "exception"
    assert (result.error_type, result.message) == ("RuntimeError", "upstream unavailable")
    assert 'File "<function>", line 2, in main' in result.traceback
    assert "dhub" not in result.traceback  # the platform's frames are not the user's business


async def test_prints_go_to_stderr_not_into_the_result(runner: SubprocessFunctionRunner) -> None:
    noisy = "def main():\n    print('hello')\n    return 5\n"
    result = await runner.call(noisy, {}, 10)
    assert result.value == 5 and "hello" in result.stderr


async def test_timeout_kills_the_process_group(runner: SubprocessFunctionRunner) -> None:
    marker = "31.4159"  # an unusual sleep length to find the grandchild by
    spawner = (
        "import subprocess, time\n"
        "def main():\n"
        f"    subprocess.Popen(['sleep', '{marker}'])\n"
        "    time.sleep(30)\n"
    )
    started = time.monotonic()
    result = await runner.call(spawner, {}, 1.5)
    assert result.kind == "timeout"
    assert time.monotonic() - started < 10
    assert not _running(["sleep", marker])  # the grandchild went with the group


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


async def test_bad_outputs_and_crashes(runner: SubprocessFunctionRunner) -> None:
    unjsonable = "def main():\n    return {'s': {1, 2}}\n"
    assert (await runner.call(unjsonable, {}, 10)).kind == "invalid_output"
    huge = "def main():\n    return 'x' * 1_000_000\n"
    assert (await runner.call(huge, {}, 10)).kind == "output_too_large"
    dies = "import os\n\ndef main():\n    os._exit(3)\n"
    crashed = await runner.call(dies, {}, 10)
    assert crashed.kind == "crashed" and "3" in crashed.message
    syntax = "def main(:\n"
    assert (await runner.call(syntax, {}, 10)).error_type == "SyntaxError"


async def test_the_child_does_not_see_the_server_environment(
    runner: SubprocessFunctionRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DHUB_ADMIN_TOKEN", "secret-token")
    peek = (
        "import os\n\ndef main():\n"
        "    return {'token': os.environ.get('DHUB_ADMIN_TOKEN'), 'cwd': os.getcwd()}\n"
    )
    result = await runner.call(peek, {}, 10)
    assert result.value["token"] is None
    assert result.value["cwd"] != os.getcwd()
