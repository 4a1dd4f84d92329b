"""Durable runs' settings from the environment (issue 23: DHUB_RUN_MAX_ATTEMPTS)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dhub.settings import Settings


def test_max_attempts_defaults_to_five_and_comes_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("DHUB_RUN_MAX_ATTEMPTS", raising=False)
    assert Settings.from_env(tmp_path).run_max_attempts == 5
    monkeypatch.setenv("DHUB_RUN_MAX_ATTEMPTS", "0")  # as the other whole-number settings
    assert Settings.from_env(tmp_path).run_max_attempts == 5
    monkeypatch.setenv("DHUB_RUN_MAX_ATTEMPTS", "12")
    assert Settings.from_env(tmp_path).run_max_attempts == 12


@pytest.mark.parametrize("raw", ["-1", "three", "2.5"])
def test_max_attempts_must_be_a_whole_number_from_one(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, raw: str
) -> None:
    monkeypatch.setenv("DHUB_RUN_MAX_ATTEMPTS", raw)
    with pytest.raises(ValueError, match="DHUB_RUN_MAX_ATTEMPTS must be a whole number"):
        Settings.from_env(tmp_path)
