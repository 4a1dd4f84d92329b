"""ByIdentity: derived once per object, never confused between objects that are equal."""

from __future__ import annotations

from typing import Any

from dhub.domain.memo import ByIdentity


def test_each_object_is_derived_once_and_equal_objects_apart() -> None:
    seen: list[Any] = []

    def derive(message: dict[str, Any]) -> int:
        seen.append(message)
        return len(message["content"])

    count = ByIdentity(derive)
    first, twin = {"content": "abc"}, {"content": "abc"}
    assert [count(first), count(first), count(twin), count(first)] == [3, 3, 3, 3]
    assert len(seen) == 2 and seen[0] is first and seen[1] is twin


def test_the_oldest_are_forgotten_past_the_size() -> None:
    calls: list[int] = []
    double = ByIdentity(lambda box: calls.append(box[0]) or box[0] * 2, size=2)
    a, b, c = [1], [2], [3]
    assert [double(a), double(b), double(c)] == [2, 4, 6]
    assert double(b) == 4 and double(a) == 2  # b was kept, a was forgotten and derived again
    assert calls == [1, 2, 3, 1]
