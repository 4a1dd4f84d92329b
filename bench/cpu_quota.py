"""CPU quotas for benchmark processes (issue 25): a cgroup v1 ``cpu`` group per process, with
``cpu.cfs_quota_us`` set to a fraction of one CPU, so several dhub workers on this 2-core
machine each get a bounded share and the workers, not the machine, are the bottleneck.

These machines mount the v1 ``cpu`` controller at /sys/fs/cgroup/cpu, writable as root. A group
is made per process (``dhub-bench-<name>-<random>``), the process moved in (what it starts
later, the sandboxes included, stays in it), and the group removed on exit: processes still in
it go back to the parent group first. Where the controller is not there or not writable,
``unavailable`` says why in one line and the caller runs its processes unconstrained.

    with CpuQuota(0.3, "worker1") as quota:
        quota.add(pid)
"""

from __future__ import annotations

import contextlib
import os
import secrets
import time
from pathlib import Path
from types import TracebackType

CPU_V1 = Path("/sys/fs/cgroup/cpu")
PERIOD_US = 100_000  # the scheduler's accounting period; the quota is a share of it


class QuotaUnavailable(Exception):
    """CPU quotas cannot be set here; the message says why."""


def unavailable(root: Path = CPU_V1) -> str | None:
    """Why a CPU quota cannot be set under ``root``, in one line; None when it can."""
    if not (root / "cpu.cfs_quota_us").exists():
        return f"no cgroup v1 cpu controller at {root} (cpu.cfs_quota_us missing)"
    if not os.access(root, os.W_OK):
        return f"{root} is not writable by this user (uid {os.getuid()}); run as root"
    return None


class CpuQuota:
    """A cgroup of the v1 ``cpu`` controller limited to ``fraction`` of one CPU."""

    def __init__(self, fraction: float, name: str, root: Path = CPU_V1) -> None:
        if not 0 < fraction <= 64:
            raise ValueError(f"--worker-cpu must be a fraction of a CPU above 0, not {fraction}")
        self.fraction, self.root = fraction, root
        self.path = root / f"dhub-bench-{name}-{secrets.token_hex(3)}"

    def __enter__(self) -> CpuQuota:
        why = unavailable(self.root)
        if why is not None:
            raise QuotaUnavailable(why)
        try:
            self.path.mkdir()
            if not (self.path / "cpu.cfs_quota_us").exists():  # the kernel makes them
                raise OSError("a new group got no control files: not a cgroup v1 cpu hierarchy")
            (self.path / "cpu.cfs_period_us").write_text(str(PERIOD_US))
            (self.path / "cpu.cfs_quota_us").write_text(str(round(self.fraction * PERIOD_US)))
        except OSError as exc:
            self._remove()
            raise QuotaUnavailable(f"cannot make a cpu cgroup under {self.root}: {exc}") from exc
        return self

    def add(self, pid: int) -> None:
        """Move ``pid`` into the group (best started before it forks anything)."""
        (self.path / "cgroup.procs").write_text(str(pid))

    def quota_us(self) -> int:
        return int((self.path / "cpu.cfs_quota_us").read_text())

    def throttled_s(self) -> float:
        """How long the group's processes waited for CPU beyond their quota."""
        for line in (self.path / "cpu.stat").read_text().splitlines():
            if line.startswith("throttled_time "):
                return int(line.split()[1]) / 1e9
        return 0.0

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._remove()

    def _remove(self) -> None:
        """Remove the group; processes still in it (a sandbox ending) go back to the parent."""
        if not self.path.exists():
            return
        for _ in range(50):
            with contextlib.suppress(OSError):
                for pid in (self.path / "cgroup.procs").read_text().split():
                    with contextlib.suppress(OSError):
                        (self.root / "cgroup.procs").write_text(pid)
            try:
                self.path.rmdir()
                return
            except OSError:
                time.sleep(0.1)
