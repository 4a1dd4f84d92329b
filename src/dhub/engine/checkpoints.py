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
    _advance(before, after, [], patch)
    return patch


def advance(before: dict[str, Any], after: dict[str, Any]) -> tuple[Patch, dict[str, Any]]:
    """``diff(before, after)`` and a snapshot of ``after`` to diff the next state against, in
    one pass. The snapshot shares ``before``'s unchanged parts (``before`` is a snapshot too,
    so nobody mutates them) and copies only what changed: a step's cost is what it changed,
    not the size of the state (no full copy per step, unlike ``snapshot``)."""
    patch: Patch = []
    return patch, _advance(before, after, [], patch)


def _advance(before: Any, after: Any, path: Path, patch: Patch) -> Any:
    if before is after:  # only ever true of immutable values: containers are never shared
        return before
    if type(before) is dict and type(after) is dict:
        return _advance_dict(before, after, path, patch)
    if _same(before, after):
        return before
    if type(before) is list and type(after) is list and _grew(before, after):
        added = after[len(before) :]
        patch.append(["extend", path, added])
        return before + _copy(added)
    patch.append(["set", path, after])
    return _copy(after)


def _advance_dict(
    before: dict[str, Any], after: dict[str, Any], path: Path, patch: Patch
) -> dict[str, Any]:
    # The hot loop of a saved step: most values are unchanged scalars or small unchanged
    # dicts, so those are settled here without a call, and a child's path is only built for
    # a value that is not plainly the same.
    if not before.keys() <= after.keys():
        for key in before:
            if key not in after:
                patch.append(["del", [*path, key]])
    out = {}
    for key, value in after.items():
        old = before.get(key, _MISSING)
        kind = type(value)
        if old is value or (kind is type(old) and kind in _SCALARS and old == value):
            out[key] = old
        elif old is _MISSING:
            patch.append(["set", [*path, key], value])
            out[key] = _copy(value)
        elif kind is dict and type(old) is dict and _flat_same(old, value):
            out[key] = old
        else:
            out[key] = _advance(old, value, [*path, key], patch)
    return out


def _flat_same(before: dict[str, Any], after: dict[str, Any]) -> bool:
    """Whether two dicts of scalars are equal as JSON (False also when either holds a
    container: the caller then compares them in full)."""
    if len(before) != len(after):
        return False
    for key, value in after.items():
        old = before.get(key, _MISSING)
        kind = type(value)
        if not (old is value or (kind is type(old) and kind in _SCALARS and old == value)):
            return False
    return True


_MISSING = object()
_SCALARS = frozenset({str, int, float, bool, type(None)})


def _copy(value: Any) -> Any:
    """A copy of a JSON value's containers (several times faster than ``copy.deepcopy``)."""
    kind = type(value)
    if kind is dict:
        return {k: _copy(v) for k, v in value.items()}
    if kind is list:
        return [_copy(v) for v in value]
    if kind is tuple:
        return tuple(_copy(v) for v in value)
    return value


def _grew(before: list[Any], after: list[Any]) -> bool:
    return 0 < len(before) < len(after) and _same(after[: len(before)], before)


def _same(a: Any, b: Any) -> bool:
    """Equal as JSON: ``==`` alone takes False for 0 and 1 for 1.0, inside lists too."""
    kind = type(a)
    if kind is not type(b):
        return False
    if kind is list:
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if kind is dict:
        return a.keys() == b.keys() and all(_same(v, b[k]) for k, v in a.items())
    return bool(a == b)


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
