"""Hostile user code against the real sandbox (bubblewrap, warm pool, the product's limits).

Each test runs code that tries to reach what it must not (the server's files, environment,
processes and network), or to exhaust what it must not (processes, memory, CPU, output), and
checks three things: this process (standing in for the server) carries on, the result names what
happened, and the same runner still serves a normal call afterwards.
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import socket
import sqlite3
import time
import uuid
import warnings
from collections.abc import AsyncIterator, Awaitable
from pathlib import Path
from typing import Any

import pytest

from dhub.sandbox.envs import base_python
from dhub.sandbox.isolation import Bubblewrap
from dhub.sandbox.runner import FunctionCall, SandboxRunner, SandboxSettings
from dhub.sandbox.worker import FunctionResult, Limits
from tests.conftest import ROOT, sandbox_settings

pytestmark = pytest.mark.asyncio

PING = "def main(x):\n    return x + 1\n"
# All a sandbox's environment may hold (isolation.py sets them; PWD is the shell convention).
HARMLESS_ENV = {
    "PATH", "HOME", "TMPDIR", "LANG", "PYTHONDONTWRITEBYTECODE", "PYTHONUNBUFFERED", "PWD",
}  # fmt: skip
# How a function reports what each attempt did: "ok", or the errno's name.
OUTCOME = (
    "import errno\n\n"
    "def outcome(attempt):\n"
    "    try:\n        attempt()\n        return 'ok'\n"
    "    except OSError as exc:\n"
    "        return errno.errorcode.get(exc.errno, type(exc).__name__)\n"
)


@pytest.fixture
async def runner() -> AsyncIterator[SandboxRunner]:
    runner = SandboxRunner(sandbox_settings())
    yield runner
    await runner.close()


async def run(
    runner: SandboxRunner,
    source: str,
    seconds: float = 5,
    owner: str = "hostile",
    network: bool = False,
    **inputs: Any,
) -> FunctionResult:
    return await runner.call(FunctionCall(source, inputs, seconds, network=network, owner=owner))


async def assert_still_serves(runner: SandboxRunner) -> None:
    result = await run(runner, PING, owner="bystander", x=41)
    assert (result.kind, result.value) == ("ok", 42), result


def processes_of(uid: int) -> list[int]:
    """The host's processes running as ``uid``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            status = Path(f"/proc/{entry}/status").read_text()
        except OSError:
            continue  # it ended meanwhile
        uids = next(line for line in status.splitlines() if line.startswith("Uid:"))
        if int(uids.split()[1]) == uid:
            found.append(int(entry))
    return found


async def gone(uid: int, seconds: float = 5) -> bool:
    deadline = time.monotonic() + seconds
    while processes_of(uid):
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.05)
    return True


async def within(seconds: float, call: Awaitable[FunctionResult]) -> FunctionResult | None:
    """The result, or None when none came within ``seconds``: a hung call is then cancelled
    (as many times as its clean-up code takes), so a hang fails the test instead of the run."""
    task = asyncio.ensure_future(call)
    done, _ = await asyncio.wait({task}, timeout=seconds)
    if done:
        return task.result()
    for _ in range(10):
        task.cancel()
        done, _ = await asyncio.wait({task}, timeout=0.5)
        if done:
            break
    return None


# -- files, environment, processes: the server's are not there ------------------------------


async def test_etc_shadow_does_not_exist(runner: SandboxRunner) -> None:
    result = await run(runner, "def main():\n    return open('/etc/shadow').read()\n")
    assert (result.kind, result.error_type) == ("exception", "FileNotFoundError"), result
    assert "/etc/shadow" in result.message
    reach = OUTCOME + (
        "import os\n\ndef main():\n"
        "    return {'etc': sorted(os.listdir('/etc')),\n"
        "            'passwd': outcome(lambda: open('/etc/passwd').read())}\n"
    )
    seen = await run(runner, reach)
    assert seen.value["passwd"] == "ENOENT"
    # Only the few files a Python program needs: the loader cache, TLS roots, name lookup, ...
    assert set(seen.value["etc"]) <= {
        "ld.so.cache", "localtime", "ssl", "ca-certificates", "resolv.conf", "hosts",
        "nsswitch.conf", "mime.types",
    }  # fmt: skip
    await assert_still_serves(runner)


async def test_the_servers_database_file_is_not_visible(
    runner: SandboxRunner, tmp_path: Path
) -> None:
    database = tmp_path / "dhub.db"
    with sqlite3.connect(database) as db:
        db.execute("CREATE TABLE tokens (secret TEXT)")
        db.execute("INSERT INTO tokens VALUES ('dhub_secret_token')")
    db.close()
    steal = OUTCOME + (
        "import os\n\ndef main(path):\n"
        "    return {'exists': os.path.exists(path),\n"
        "            'read': outcome(lambda: open(path, 'rb').read()),\n"
        "            'parent': outcome(lambda: os.listdir(os.path.dirname(path)))}\n"
    )
    result = await run(runner, steal, path=str(database))
    assert result.value == {"exists": False, "read": "ENOENT", "parent": "ENOENT"}, result
    assert "dhub_secret_token" not in json.dumps(result.value) + result.stderr
    await assert_still_serves(runner)


async def test_the_servers_environment_is_not_visible(
    runner: SandboxRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = f"s3cret-{uuid.uuid4().hex}"
    monkeypatch.setenv("DHUB_HOSTILE_SECRET", secret)
    spy = OUTCOME + (
        "import os\n\ndef main():\n"
        "    return {'environ': dict(os.environ),\n"
        "            'self': outcome(lambda: open('/proc/self/environ', 'rb').read()),\n"
        "            'init': outcome(lambda: open('/proc/1/environ', 'rb').read())}\n"
    )
    result = await run(runner, spy)
    assert result.ok, result
    assert secret not in json.dumps(result.value)
    assert set(result.value["environ"]) <= HARMLESS_ENV, result.value["environ"]
    assert result.value["environ"]["HOME"] == "/work"
    assert result.value["init"] == "EACCES"  # the sandbox's init is not the function's to read
    await assert_still_serves(runner)


async def test_root_home_and_the_repository_are_not_there(runner: SandboxRunner) -> None:
    look = OUTCOME + (
        "import os\n\ndef main(repo):\n"
        "    return {'/': sorted(os.listdir('/')), 'work': os.listdir('/work'),\n"
        "            'root': outcome(lambda: os.listdir('/root')),\n"
        "            'root_entries': os.listdir('/root') if os.path.isdir('/root') else [],\n"
        "            'repo': os.path.exists(repo)}\n"
    )
    result = await run(runner, look, repo=str(ROOT))
    assert result.ok, result
    seen = result.value
    assert seen["repo"] is False and seen["work"] == []  # /work is the sandbox's own, empty
    assert set(seen["/"]) <= {"usr", "bin", "lib", "lib64", "sbin", "etc", "tmp", "work",
                              "proc", "dev", "sandbox", *_python_roots()}  # fmt: skip
    # /root is there only when the Python installation lives under it, and then holds only the
    # way to it (this machine: /root/.pyenv/versions/3.11.x), none of root's files.
    prefix = Path(base_python()).parent.parent
    if prefix.is_relative_to("/root"):
        assert seen["root_entries"] == [prefix.relative_to("/root").parts[0]]
    else:
        assert seen["root"] == "ENOENT"
    await assert_still_serves(runner)


def _python_roots() -> set[str]:
    """Top-level directories leading to the Python installation, which the sandbox binds."""
    return {Path(base_python()).parts[1]}


async def test_proc_shows_only_the_sandbox(runner: SandboxRunner) -> None:
    snoop = OUTCOME + (
        "import os\n\ndef main(server, repo):\n"
        "    return {\n"
        "        'pids': sorted(int(p) for p in os.listdir('/proc') if p.isdigit()),\n"
        "        'me': os.getpid(),\n"
        "        'server': outcome(lambda: open(f'/proc/{server}/environ', 'rb').read()),\n"
        "        'init_root': outcome(lambda: os.listdir('/proc/1/root/')),\n"
        "        'init_cwd': outcome(lambda: os.listdir('/proc/1/cwd/')),\n"
        "        'self_root': sorted(os.listdir('/proc/self/root/')) == sorted(os.listdir('/')),\n"
        "        'repo': os.path.exists('/proc/self/root' + repo)\n"
        "                or os.path.exists('/proc/1/root' + repo),\n"
        "    }\n"
    )
    result = await run(runner, snoop, server=os.getpid(), repo=str(ROOT))
    assert result.ok, result
    seen = result.value
    assert seen["pids"] == sorted({1, seen["me"]})  # the sandbox's init and the function
    assert seen["server"] == "ENOENT"  # the server's pid does not exist in there
    assert (seen["init_root"], seen["init_cwd"]) == ("EACCES", "EACCES")
    assert seen["self_root"] is True and seen["repo"] is False
    await assert_still_serves(runner)


# -- network ---------------------------------------------------------------------------------

CONNECT = OUTCOME + (
    "import socket\n\n"
    "def main(targets, token):\n"
    "    def connect(host, port):\n"
    "        with socket.create_connection((host, port), timeout=2) as s:\n"
    "            s.sendall(token.encode())\n"
    "    return {'interfaces': [name for _, name in socket.if_nameindex()],\n"
    "            'tried': [outcome(lambda: connect(h, p)) for h, p in targets]}\n"
)


async def _listener(host: str = "127.0.0.1") -> tuple[asyncio.Server, int, asyncio.Queue[bytes]]:
    """A TCP service on the host (its loopback by default), recording what it receives."""
    received: asyncio.Queue[bytes] = asyncio.Queue()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        received.put_nowait(await reader.read(100))
        writer.close()

    server = await asyncio.start_server(serve, host, 0)
    return server, server.sockets[0].getsockname()[1], received


def _outside_address() -> str:
    """An address of this host that is not loopback: what the sandbox reaches by going out."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.connect(("192.0.2.1", 9))  # no packet is sent: this only picks a route
        return str(probe.getsockname()[0])


async def test_no_network_by_default(runner: SandboxRunner) -> None:
    server, port, received = await _listener()
    try:
        targets = [["127.0.0.1", port], ["1.1.1.1", 80]]
        result = await run(runner, CONNECT, targets=targets, token="from-the-sandbox")
    finally:
        server.close()
        await server.wait_closed()
    assert result.ok, result
    assert result.value["interfaces"] == ["lo"]  # its own loopback, nothing else
    # The host's loopback service is not reachable, and there is no route out at all.
    assert result.value["tried"] == ["ECONNREFUSED", "ENETUNREACH"]
    assert received.empty()
    await assert_still_serves(runner)


async def test_network_option_reaches_out_but_not_the_hosts_loopback(
    runner: SandboxRunner,
) -> None:
    """With ``network=True`` the function gets an outbound-only network: it reaches a service
    on this host's outside address (as it would reach any other host), while a service on the
    host's loopback (as PostgreSQL listens on 127.0.0.1:5432) stays out of reach, also through
    slirp4netns' gateway to the host (10.0.2.2)."""
    inner, inner_port, inner_got = await _listener("127.0.0.1")
    outer, outer_port, outer_got = await _listener("0.0.0.0")
    token = f"hello-{uuid.uuid4().hex[:8]}"
    targets = [
        ["127.0.0.1", inner_port], ["10.0.2.2", inner_port], [_outside_address(), outer_port]
    ]  # fmt: skip
    try:
        result = await run(runner, CONNECT, network=True, targets=targets, token=token)
        got = await asyncio.wait_for(outer_got.get(), 5)
    finally:
        for server in (inner, outer):
            server.close()
            await server.wait_closed()
    assert result.ok, result
    assert result.value["tried"] == ["ECONNREFUSED", "ENETUNREACH", "ok"]
    assert got == token.encode() and inner_got.empty()
    assert "tap0" in result.value["interfaces"]  # its own namespace, connected by slirp4netns
    await assert_still_serves(runner)


async def test_a_networked_function_reads_its_name_servers_and_tls_roots(
    runner: SandboxRunner,
) -> None:
    """With ``network=True`` the sandbox's /etc stays readable by its user (on a root server
    it once was root's alone): slirp4netns' name server, and the TLS roots of /etc/ssl."""
    source = (
        "import ssl\n\ndef main():\n"
        "    return {'resolv': open('/etc/resolv.conf').read(),\n"
        "            'roots': ssl.create_default_context().cert_store_stats()['x509_ca']}\n"
    )
    result = await run(runner, source, network=True)
    assert result.ok, result
    assert result.value["resolv"] == "nameserver 10.0.2.3\n"
    assert result.value["roots"] > 0
    await assert_still_serves(runner)


# -- processes -------------------------------------------------------------------------------

FORK_BOMB = (
    "import os, sys\n\ndef main():\n"
    "    print('uid', os.getuid(), file=sys.stderr, flush=True)\n"
    "    while True:\n"
    "        try:\n            os.fork()\n"
    "        except OSError:\n            pass\n"
)


async def test_a_fork_bomb_is_contained(runner: SandboxRunner) -> None:
    started = time.monotonic()
    result = await run(runner, FORK_BOMB, seconds=2)
    assert result.kind == "timeout" and "no result within 2 s" in result.message, result
    assert time.monotonic() - started < 6
    uid = int(result.stderr.split()[1])
    assert uid >= 200_000  # a sandbox user, not root
    assert await gone(uid), f"processes of the fork bomb's uid {uid} are left"
    await assert_still_serves(runner)


async def test_spawning_subprocesses_stops_at_the_process_limit(runner: SandboxRunner) -> None:
    spawn = (
        "import os, subprocess\n\ndef main():\n    children = []\n    try:\n"
        "        while True:\n"
        "            children.append(subprocess.Popen(['sleep', '600']))\n"
        "    except OSError as exc:\n"
        "        return {'children': len(children), 'error': str(exc), 'uid': os.getuid()}\n"
    )
    result = await run(runner, spawn)
    assert result.ok, result
    limit = runner.settings.limits.processes
    assert result.value["children"] < limit  # the function itself counts too
    assert "Resource temporarily unavailable" in result.value["error"]
    await assert_still_serves(runner)
    await runner.close()  # the worker goes, and its children with it
    assert await gone(result.value["uid"])


async def test_kill_the_parent_init_and_server(runner: SandboxRunner) -> None:
    kill = OUTCOME + (
        "import os\n\ndef main(server):\n"
        "    return {name: outcome(lambda: os.kill(pid, 9)) for name, pid in (\n"
        "        ('parent', os.getppid()), ('init', 1), ('server', server), ('everyone', -1))}\n"
    )
    result = await run(runner, kill, server=os.getpid())
    assert result.ok, result
    assert result.value == {
        # The parent is the sandbox's init, its supervisor: the kernel drops every signal
        # sent to a namespace's init from inside it (kill() itself reports success).
        "parent": "ok",
        "init": "ok",
        "server": "ESRCH",  # the server's pid does not exist in the sandbox's PID namespace
        "everyone": "ESRCH",  # kill(-1): nothing else there it may signal
    }
    assert (await run(runner, kill, server=os.getpid())).ok  # the same worker, unharmed
    await assert_still_serves(runner)


async def test_a_function_that_kills_itself(runner: SandboxRunner) -> None:
    result = await run(runner, "import os\n\ndef main():\n    os.kill(os.getpid(), 9)\n")
    assert (result.kind, result.error_type) == ("exception", "ProcessDied"), result
    assert result.message.startswith("the function's process")
    await assert_still_serves(runner)


SEGFAULT = "import ctypes\n\ndef main():\n    return ctypes.string_at(0)\n"


async def test_a_segfault_is_contained(runner: SandboxRunner) -> None:
    result = await run(runner, SEGFAULT)
    assert (result.kind, result.error_type) == ("exception", "ProcessDied"), result
    await assert_still_serves(runner)


async def test_a_segfault_is_named(runner: SandboxRunner) -> None:
    result = await run(runner, SEGFAULT)
    assert result.message == "the function's process was killed by SIGSEGV", result


# -- memory, time, output --------------------------------------------------------------------


async def test_allocating_10_gb_is_a_memory_error(runner: SandboxRunner) -> None:
    result = await run(runner, "def main():\n    return len(bytearray(10 * 1024**3))\n")
    assert result.kind == "memory" and "out of memory" in result.message, result
    await assert_still_serves(runner)


async def test_an_infinite_loop_times_out(runner: SandboxRunner) -> None:
    started = time.monotonic()
    result = await run(runner, "def main():\n    while True:\n        pass\n", seconds=2)
    elapsed = time.monotonic() - started
    assert result.kind == "timeout" and result.message == "no result within 2 s", result
    assert 2 <= elapsed < 4
    await assert_still_serves(runner)


async def test_an_infinite_loop_at_import_times_out() -> None:
    runner = SandboxRunner(sandbox_settings(limits=Limits(start_seconds=2)))
    try:
        result = await run(runner, "while True:\n    pass\n\ndef main():\n    return 1\n")
        assert result.kind == "timeout" and result.message == "no result within 2 s", result
        await assert_still_serves(runner)
    finally:
        await runner.close()


SPINNER = (
    "import os, threading, time\n\n"
    "def spin():\n    while True:\n        pass\n\n"
    "def main(join, linger=0):\n"
    "    thread = threading.Thread(target=spin, daemon=True)\n    thread.start()\n"
    "    if join:\n        thread.join()\n"
    "    time.sleep(linger)\n    return os.getuid()\n"
)


async def test_a_cpu_loop_in_a_thread_times_out(runner: SandboxRunner) -> None:
    started = time.monotonic()
    result = await run(runner, SPINNER, seconds=2, join=True)
    assert result.kind == "timeout" and result.message == "no result within 2 s", result
    assert time.monotonic() - started < 4
    await assert_still_serves(runner)


CPU_BURNER = "def main():\n    while True:\n        pass\n"


async def test_the_cpu_limit_ends_a_worker() -> None:
    """The worker's lifetime CPU budget (1 s here) ends it before the 10 s wall time."""
    runner = SandboxRunner(sandbox_settings(limits=Limits(worker_cpu_seconds=1)))
    try:
        started = time.monotonic()
        result = await run(runner, CPU_BURNER, seconds=10)
        assert result.kind in ("timeout", "exception"), result
        assert time.monotonic() - started < 8
        await assert_still_serves(runner)
    finally:
        await runner.close()


async def test_the_cpu_limit_is_a_timeout() -> None:
    runner = SandboxRunner(sandbox_settings(limits=Limits(worker_cpu_seconds=1)))
    try:
        result = await run(runner, CPU_BURNER, seconds=10)
        assert (result.kind, result.message) == ("timeout", "the CPU time limit was reached")
    finally:
        await runner.close()


async def test_a_thread_left_spinning_does_not_fail_the_next_call(runner: SandboxRunner) -> None:
    # The first call lingers until the pool's spare worker is ready, so its own worker is the
    # most recently idle one, the one the next call takes.
    first = asyncio.ensure_future(run(runner, SPINNER, seconds=2, join=False, linger=1))
    await runner.pool.settle()
    result = await first
    assert result.ok, result
    assert await gone(result.value, seconds=10), "the spinning worker was not ended"
    again = await run(runner, SPINNER, join=False)
    assert again.ok, again


async def test_printing_100_mb_neither_hangs_nor_fills_the_servers_memory(
    runner: SandboxRunner,
) -> None:
    noisy = (
        "import sys\n\ndef main():\n"
        "    chunk = 'x' * (1 << 20)\n"
        "    for _ in range(50):\n"
        "        sys.stdout.write(chunk)\n        sys.stderr.write(chunk)\n"
        "    print('the end')\n    return 'done'\n"
    )
    before = _reset_peak_memory()
    result = await run(runner, noisy, seconds=20)
    peak = _memory_kb("VmHWM")
    assert (result.kind, result.value) == ("ok", "done"), result
    assert len(result.stderr) <= 10_000 and result.stderr.endswith("the end\n")
    assert peak - before < 50_000, f"the server's memory grew by {peak - before} kB"
    await assert_still_serves(runner)


async def test_a_forged_answer_does_not_shift_later_results(runner: SandboxRunner) -> None:
    forger = (
        "import os\n\ndef main(x):\n"
        "    if x == 0:\n"
        "        for fd in range(3, 10):\n"
        "            try:\n"
        '                os.write(fd, b\'{"kind": "ok", "value": "forged"}\\n\')\n'
        "            except OSError:\n                pass\n"
        "    return x\n"
    )
    await run(runner, forger, x=0)
    results = [await run(runner, forger, x=x) for x in (1, 2)]
    assert [r.value for r in results] == [1, 2], results


def _reset_peak_memory() -> int:
    """Reset this process's peak resident memory (VmHWM) to now; the current size, in kB."""
    Path("/proc/self/clear_refs").write_text("5")
    return _memory_kb("VmRSS")


def _memory_kb(field: str) -> int:
    status = Path("/proc/self/status").read_text()
    line = next(line for line in status.splitlines() if line.startswith(field + ":"))
    return int(line.split()[1])


async def test_a_100_mb_result_is_invalid_output() -> None:
    # A small limit makes the failure certain: one full pipe (64 kB) is past twice the limit.
    runner = SandboxRunner(sandbox_settings(limits=Limits(output_bytes=10_000)))
    huge = "def main():\n    return 'x' * (100 << 20)\n"
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ResourceWarning)
            result = await within(5, run(runner, huge, seconds=20))
            gc.collect()  # a leaked pipe or process transport says so now
        await assert_still_serves(runner)
    finally:
        await runner.close()
    assert result is not None, "the call never returned"
    assert result.kind == "invalid_output", result
    assert result.message == "the result is over 10000 bytes"
    assert not [w for w in caught if "unclosed" in str(w.message)], "pipes leaked"


# -- files -----------------------------------------------------------------------------------

WRITER = OUTCOME + (
    "import os\n\ndef main(paths):\n"
    "    def write(path):\n"
    "        with open(path, 'w') as f:\n            f.write('hostile')\n"
    "    return {path: outcome(lambda: write(path)) for path in paths}\n"
)


async def test_writing_outside_tmp_and_work_fails(runner: SandboxRunner, tmp_path: Path) -> None:
    name = f"hostile-{uuid.uuid4().hex[:8]}"
    repo_file, host_tmp_file = ROOT / name, tmp_path / name
    paths = [f"/usr/{name}", f"/etc/{name}", f"/{name}", f"/sandbox/{name}", f"/dev/{name}",
             str(repo_file), str(host_tmp_file), f"/tmp/{name}", f"/work/{name}"]  # fmt: skip
    try:
        result = await run(runner, WRITER, paths=paths)
        assert result.ok, result
        assert result.value == {
            f"/usr/{name}": "EROFS",
            f"/etc/{name}": "EROFS",  # the sandbox's root is read-only, /dev too
            f"/{name}": "EROFS",
            f"/sandbox/{name}": "EROFS",
            f"/dev/{name}": "EROFS",
            str(repo_file): "ENOENT",  # the repository does not exist in there
            str(host_tmp_file): "ENOENT",  # nor the server's /tmp
            f"/tmp/{name}": "ok",
            f"/work/{name}": "ok",
        }
        # Nothing landed on the host; the sandbox's /tmp is not the host's either.
        assert not any(map(os.path.exists, (repo_file, host_tmp_file, f"/tmp/{name}")))
    finally:
        repo_file.unlink(missing_ok=True)
        host_tmp_file.unlink(missing_ok=True)
    await assert_still_serves(runner)


async def test_tmp_and_work_are_private_to_a_worker(runner: SandboxRunner) -> None:
    scratch = (
        "import os\n\ndef main(name, write):\n"
        "    if write:\n"
        "        for d in ('/tmp', '/work'):\n"
        "            with open(os.path.join(d, name), 'w') as f:\n                f.write('mine')\n"
        "    return {d: os.listdir(d) for d in ('/tmp', '/work')}\n"
    )
    name = f"private-{uuid.uuid4().hex[:8]}"
    mine = await run(runner, scratch, owner="agent.a@1", name=name, write=True)
    assert mine.value == {"/tmp": [name], "/work": [name]}, mine
    theirs = await run(runner, scratch, owner="agent.b@1", name=name, write=False)
    assert theirs.value == {"/tmp": [], "/work": []}, theirs


# -- when bubblewrap cannot run ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("bwrap", "why"),
    [
        ("/nonexistent/bwrap", "bubblewrap is not installed"),
        ("/usr/bin/false", "bubblewrap cannot start here"),
    ],
)
async def test_no_user_code_runs_without_bubblewrap(bwrap: str, why: str, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    runner = SandboxRunner(sandbox_settings())
    runner.isolation = Bubblewrap(bwrap=bwrap)  # before the first call, which checks it
    leaky = f"def main():\n    open({str(marker)!r}, 'w').close()\n    return 1\n"
    try:
        for _ in range(2):  # every call, not only the first
            result = await run(runner, leaky)
            assert result.kind == "sandbox", result
            assert why in result.message and "DHUB_SANDBOX=unsafe" in result.message
    finally:
        await runner.close()
    assert not marker.exists()


async def test_unsafe_is_the_operators_explicit_opt_out(tmp_path: Path) -> None:
    # DHUB_SANDBOX=unsafe: the operator chose to run user code without isolation. It runs, in a
    # process of its own with its limits, but sees the machine as the server does: here, the
    # repository and the host's /tmp that bubblewrap hides.
    runner = SandboxRunner(SandboxSettings(isolation="unsafe", envs_dir=tmp_path / "envs"))
    look = "import os\n\ndef main(repo, tmp):\n    return [os.path.exists(repo), os.listdir(tmp)]\n"
    (tmp_path / "seen").touch()
    try:
        result = await run(runner, look, repo=str(ROOT), tmp=str(tmp_path))
    finally:
        await runner.close()
    assert result.ok, result
    assert result.value[0] is True and "seen" in result.value[1]
