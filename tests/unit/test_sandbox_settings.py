"""The sandbox's settings from the environment."""

from __future__ import annotations

from pathlib import Path

import pytest

from dhub.sandbox.isolation import scratch_sizes
from dhub.sandbox.runner import SandboxSettings, default_concurrency, default_pool_bytes


def test_warm_pool_and_concurrency_come_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    defaults = SandboxSettings.from_env(tmp_path)
    # No count caps: the pool sizes itself to the calls in flight, within its memory budget.
    assert (defaults.idle_per_key, defaults.idle_total) == (None, None)
    assert defaults.pool_bytes == default_pool_bytes() <= 8 << 30
    assert defaults.concurrency == default_concurrency() >= 64
    monkeypatch.setenv("DHUB_SANDBOX_WARM_PER_FUNCTION", "20")
    monkeypatch.setenv("DHUB_SANDBOX_WARM_TOTAL", "400")
    monkeypatch.setenv("DHUB_SANDBOX_CONCURRENCY", "8")
    monkeypatch.setenv("DHUB_SANDBOX_POOL_MB", "300")
    chosen = SandboxSettings.from_env(tmp_path)
    assert (chosen.idle_per_key, chosen.idle_total, chosen.concurrency) == (20, 400, 8)
    assert chosen.pool_bytes == 300 << 20
    monkeypatch.setenv("DHUB_SANDBOX_POOL_MB", "0")
    with pytest.raises(ValueError, match="DHUB_SANDBOX_POOL_MB must be at least 1"):
        SandboxSettings.from_env(tmp_path)


def test_the_pool_budget_defaults_to_a_quarter_of_the_memory(tmp_path: Path) -> None:
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:        2000000 kB\nMemFree:  100 kB\n")
    assert default_pool_bytes(str(meminfo)) == (2_000_000 << 10) // 4
    meminfo.write_text("MemTotal:       98000000 kB\n")
    assert default_pool_bytes(str(meminfo)) == 8 << 30  # capped
    assert default_pool_bytes(str(tmp_path / "missing")) == 1 << 30


def test_temporary_files_take_their_share_of_the_memory_limit(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    defaults = SandboxSettings.from_env(tmp_path).limits
    assert (defaults.memory_bytes, defaults.scratch) == (2048 << 20, 512 << 20)
    assert defaults.address_space + defaults.scratch == defaults.memory_bytes
    sizes = scratch_sizes(defaults.scratch)
    assert set(sizes) == {"/tmp", "/work", "/dev/shm"} and sum(sizes.values()) <= 512 << 20
    monkeypatch.setenv("DHUB_SANDBOX_MEMORY_MB", "1024")
    monkeypatch.setenv("DHUB_SANDBOX_SCRATCH_MB", "100")
    chosen = SandboxSettings.from_env(tmp_path).limits
    assert (chosen.scratch, chosen.address_space) == (100 << 20, 924 << 20)
    monkeypatch.setenv("DHUB_SANDBOX_SCRATCH_MB", "1024")
    with pytest.raises(ValueError, match=r"DHUB_SANDBOX_SCRATCH_MB must be .* less than"):
        SandboxSettings.from_env(tmp_path)
    assert min(scratch_sizes(0).values()) == 4096  # never 0, which bubblewrap reads as no limit


def test_browser_tools_settings_come_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    defaults = SandboxSettings.from_env(tmp_path)
    assert defaults.chromium == "/usr/lib/chromium/chromium"
    assert defaults.limits.browser_processes == 256
    # A browser tool's memory share is its writable memory, under a far higher address space.
    browser = defaults.limits.for_child(with_browser=True)
    plain = defaults.limits.for_child()
    assert browser["data"] == plain["memory"] == 1536 << 20 and "data" not in plain
    assert browser["memory"] == 256 << 30
    assert (browser["processes"], browser["open_files"]) == (256, 1024)
    monkeypatch.setenv("DHUB_SANDBOX_CHROMIUM", "/opt/chromium/chrome")
    monkeypatch.setenv("DHUB_SANDBOX_BROWSER_PROCESSES", "400")
    chosen = SandboxSettings.from_env(tmp_path)
    assert (chosen.chromium, chosen.limits.browser_processes) == ("/opt/chromium/chrome", 400)
