"""What the benchmarks that start dhub as real processes read of them (bench/scale.py): CPU
from /proc (a process's threads and the children it reaped, PostgreSQL's backends, the whole
machine), resident memory, the process tree, and a cgroup (v2) per process where this user may
make one, so that the CPU of everything a process started counts, bubblewrap's sandboxes
included (they live in PID namespaces of their own and are never reaped by it).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

TICK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")


def _stat(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def cpu_of(pid: int) -> tuple[float, float]:
    """(own, reaped children) CPU seconds of a process: all its threads, and the descendants
    it waited for (a dhub process's sandboxed interpreters; PostgreSQL's ended backends)."""
    try:
        f = _stat(pid)
    except (FileNotFoundError, ProcessLookupError):
        return 0.0, 0.0
    return (int(f[11]) + int(f[12])) / TICK, (int(f[13]) + int(f[14])) / TICK


def rss_of(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return 0


def processes() -> list[tuple[int, int, str]]:
    """(pid, parent pid, command name) of every process."""
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                text = (entry / "stat").read_text()
                name = text[text.index("(") + 1 : text.rindex(")")]
                out.append((int(entry.name), int(text.rsplit(")", 1)[1].split()[1]), name))
    return out


def descendants(pid: int, procs: list[tuple[int, int, str]]) -> list[int]:
    children: dict[int, list[int]] = {}
    for p, parent, _ in procs:
        children.setdefault(parent, []).append(p)
    found, todo = [], list(children.get(pid, []))
    while todo:
        p = todo.pop()
        found.append(p)
        todo += children.get(p, [])
    return found


def postgres_cpu(procs: list[tuple[int, int, str]]) -> float:
    """CPU seconds of the PostgreSQL server: the postmaster with its reaped backends, and the
    live backends (other clients of the server, such as a test suite, count too)."""
    names = {p: n for p, _, n in procs}
    total = 0.0
    for p, parent, name in procs:
        if name == "postgres":
            own, reaped = cpu_of(p)
            total += own + (reaped if names.get(parent) != "postgres" else 0.0)
    return total


def _cpu_line() -> list[int]:
    return [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]


def machine_busy_s() -> float:
    """CPU seconds the machine was busy (steal included), all cores."""
    values = _cpu_line()
    return (sum(values[:8]) - values[3] - values[4]) / TICK


def steal_s() -> float:
    """CPU seconds a virtual machine's cores waited for its host (the hypervisor ran others)."""
    return _cpu_line()[7] / TICK


@dataclass
class Proc:
    role: str  # "embedded", "api", "worker1", "worker2"
    popen: subprocess.Popen[bytes]
    log: Path
    cgroup: Path | None = None  # the process's own cgroup (v2): the CPU of all it started


def cgroup_root() -> Path | None:
    """This process's cgroup in the cgroup v2 hierarchy, where we may make child groups; None
    without one (then a sandbox's CPU is counted from the processes reaped, see ``cpu_of``)."""
    mount = next(
        (line.split()[1] for line in Path("/proc/mounts").read_text().splitlines()
         if line.split()[2:3] == ["cgroup2"]),
        None,
    )  # fmt: skip
    own = next(
        (line[3:] for line in Path("/proc/self/cgroup").read_text().splitlines()
         if line.startswith("0::")),
        None,
    )  # fmt: skip
    if mount is None or own is None:
        return None
    root = Path(mount) / own.lstrip("/")
    return root if os.access(root, os.W_OK) else None


def own_cgroup(pid: int, name: str) -> Path | None:
    """Move ``pid`` (just started, nothing forked yet) into a new cgroup of its own. Its
    ``cpu.stat`` then counts every process it starts, bubblewrap's sandboxes included, which
    live in PID namespaces of their own and are never reaped by it (their CPU would land in
    "other")."""
    root = cgroup_root()
    if root is None:
        return None
    group = root / f"dhub-bench-{name}-{secrets.token_hex(3)}"
    try:
        group.mkdir()
        (group / "cgroup.procs").write_text(str(pid))
    except OSError:
        with contextlib.suppress(OSError):
            group.rmdir()
        return None
    return group


def cgroup_cpu(group: Path) -> float:
    """CPU seconds of every process that ever ran in ``group``."""
    for line in (group / "cpu.stat").read_text().splitlines():
        if line.startswith("usage_usec "):
            return int(line.split()[1]) / 1e6
    return 0.0


def drop_cgroup(group: Path) -> None:
    for _ in range(50):  # its last processes may take a moment to go
        try:
            group.rmdir()
            return
        except OSError:
            time.sleep(0.1)


@dataclass
class CpuSnapshot:
    at: float
    parts: dict[str, float]  # role -> own CPU s; "<role> sandbox" -> its interpreters' CPU s
    postgres: float
    client: float
    machine: float
    steal: float

    @classmethod
    def take(cls, procs: list[Proc], watch: dict[str, int]) -> CpuSnapshot:
        everything = processes()
        parts = {name: sum(cpu_of(pid)) for name, pid in watch.items()}
        for p in procs:
            own, reaped = cpu_of(p.popen.pid)
            parts[p.role] = own
            if p.cgroup is not None:  # everything it started, reaped by it or not
                parts[f"{p.role} sandbox"] = cgroup_cpu(p.cgroup) - own
                continue
            live = sum(cpu_of(d)[0] for d in descendants(p.popen.pid, everything))
            parts[f"{p.role} sandbox"] = reaped + live
        return cls(
            time.monotonic(), parts, postgres_cpu(everything), time.process_time(),
            machine_busy_s(), steal_s(),
        )  # fmt: skip

    def until(self, later: CpuSnapshot) -> dict[str, float]:
        """% of one core used by each part between the two snapshots; ``steal``: the host's
        (a virtual machine's cores waiting for it); ``other``: the rest of the machine
        (anything else running on it)."""
        wall = later.at - self.at
        out = {k: (later.parts[k] - v) / wall * 100 for k, v in self.parts.items()}
        out["postgres"] = (later.postgres - self.postgres) / wall * 100
        out["client"] = (later.client - self.client) / wall * 100
        busy = (later.machine - self.machine) / wall * 100
        out["steal"] = (later.steal - self.steal) / wall * 100
        out["other"] = max(0.0, busy - sum(out.values()))
        out["machine"] = busy
        return out
