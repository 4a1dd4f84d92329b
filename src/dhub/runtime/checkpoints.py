"""Checkpoints that store what changed, not the whole state (DESIGN.md 4).

A run's state is plain JSON. After each step the durable executor stores ``diff(before,
after)``: the objects that changed, down to the value that changed, so a 100 kB variable that
stays the same is written once, not once per step. A list that only grew (a loop's results, a
chat history) stores its new items. ``apply`` replays patches onto the state they were taken
from; a run is resumed by applying its patches in order to its first state.

A patch is a list of operations ``[op, path, value?]``: ``["set", ["variables", "x"], 1]``,
``["del", ["timers", "each#2/ask"]]``, ``["extend", ["loops", "each", "results"], [{...}]]``.
"""

from __future__ import annotations

import copy
from typing import Any

Path = list[str]
Patch = list[list[Any]]


def snapshot(state: dict[str, Any]) -> dict[str, Any]:
    """A copy to diff the next state against. Strings and numbers are shared (immutable), so
    its cost is the number of objects and lists, not the bytes of the values."""
    return copy.deepcopy(state)


def diff(before: Any, after: Any) -> Patch:
    patch: Patch = []
    _diff(before, after, [], patch)
    return patch


def _diff(before: Any, after: Any, path: Path, patch: Patch) -> None:
    if before is after:
        return
    if isinstance(before, dict) and isinstance(after, dict):
        for key in before:
            if key not in after:
                patch.append(["del", [*path, key]])
        for key, value in after.items():
            if key in before:
                _diff(before[key], value, [*path, key], patch)
            else:
                patch.append(["set", [*path, key], value])
        return
    if type(before) is not type(after) or before != after:
        if isinstance(before, list) and isinstance(after, list) and _grew(before, after):
            patch.append(["extend", path, after[len(before) :]])
        else:
            patch.append(["set", path, after])


def _grew(before: list[Any], after: list[Any]) -> bool:
    return 0 < len(before) < len(after) and after[: len(before)] == before


def apply(state: dict[str, Any], patch: Patch) -> dict[str, Any]:
    """``state`` changed by ``patch``, in place (and returned)."""
    for op in patch:
        kind, path = op[0], op[1]
        if not path:  # the whole state replaced (never produced for a dict state)
            raise ValueError("a patch cannot replace the whole state")
        parent = state
        for key in path[:-1]:
            parent = parent[key]
        last = path[-1]
        if kind == "set":
            parent[last] = copy.deepcopy(op[2])
        elif kind == "del":
            del parent[last]
        elif kind == "extend":
            parent[last].extend(copy.deepcopy(op[2]))
        else:
            raise ValueError(f"unknown patch operation {kind!r}")
    return state
