"""The sandbox's settings from the environment."""

from __future__ import annotations

from pathlib import Path

import pytest

from dhub.sandbox.runner import SandboxSettings, default_concurrency


def test_warm_pool_and_concurrency_come_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    defaults = SandboxSettings.from_env(tmp_path)
    assert (defaults.idle_per_key, defaults.idle_total) == (2, 64)
    assert defaults.concurrency == default_concurrency() >= 64
    monkeypatch.setenv("DHUB_SANDBOX_WARM_PER_FUNCTION", "20")
    monkeypatch.setenv("DHUB_SANDBOX_WARM_TOTAL", "400")
    monkeypatch.setenv("DHUB_SANDBOX_CONCURRENCY", "8")
    chosen = SandboxSettings.from_env(tmp_path)
    assert (chosen.idle_per_key, chosen.idle_total, chosen.concurrency) == (20, 400, 8)
