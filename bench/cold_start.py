"""Where a cold sandbox start's time goes (issue 23): each stage of starting a worker under
bubblewrap, one more piece at a time, 20 times each, wall time (p50) and CPU per start.

- ``python -I -S -c pass``: a bare interpreter, no sandbox;
- ``bwrap /bin/true``: bubblewrap's namespaces, mounts and seccomp filter (the sandbox's real
  command line, isolation.py), with a program that does nothing;
- ``bwrap python -c pass``: the same with the interpreter;
- ``bwrap python + imports``: and the standard modules the supervisor (child.py) imports;
- ``bwrap python + imports + siblings``: and its sibling files (child_function.py, ...), which
  are compiled from source at every start (the sandbox cannot write bytecode caches);
- ``cold worker``: a whole cold call through the runner (``warm=False``): the above, the
  function's process forked, the source loaded, one call, and the sandbox ended;
- ``first call of a function, from a spare``: a new function's first call through the warm
  runner while a spare waits (pool.py): the setup, the function's process forked, the source
  loaded and the call; the spare's start was paid ahead, off the call's path.

CPU of the stages is the children's (``RUSAGE_CHILDREN``: each stage's bubblewrap reaps its
sandbox); the cold worker's comes from a cgroup (v2) of this process's own when it may make
one (root), since a killed sandbox is reaped by no one here (the server side's CPU of the call
is in it too); otherwise it is left out.

    .venv/bin/python bench/cold_start.py [--json FILE]    # about 20 s; needs bubblewrap
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import resource
import statistics
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import proc_stats
from dhub.sandbox.envs import base_python
from dhub.sandbox.isolation import SIBLINGS, Bubblewrap, _filter
from dhub.sandbox.runner import FunctionCall, SandboxRunner, SandboxSettings

STARTS = 20
IMPORTS = "import contextlib, importlib.util, json, select, signal, socket, time, traceback\n"
LOAD = (
    "for n in {names!r}:\n"
    "    s = importlib.util.spec_from_file_location(n[:-3], '/sandbox/' + n)\n"
    "    s.loader.exec_module(importlib.util.module_from_spec(s))\n"
)


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def stage(argv: list[str], seccomp: int) -> tuple[float, float]:
    """(wall p50, CPU per start), in ms."""
    walls = []
    cpu = children_cpu()
    for _ in range(STARTS):
        os.lseek(seccomp, 0, os.SEEK_SET)  # bubblewrap reads the filter from the offset
        began = time.perf_counter()
        subprocess.run(argv, pass_fds=(seccomp,), check=True)
        walls.append(time.perf_counter() - began)
    return statistics.median(walls) * 1e3, (children_cpu() - cpu) / STARTS * 1e3


@contextlib.contextmanager
def own_cgroup() -> Iterator[Path | None]:
    """This process in a new cgroup v2 of its own while inside (None when it cannot be)."""
    group = proc_stats.own_cgroup(os.getpid(), "cold")
    if group is None:
        yield None
        return
    try:
        yield group
    finally:
        (group.parent / "cgroup.procs").write_text(str(os.getpid()))
        time.sleep(0.2)  # the last sandboxes go
        with contextlib.suppress(OSError):
            group.rmdir()


def usage_ms(group: Path) -> float:
    return proc_stats.cgroup_cpu(group) * 1e3


async def cold_worker(envs: Path) -> tuple[float, float | None]:
    runner = SandboxRunner(SandboxSettings(envs_dir=envs, warm=False))
    call = FunctionCall("def main(x):\n    return x + 1\n", {"x": 1}, 10, owner="bench")
    try:
        assert (await runner.call(call)).ok  # the runner's checks, once
        with own_cgroup() as group:
            before = usage_ms(group) if group else 0.0
            walls = []
            for _ in range(STARTS):
                began = time.perf_counter()
                assert (await runner.call(call)).ok
                walls.append(time.perf_counter() - began)
            cpu = (usage_ms(group) - before) / STARTS if group else None
    finally:
        await runner.close()
    return statistics.median(walls) * 1e3, cpu


async def from_spare(envs: Path) -> float:
    """Wall p50 of a new function's first call when a spare waits (pool.py): the setup, the
    source loaded and one call. The spare's own start was paid ahead, off the call's path."""
    runner = SandboxRunner(SandboxSettings(envs_dir=envs))
    walls = []
    try:
        for n in range(STARTS + 1):
            await runner.pool.settle()  # the spare (and the last call's second worker) started
            await asyncio.sleep(0.2)  # ... and its supervisor waiting: a function came later
            call = FunctionCall(f"def main(x):\n    return x + {n}\n", {"x": 1}, 10, owner=f"b{n}")
            began = time.perf_counter()
            assert (await runner.call(call)).ok
            if n:  # the first call found no spare yet
                walls.append(time.perf_counter() - began)
    finally:
        await runner.close()
    return statistics.median(walls) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, help="also write the figures here (bench/goals.py)")
    args = parser.parse_args()
    figures: dict[str, float | None] = {}
    python = base_python()
    seccomp = _filter()
    argv = Bubblewrap().command(python, None, False, 64 << 20, seccomp)
    box = argv[: argv.index(python)]
    names = list(SIBLINGS)
    stages = {
        "python -I -S -c pass": [python, "-I", "-S", "-c", "pass"],
        "bwrap /bin/true": [*box, "/bin/true"],
        "bwrap python -c pass": [*box, python, "-I", "-S", "-c", "pass"],
        "bwrap python + imports": [*box, python, "-I", "-S", "-c", IMPORTS],
        "bwrap python + imports + siblings": [
            *box, python, "-I", "-S", "-c", IMPORTS + LOAD.format(names=names),
        ],
    }  # fmt: skip
    print(f"{'stage':36} {'wall p50 ms':>12} {'CPU ms':>8}")
    try:
        for name, stage_argv in stages.items():
            wall, cpu = stage(stage_argv, seccomp)
            figures[name] = wall
            print(f"{name:36} {wall:>12.1f} {cpu:>8.1f}")
    finally:
        os.close(seccomp)
    with tempfile.TemporaryDirectory(prefix="dhub-bench-envs-") as envs:
        wall, worker_cpu = asyncio.run(cold_worker(Path(envs)))
        spare_wall = asyncio.run(from_spare(Path(envs)))
    shown = "n/a" if worker_cpu is None else f"{worker_cpu:.1f}"
    print(f"{'cold worker (a whole cold call)':36} {wall:>12.1f} {shown:>8}")
    print(f"{'first call of a function, from a spare':36} {spare_wall:>12.1f} {'ahead':>8}")
    figures.update(cold_ms=wall, cold_cpu_ms=worker_cpu, spare_first_call_ms=spare_wall)
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
