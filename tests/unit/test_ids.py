"""Ids sort in the order this process made them, even many in one millisecond."""

from __future__ import annotations

import re

from dhub.domain.ids import new_id, ulid


def test_ids_made_one_after_another_sort_in_that_order() -> None:
    made = [new_id("run") for _ in range(5000)]  # many share a millisecond
    assert made == sorted(made) and len(set(made)) == len(made)
    assert all(re.fullmatch(r"run\.[0-9a-hjkmnp-tv-z]{26}", i) for i in made)


def test_a_given_time_is_kept() -> None:
    early, late = ulid(1_000), ulid(2_000)
    assert early < late and ulid(1_000)[:10] == early[:10]
