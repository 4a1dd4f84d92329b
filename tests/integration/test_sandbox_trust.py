"""Hostile user code against the sandbox's trust boundaries (real bubblewrap, the real runner):
what a call leaves behind never reaches the next call or another user, a function cannot forge
its result or widen its sandbox (namespaces, ptrace, mounts, keyrings), and its files cannot
hold more memory than its limit. Each attack is contained: the runner carries on, and calls of
other owners running meanwhile are unaffected (docs/sandbox.md, "Threat model")."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from typing import Any

import pytest

from dhub.domain.ids import new_id, now_ms
from dhub.engine.compile import CompiledGraph, compile_document
from dhub.runtime.durable import RunExecutor
from dhub.runtime.ports import NoModel, RealClock, SandboxFunctions
from dhub.runtime.run_writer import start_state
from dhub.sandbox.runner import FunctionCall, SandboxRunner
from dhub.sandbox.worker import FunctionResult, Limits
from dhub.store import agents
from dhub.store import runs as store
from dhub.store.db import Database
from tests.conftest import sandbox_settings
from tests.integration.test_runs_store import agent_row
from tests.integration.test_sandbox_hostile import OUTCOME, PING, assert_still_serves
from tests.integration.test_sandbox_hostile import runner as runner

pytestmark = pytest.mark.asyncio

SCRATCH = ("/tmp", "/work", "/dev/shm")


async def run(
    runner: SandboxRunner, source: str, owner: str = "trust", seconds: float = 10, **inputs: Any
) -> FunctionResult:
    return await runner.call(FunctionCall(source, inputs, seconds, owner=owner))


async def with_bystander(runner: SandboxRunner, attack: Any) -> FunctionResult:
    """Run ``attack`` while another owner's calls go on; they must all answer as usual."""

    async def bystander() -> list[FunctionResult]:
        return [await run(runner, PING, owner="bystander", x=x) for x in range(5)]

    result, others = await asyncio.gather(attack, bystander())
    assert [(r.kind, r.value) for r in others] == [("ok", x + 1) for x in range(5)], others
    return result


# -- temporary files: sized out of the memory limit --------------------------------------------

FILL = (
    "import errno, os\n\n"
    "def fill(place):\n"
    "    n, opened = 0, False\n"
    "    chunk = b'x' * (1 << 20)\n"
    "    try:\n"
    "        while True:\n"
    "            with open(os.path.join(place, f'.fill-{n}'), 'wb') as f:\n"
    "                opened = True\n"
    "                for _ in range(8):\n"
    "                    f.write(chunk)\n                    f.flush()\n"
    "            n += 1\n"
    "    except OSError as exc:\n"
    "        stat = os.statvfs(place)\n"
    "        used = (stat.f_blocks - stat.f_bfree) * stat.f_frsize\n"
    "        return used if opened else 0, errno.errorcode.get(exc.errno, str(exc.errno))\n\n"
    "def main(catch):\n"
    "    if not catch:  # an uncaught error: the function's result says what happened\n"
    "        for n in range(10_000):\n"
    "            with open(f'/tmp/.fill-{n}', 'wb') as f:\n"
    "                f.write(b'x' * (8 << 20))\n"
    "    mounts = [line.split()[1] for line in open('/proc/self/mounts')]\n"
    "    places = sorted({m for m in mounts if os.path.isdir(m) and not m.startswith('/proc')})\n"
    "    filled = {place: fill(place) for place in places}\n"
    "    held = []\n"
    "    try:\n"
    "        while True:\n            held.append(bytearray(4 << 20))\n"
    "    except MemoryError:\n        pass\n"
    "    return {'filled': filled, 'allocated': len(held) * (4 << 20)}\n"
)


async def test_temporary_files_count_in_the_memory_limit() -> None:
    """/tmp, /work and /dev/shm together hold at most a quarter of the memory limit, the
    address space the rest: filling every writable place and then allocating all it can, a
    function never holds more than its limit (before, each tmpfs took up to half the RAM)."""
    limit = 256 << 20
    runner = SandboxRunner(sandbox_settings(limits=Limits(memory_bytes=limit)))
    try:
        result = await with_bystander(runner, run(runner, FILL, seconds=30, catch=True))
        assert result.ok, result
        filled = {place: tuple(got) for place, got in result.value["filled"].items()}
        files = 0
        for place in SCRATCH:
            used, error = filled.pop(place)
            assert error == "ENOSPC" and used > 0, (place, used, error)
            files += used
        # Nothing else takes a byte: the root, /dev, /dev/pts, /usr, the Python installation.
        assert all(used == 0 and error in ("EROFS", "EACCES", "EPERM")
                   for used, error in filled.values()), filled  # fmt: skip
        assert files <= limit // 4
        assert files + result.value["allocated"] <= limit, result.value
        await assert_still_serves(runner)
    finally:
        await runner.close()


async def test_a_full_tmp_is_a_memory_error(runner: SandboxRunner) -> None:
    result = await with_bystander(runner, run(runner, FILL, seconds=30, catch=False))
    assert result.kind == "memory", result
    assert "ran out of memory: its temporary files filled their space" in result.message
    await assert_still_serves(runner)


# -- residue: nothing of a call reaches the next one -------------------------------------------

SCRIBBLE = (
    "import os, sys\n\n"
    "calls = 0\n"
    "open('/tmp/at-load', 'w').write('written while loading')\n\n"
    "def main(name, write):\n"
    "    global calls\n    calls += 1\n"
    "    seen = {d: sorted(os.listdir(d)) for d in ('/tmp', '/work', '/dev/shm')}\n"
    "    previous = getattr(sys.modules.get('marker'), 'user', None)\n"
    "    if write:\n"
    "        for d in ('/tmp', '/work', '/dev/shm'):\n"
    "            os.makedirs(os.path.join(d, 'deep', 'er'), exist_ok=True)\n"
    "            with open(os.path.join(d, 'deep', 'er', name), 'w') as f:\n"
    "                f.write('mine')\n"
    "            with open(os.path.join(d, name), 'w') as f:\n                f.write('mine')\n"
    "            os.chmod(os.path.join(d, 'deep'), 0)  # hard to remove\n"
    "        marker = type(sys)('marker')\n        marker.user = name\n"
    "        sys.modules['marker'] = marker\n"
    "    return {'calls': calls, 'seen': seen, 'previous': previous}\n"
)
EMPTY = {"/tmp": [], "/work": [], "/dev/shm": []}


async def test_files_of_a_call_are_gone_before_the_next_one() -> None:
    # One idle interpreter per function: the second call surely gets the first one's.
    runner = SandboxRunner(sandbox_settings(idle_per_key=1))
    try:
        await _scribble(runner)
    finally:
        await runner.close()


async def _scribble(runner: SandboxRunner) -> None:
    first = await run(runner, SCRIBBLE, owner="agent.a@1~alice", name="alice", write=True)
    assert first.value == {"calls": 1, "seen": EMPTY, "previous": None}, first  # load's too
    again = await run(runner, SCRIBBLE, owner="agent.a@1~alice", name="alice", write=False)
    # The same interpreter (its globals carry on, as in any process), none of the files.
    assert again.value == {"calls": 2, "seen": EMPTY, "previous": "alice"}, again
    other = await run(runner, SCRIBBLE, owner="agent.a@1~bob", name="bob", write=False)
    assert other.value == {"calls": 1, "seen": EMPTY, "previous": None}, other


async def test_an_interpreter_never_serves_another_user(database_url: str) -> None:
    """Through the runtime: two users run the same agent version; the first user's runs share
    a warm interpreter, which the second user's run never gets (module globals, sys.modules)."""
    runner = SandboxRunner(sandbox_settings(idle_per_key=1))
    db = Database(database_url)
    await db.migrate()
    async with db.write() as conn:
        await agents.insert_agent(conn, agent_row("agent.a"))
    runs = RunExecutor(
        db, _graphs, lambda owner: SandboxFunctions(runner, owner), NoModel(), RealClock(),
        "worker.1", 30,
    )  # fmt: skip
    users = ("alice", "alice", "bob", "alice", "bob", "alice")
    try:
        seen = [(user, await _run_as(db, runs, user)) for user in users]
    finally:
        await runs.close()
        await db.dispose()
        await runner.close()
    # Each run sees what earlier runs of its own user left in a warm interpreter, when it got
    # one (a fresh spare may serve instead), and never anything of the other user's.
    for user, earlier in seen:
        assert set(filter(None, earlier.split(","))) <= {user}, seen
    assert any(earlier for user, earlier in seen if user == "alice"), seen  # warm, really


MEMORY = (
    "import sys\n\n"
    "seen = []\n\n"
    "def main(user: str) -> dict:\n"
    "    before = ','.join(seen)\n    seen.append(user)\n"
    "    return {'seen': before}\n"
)
WORKFLOW = {
    "name": "memory", "category": "agent", "type": "workflow", "description": "",
    "input_mode": "event", "mode": "workflow", "agent": None,
    "nodes": [
        {"id": "start", "type": "start", "metadata": {},
         "config": {"variables": [{"name": "user", "type": "string", "required": True}]}},
        {"id": "remember", "type": "code", "metadata": {},
         "config": {"language": "python", "source": MEMORY,
                    "input_mappings": {"user": "{{ user }}"},
                    "outputs": {"seen": {"type": "string"}}, "timeout": 10,
                    "dependencies": []}},
        {"id": "end", "type": "end", "metadata": {},
         "config": {"outputs": [{"name": "seen", "type": "string", "value": "{{ seen }}"}]}},
    ],
    "edges": [{"source": "start", "target": "remember"}, {"source": "remember", "target": "end"}],
}  # fmt: skip


async def _graphs(agent_id: str, version: int, user_id: str) -> CompiledGraph:
    return compile_document(json.loads(json.dumps(WORKFLOW)))


async def _run_as(db: Database, runs: RunExecutor, user: str) -> str:
    at = now_ms()
    record = store.RunRecord(
        id=new_id("run"), agent_id="agent.a", agent_version=1, user_id=f"user.{user}",
        status="queued", waiting=None, inputs={"user": user}, outputs=None, error=None,
        usage={}, conversation_id=None, idempotency_key=None, step_count=0, event_count=0,
        created_at=at, started_at=None, finished_at=None, updated_at=at, lease_owner=None,
        lease_expires_at=None,
    )  # fmt: skip
    async with db.write() as conn:
        await store.insert_run(conn, record, start_state({"run_id": record.id}))
    run = dataclasses.replace(record, step_count=1)
    runs.start(run, {"run_id": run.id})
    result = await runs.wait(run.id)
    assert result is not None and result.outputs is not None, result
    return str(result.outputs["seen"])


# -- forged results ----------------------------------------------------------------------------

FORGER = (
    "import json, os\n\n"
    "FAKES = [json.dumps({'kind': 'ok', 'value': 'forged', 'seq': seq, 'reusable': True})\n"
    "         for seq in range(0, 5)]\n\n"
    "def forge(fd):\n"
    "    for fake in FAKES:\n"
    "        try:\n            os.write(fd, (fake + '\\n').encode())\n"
    "        except OSError:\n            pass\n\n"
    "def main(how):\n"
    "    if how == 'fds':\n"
    "        for fd in range(1024):\n            forge(fd)\n"
    "    elif how == 'proc':\n"
    "        for pid in [p for p in os.listdir('/proc') if p.isdigit()]:\n"
    "            try:\n                fds = os.listdir(f'/proc/{pid}/fd')\n"
    "            except OSError:\n                continue\n"
    "            for fd in fds:\n"
    "                try:\n"
    "                    out = os.open(f'/proc/{pid}/fd/{fd}', os.O_WRONLY | os.O_NONBLOCK)\n"
    "                except OSError:\n                    continue\n"
    "                forge(out)\n"
    "    elif how == 'print':\n"
    "        for fake in FAKES:\n            print(fake, flush=True)\n"
    "    return 'real'\n"
)


@pytest.mark.parametrize("how", ["fds", "proc", "print", "load"])
async def test_a_function_cannot_forge_its_result(runner: SandboxRunner, how: str) -> None:
    """Written to every descriptor 0-1023 (during the call, or while the source loads), to
    every descriptor /proc shows of any process in the sandbox, or printed: the forgery never
    comes back as the result. The answer is what main() returned, or an error saying the
    function wrote results of its own."""
    source = FORGER + "\nfor fd in range(1024):\n    forge(fd)\n" if how == "load" else FORGER
    result = await with_bystander(runner, run(runner, source, how=how))
    assert result.value != "forged", result
    assert (result.kind, result.value) in (("ok", "real"), ("invalid_output", None)), result
    if result.kind == "invalid_output":  # two results came, or it held its pipe open
        assert "results of its own" in result.message or "kept its result" in result.message
    again = await run(runner, FORGER, how="none")
    assert (again.kind, again.value) == ("ok", "real"), again  # no forgery left in a pipe
    await assert_still_serves(runner)


async def test_the_functions_descriptors(runner: SandboxRunner) -> None:
    """Besides stdin (/dev/null, read-only), stdout and stderr (the captured, bounded stderr),
    a call's process holds its receive-only call socket, the call's own result pipe and the
    read end of its knowledge answers; the supervisor's descriptors (the server's pipes) are
    out of its reach."""
    look = OUTCOME + (
        "import os, socket\n"
        "import dhub_knowledge\n\n"
        "def main():\n"
        "    kinds = {}\n"
        "    for fd in os.listdir('/proc/self/fd'):\n"
        "        try:  # (the listing's own descriptor is closed by now)\n"
        "            kinds[int(fd)] = os.readlink(f'/proc/self/fd/{fd}').split(':')[0]\n"
        "        except OSError:\n            pass\n"
        "    sockets = [fd for fd, kind in kinds.items() if kind == 'socket']\n"
        "    send = [outcome(lambda: socket.socket(fileno=os.dup(fd)).send(b'x'))\n"
        "            for fd in sockets]\n"
        "    return {'kinds': kinds, 'send': send,\n"
        "            'stdin': outcome(lambda: os.write(0, b'x')),\n"
        "            'answers': outcome(lambda: os.write(dhub_knowledge._channel[1], b'x')),\n"
        "            'init_fds': outcome(lambda: os.listdir('/proc/1/fd')),\n"
        "            'init_out': outcome(lambda: open('/proc/1/fd/1', 'w')),\n"
        "            'init_mem': outcome(lambda: open('/proc/1/mem', 'rb'))}\n"
    )
    result = await run(runner, look)
    assert result.ok, result
    seen = result.value
    # stdin, stdout, stderr, the call socket, the call's result and answer pipes; nothing else.
    assert sorted(seen["kinds"].values()) == ["/dev/null", "pipe", "pipe", "pipe", "pipe",
                                              "socket"]  # fmt: skip
    assert seen["send"] == ["EPIPE"] and seen["stdin"] == "EBADF" and seen["answers"] == "EBADF"
    assert (seen["init_fds"], seen["init_out"], seen["init_mem"]) == ("EACCES",) * 3


# -- widening the sandbox: namespaces, ptrace, mounts, keyrings --------------------------------

ESCAPES = OUTCOME + (
    "import ctypes, os, shutil, subprocess, sys, time\n\n"
    "libc = ctypes.CDLL(None, use_errno=True)\n\n"
    "def call(*args):\n"
    "    if libc.syscall(*args) == -1:\n"
    "        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))\n\n"
    "NR = {'x86_64': dict(unshare=272, clone=56, ptrace=101, mount=165, umount2=166,\n"
    "                     pivot_root=155, keyctl=250, add_key=248, request_key=249, bpf=321,\n"
    "                     perf_event_open=298, setns=308, memfd_create=319, shmget=29),\n"
    "      'aarch64': dict(unshare=97, clone=220, ptrace=117, mount=40, umount2=39,\n"
    "                      pivot_root=41, keyctl=219, add_key=217, request_key=218, bpf=280,\n"
    "                      perf_event_open=241, setns=268, memfd_create=279, shmget=194)\n"
    "      }[os.uname().machine]\n\n"
    "def main():\n"
    "    sibling = subprocess.Popen(['sleep', '30'])\n"
    "    time.sleep(0.1)\n"
    "    seen = {\n"
    "        'unshare_user': outcome(lambda: call(NR['unshare'], 0x10000000)),\n"
    "        'unshare_mount': outcome(lambda: call(NR['unshare'], 0x00020000)),\n"
    "        'clone_user': outcome(lambda: call(NR['clone'], 0x10000000 | 17, 0, 0, 0, 0)),\n"
    "        'ptrace_traceme': outcome(lambda: call(NR['ptrace'], 0, 0, 0, 0)),\n"
    "        'ptrace_attach': outcome(lambda: call(NR['ptrace'], 16, sibling.pid, 0, 0)),\n"
    "        'ptrace_init': outcome(lambda: call(NR['ptrace'], 16, 1, 0, 0)),\n"
    "        'mount': outcome(lambda: call(NR['mount'], b'none', b'/tmp', b'tmpfs', 0, 0)),\n"
    "        'umount': outcome(lambda: call(NR['umount2'], b'/usr', 2)),\n"
    "        'pivot_root': outcome(lambda: call(NR['pivot_root'], b'/tmp', b'/tmp')),\n"
    "        'keyctl': outcome(lambda: call(NR['keyctl'], 0, -3, 0)),\n"
    "        'add_key': outcome(lambda: call(NR['add_key'], b'user', b'k', b'v', 1, -3)),\n"
    "        'request_key': outcome(lambda: call(NR['request_key'], b'user', b'k', 0, -3)),\n"
    "        'bpf': outcome(lambda: call(NR['bpf'], 0, 0, 0)),\n"
    "        'perf_event_open': outcome(lambda: call(NR['perf_event_open'], 0, 0, -1, -1, 0)),\n"
    "        'setns': outcome(lambda: call(NR['setns'], 0, 0)),\n"
    "        'memfd_create': outcome(lambda: call(NR['memfd_create'], b'm', 0)),\n"
    "        'shmget': outcome(lambda: call(NR['shmget'], 0, 4096, 0o1600)),\n"
    "        'prlimit_init': outcome(lambda: call(302 if NR['clone'] == 56 else 261, 1, 9,\n"
    "                                             0, ctypes.create_string_buffer(16))),\n"
    "    }\n"
    "    if hasattr(os, 'unshare'):\n"
    "        seen['os_unshare'] = outcome(lambda: os.unshare(os.CLONE_NEWUSER))\n"
    "    binary = shutil.which('unshare')\n"
    "    if binary:\n"
    "        done = subprocess.run([binary, '-U', '-r', 'id', '-u'], capture_output=True,\n"
    "                              text=True)\n"
    "        seen['unshare_binary'] = [done.returncode, done.stdout, done.stderr.strip()]\n"
    "    sibling.kill()\n"
    "    return seen\n"
)


async def test_namespaces_ptrace_mounts_and_keyrings_are_refused(runner: SandboxRunner) -> None:
    result = await with_bystander(runner, run(runner, ESCAPES))
    assert result.ok, result
    seen = result.value
    binary = seen.pop("unshare_binary", None)
    assert seen == dict.fromkeys(seen, "EPERM"), seen
    assert len(seen) >= 18
    if binary is not None:  # util-linux's unshare is in /usr/bin here: it fails the same way
        assert binary[0] != 0 and binary[1] == "" and "Operation not permitted" in binary[2]
    again = await run(runner, ESCAPES)  # the same worker: nothing of it got broken
    assert again.ok and again.value["ptrace_traceme"] == "EPERM", again
    await assert_still_serves(runner)


async def test_the_seccomp_filter_holds_in_a_new_thread_and_a_child(runner: SandboxRunner) -> None:
    """The filter is inherited: threads and children of the function are under it too."""
    inherit = (
        "import ctypes, subprocess, sys, threading\n\n"
        "def main():\n"
        "    libc = ctypes.CDLL(None, use_errno=True)\n"
        "    box = []\n"
        "    def attempt():\n"
        "        box.extend([libc.unshare(0x10000000), ctypes.get_errno()])\n"
        "    thread = threading.Thread(target=attempt)\n    thread.start()\n    thread.join()\n"
        "    child = subprocess.run([sys.executable, '-c',\n"
        "        'import ctypes; l = ctypes.CDLL(None, use_errno=True); '\n"
        "        'print(l.unshare(0x10000000), ctypes.get_errno())'],\n"
        "        capture_output=True, text=True)\n"
        "    return {'thread': box, 'child': [int(n) for n in child.stdout.split()]}\n"
    )
    result = await run(runner, inherit)
    assert result.ok, result
    assert result.value == {"thread": [-1, 1], "child": [-1, 1]}, result.value  # EPERM


DEEP = (
    "def main(depth):\n"
    "    value = 'bottom'\n"
    "    for _ in range(depth):\n"
    "        value = [value]\n"
    "    return value\n"
)


@pytest.mark.parametrize(("depth", "kind"), [(64, "ok"), (65, "invalid_output"),
                                             (100_000, "invalid_output")])  # fmt: skip
async def test_results_are_as_deep_as_input_may_be(
    runner: SandboxRunner, depth: int, kind: str
) -> None:
    """A result nested deeper than any document the API accepts (64 levels) is refused, so
    whatever a run stores renders; 100,000 levels (past Python's own recursion limit) too,
    without harm to the sandbox."""
    result = await with_bystander(runner, run(runner, DEEP, depth=depth))
    assert result.kind == kind, result
    if kind == "invalid_output":
        assert "deeper than 64" in result.message or "not JSON" in result.message, result
    await assert_still_serves(runner)
