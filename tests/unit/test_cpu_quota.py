"""bench/cpu_quota.py, the CPU quotas bench/scale.py --worker-cpu puts dhub workers under
(issue 25): the quota is applied to the process moved in and what it starts, the group is gone
on exit, and where cgroups cannot be written the reason is one clear line."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from cpu_quota import CPU_V1, CpuQuota, QuotaUnavailable, unavailable

REAL = unavailable()
real_only = pytest.mark.skipif(
    REAL is not None, reason=f"needs a writable cgroup v1 cpu controller: {REAL}"
)


@real_only
def test_a_process_moved_in_runs_under_the_quota_and_the_group_goes_on_exit() -> None:
    with CpuQuota(0.2, "test") as quota:
        assert quota.quota_us() == 20_000
        proc = subprocess.Popen([sys.executable, "-c", "while True: pass"])
        try:
            quota.add(proc.pid)
            assert f"cpu:/{quota.path.name}" in Path(f"/proc/{proc.pid}/cgroup").read_text()
            began, cpu = time.monotonic(), _cpu_s(proc.pid)
            time.sleep(2.0)
            used = (_cpu_s(proc.pid) - cpu) / (time.monotonic() - began)
        finally:
            proc.kill()
            proc.wait()
        path = quota.path
    # A spinning process, unconstrained, takes a whole core; under the quota a fifth at most.
    assert used < 0.3, used
    assert not path.exists()


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@real_only
def test_the_group_is_removed_even_with_a_process_still_in_it() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        with CpuQuota(0.5, "test") as quota:
            quota.add(proc.pid)
        assert not quota.path.exists()
        assert "cpu:/\n" in Path(f"/proc/{proc.pid}/cgroup").read_text()  # back at the top
    finally:
        proc.kill()
        proc.wait()


def test_no_controller_says_why_and_nothing_is_made(tmp_path: Path) -> None:
    assert "no cgroup v1 cpu controller" in str(unavailable(tmp_path))
    with (
        pytest.raises(QuotaUnavailable, match="no cgroup v1 cpu controller"),
        CpuQuota(0.3, "test", root=tmp_path),
    ):
        pass
    assert list(tmp_path.iterdir()) == []


def test_a_directory_that_is_no_cgroup_says_so_and_is_left_as_it_was(tmp_path: Path) -> None:
    (tmp_path / "cpu.cfs_quota_us").write_text("-1\n")
    with (
        pytest.raises(QuotaUnavailable, match="not a cgroup v1 cpu hierarchy"),
        CpuQuota(0.3, "test", root=tmp_path),
    ):
        pass
    assert [p.name for p in tmp_path.iterdir()] == ["cpu.cfs_quota_us"]


@real_only
def test_a_user_who_cannot_write_the_controller_is_told_to_run_as_root() -> None:
    # The helper's own source, run by the system's Python as user nobody (the project's
    # interpreter and folders need not be theirs to read).
    source = (Path(__file__).resolve().parents[2] / "bench" / "cpu_quota.py").read_text()
    argv = ["/usr/bin/python3", "-I", "-c", source + "\nprint(unavailable())"]
    done = subprocess.run(argv, user=65534, cwd="/", capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    assert "is not writable by this user (uid 65534); run as root" in done.stdout


def test_a_fraction_out_of_range_is_refused() -> None:
    with pytest.raises(ValueError, match="--worker-cpu"):
        CpuQuota(0, "test", root=CPU_V1)
