"""The list cache's bounds (services/rendered.py) and its setting, DHUB_LIST_CACHE_MB."""

from __future__ import annotations

from pathlib import Path

import pytest

from dhub.services.rendered import RenderedCache
from dhub.settings import Settings


def test_the_least_recently_used_go_first_and_the_size_stays_within_the_budget() -> None:
    cache = RenderedCache(max_bytes=3 * (100 + 200))  # three entries of 100 bytes
    for key in "abc":
        cache.put(key, key.encode() * 100)
    assert cache.get("a") == b"a" * 100  # now the most recently used
    cache.put("d", b"d" * 100)
    assert cache.get("b") is None  # the least recently used went
    assert [cache.get(k) is not None for k in "acd"] == [True, True, True]
    assert cache.size <= cache.max_bytes and len(cache) == 3
    cache.put("a", b"A" * 100)  # replacing an entry does not count it twice
    assert cache.get("a") == b"A" * 100 and len(cache) == 3 and cache.size == 900
    cache.put("huge", b"x" * 10_000)  # more than the whole budget: not kept, nothing evicted
    assert cache.get("huge") is None and len(cache) == 3


def test_callers_get_numbers_never_reused() -> None:
    cache = RenderedCache(max_bytes=1000)
    first = cache.caller(("user.a", 1))
    assert cache.caller(("user.a", 1)) == first
    assert cache.caller(("user.a", 2)) != first  # another epoch: another caller


def test_the_setting_defaults_to_64_mib_and_0_turns_the_cache_off(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("DHUB_LIST_CACHE_MB", raising=False)
    assert Settings.from_env(tmp_path).list_cache_mb == 64
    monkeypatch.setenv("DHUB_LIST_CACHE_MB", "0")
    assert Settings.from_env(tmp_path).list_cache_mb == 0
    for raw in ("-1", "lots"):
        monkeypatch.setenv("DHUB_LIST_CACHE_MB", raw)
        with pytest.raises(ValueError, match="DHUB_LIST_CACHE_MB must be a whole number"):
            Settings.from_env(tmp_path)
